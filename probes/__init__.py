"""theodolite.probes"""
