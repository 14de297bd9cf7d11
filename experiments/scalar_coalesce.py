"""Element-wise B loads laid along N (coalesced) or along K, as Triton 3.6 chose: does it pay?

An operand read element-wise (``A_VEC``/``B_VEC`` 1) is addressed by int32 offsets clamped at the matrix edge
(``kernels.epilogue.SCALAR_OFFSETS``).  The clamp hides the offsets' contiguity from Triton's coalescing pass, which
then breaks the tie between the two dimensions by laying a warp's 32 threads along the tile's first one: for B [K, N]
row-major (the nn and tn layouts) that is K, so each warp load touched 32 rows, two bytes from each (the TTGIR of
``splitk/64x64x128`` "scalar", nn: ``threadsPerWarp = [32, 1], order = [0, 1]`` for the 128x64 B tile).
``kernels.epilogue.SCALAR_COALESCE`` declares the clamped offsets contiguous along N (``tl.max_contiguous``), and the
threads go along the row (``[1, 32], order = [1, 0]``).  A column-major A came out along M by that tie-break already.

This times, for every random-dev shape whose binary reads B element-wise, the sweep's six fastest non-TMA configs both
ways in one process (the kernels copied with the switch flipped: ``harness.switched_plans``), beside torch.matmul, as
``theodolite validate`` times a shape, and prints each way's best against torch.  Run on a GPU from the repository
root (writes ``$OUT/scalar-coalesce-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/scalar_coalesce.py
"""

import sys

def main() -> None:
    from harness import gpu_name, time_switch
    from scalar_offsets import shapes

    gpu = gpu_name()
    todo = shapes(gpu, ("scalar", "scalar-b"))  # B read element-wise: the loads the switch lays out
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    time_switch(todo, "SCALAR_COALESCE", ("along-k", "coalesced"), f"scalar-coalesce-{gpu}", "scalar_coalesce.py")


if __name__ == "__main__":
    main()
