"""theodolite.reports"""
