"""theodolite.model"""
