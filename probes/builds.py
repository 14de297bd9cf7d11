"""Refresh the compiler facts (``kernel_builds``) of existing profiles, with no GPU.

Calibration gathers them already; this is for when the bundled kernels or their config space
change after a card was calibrated: Triton compiles every config for the profile's architecture
(its bundled ptxas reports registers and spills) and the profile is rewritten atomically with the
new builds and every measured value untouched.

    python -m theodolite.probes.builds profiles/nvidia-h100-80gb-hbm3.h5 profiles/nvidia-h200.h5 --workers 16

Every dtype the API accepts is built by default, for the layouts and output sizes of ``kernels.build.BUILD_MATRIX``
(about 5,500 compiles, ~0.75 s each on one core; 17 min on 2 cores when Triton's cache holds the nn ones);
``--dtypes`` refreshes some (their builds are replaced whole, the others' kept), so a long refresh can run as
several shorter commands.  ``--decode`` compiles only the decode family
(``kernels.config.decode_configs``) and replaces only their builds.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence

from theodolite.errors import TheodoliteError
from theodolite.profile.hdf5 import load_profile, save_profile
from theodolite.profile.schema import KernelBuild

DEFAULT_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8e4m3", "fp8e5m2")  # kernels.config.DTYPE_BYTES


def refresh(
    paths: Sequence[str], dtypes: Sequence[str] = DEFAULT_DTYPES, workers: int | None = None, decode: bool = False
) -> None:
    """Compile once per architecture, then rewrite each profile with those builds (``decode``: the decode family's
    configs only, the profile's other builds kept)."""
    from theodolite.kernels.build import BUILD_MATRIX, compile_builds, kernel_source_key
    from theodolite.kernels.config import DTYPE_BYTES, decode_configs

    key = kernel_source_key()

    configs = {d: list(decode_configs(d)) for d in dtypes} if decode else None

    unknown = [d for d in dtypes if d not in DTYPE_BYTES]
    if unknown:
        raise TheodoliteError(f"unknown dtype(s) {', '.join(unknown)}; expected some of {', '.join(DTYPE_BYTES)}")
    profiles = [(path, load_profile(path)) for path in paths]
    by_arch: dict[str, list[KernelBuild]] = {}
    for path, profile in profiles:
        arch = profile.provenance.architecture
        if not arch.startswith("sm_"):
            raise TheodoliteError(f"{path}: architecture {arch!r}: only NVIDIA (sm_XX) builds can be compiled here")
        if arch not in by_arch:
            start = time.time()
            if configs is None:
                by_arch[arch] = compile_builds(tuple(dtypes), architecture=arch, workers=workers)
            else:  # one call per dtype: compile_builds takes one config list for all its dtypes
                by_arch[arch] = [
                    build
                    for dtype in dtypes
                    for build in compile_builds((dtype,), architecture=arch, configs=configs[dtype], workers=workers)
                ]
            print(f"{arch}: {len(by_arch[arch])} builds in {time.time() - start:.1f}s")
    for path, profile in profiles:
        fresh = by_arch[profile.provenance.architecture]
        # a refreshed dtype's builds are replaced whole: configs that left the space leave the profile too
        if configs is None:
            kept = [b for b in profile.kernel_builds if b.dtype not in dtypes]
        else:  # only the decode family's builds are replaced
            fresh_keys = {(c.key, d) for d in dtypes for c in configs[d]}
            kept = [b for b in profile.kernel_builds if (b.config_key, b.dtype) not in fresh_keys]
        # the profile's builds all come from today's kernel sources only when every dtype was refreshed (or they
        # already did): only then may a calibration reuse them (probes.runner.reusable_builds)
        whole = configs is None and set(dtypes) >= set(BUILD_MATRIX)
        source = key if whole or profile.provenance.kernel_source == key else ""
        updated = dataclasses.replace(
            profile,
            kernel_builds=tuple(kept + fresh),
            provenance=dataclasses.replace(profile.provenance, kernel_source=source),
        )
        save_profile(updated, path, overwrite=True)
        spills = sum(1 for b in fresh if b.n_spills > 0)
        print(f"{path}: {len(fresh)} builds written ({spills} spill), fingerprint {updated.fingerprint}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.probes.builds", description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", help="profile files to update in place")
    parser.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES), help="comma list (default: all)")
    parser.add_argument("--workers", type=int, default=None, help="compile processes (default: CPUs)")
    parser.add_argument(
        "--decode", action="store_true", help="only the decode family's configs (the other builds are kept)"
    )
    args = parser.parse_args(argv)
    try:
        refresh(args.profiles, [d for d in args.dtypes.split(",") if d], args.workers, args.decode)
    except TheodoliteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
