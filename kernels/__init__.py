"""theodolite.kernels"""
