"""Do a TMA kernel's copies into shared memory share the bandwidth its matrix instructions read it at?  The model
counts every operand byte written to shared memory and read from it against the shared-memory probe's rate
(`model.compute.smem_time`); this refits a profile from its stored calibration timings with and without the TMA
copies' writes counted, and prints the TMA probes' fit (log-RMS) and the picks on committed sweeps.  CPU only.

    PYTHONPATH=$PWD THEODOLITE_GRID_CACHE=0 python3 experiments/tma_smem_writes.py [--profile P.h5] [SWEEP.json ...]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from theodolite.model.evaluate import summarize
from theodolite.model.predict import ConfigTable, clear_tables
from theodolite.probes.model_stage import refit

from theodolite.profile import load_profile
from theodolite.results import load_results

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def tma_writes_free() -> Iterator[None]:
    """Every config table built inside leaves TMA configs' shared-memory writes out of their K-step."""
    original = ConfigTable.__init__

    def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        written = (self.bm + self.bn) * self.bk * self.hw.element_bytes / self.hw.smem_bandwidth
        self.smem_it = self.smem_it - np.where(self.is_tma, written, 0.0)

    ConfigTable.__init__ = init  # type: ignore[method-assign]
    clear_tables()
    try:
        yield
    finally:
        ConfigTable.__init__ = original  # type: ignore[method-assign]
        clear_tables()


def score(profile_path: str, sweeps: Sequence[str], free: bool) -> None:
    context = tma_writes_free() if free else contextlib.nullcontext()
    with context:
        fitted, report = refit(load_profile(profile_path))
        print(f"== TMA writes {'not counted' if free else 'counted (shipped)'}")
        for name, parameter in (("tma-stages", "model_tma_latency_hiding"), ("composite-step",
                                "model_composite_iteration_overhead"), ("tile", "model_tile_overhead")):  # fmt: skip
            result = report.probe_results.get(parameter)
            if result is not None:
                value = result.values[parameter]
                print(f"  probe {name:15s} {parameter} = {value:.4g}, log-RMS {result.residual_rms:.3f}")
        for sweep in sweeps:
            s = summarize(load_results(Path(sweep)), fitted, peer_pickers={})
            print(f"  {Path(sweep).stem:36s} {s.geomean:.3f} / {s.p5:.3f} / {s.minimum:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default=str(ROOT / "profiles" / "nvidia-h200.h5"))
    parser.add_argument("sweeps", nargs="*", default=[
        str(ROOT / "reports" / "results" / f"validate-{name}-h200.json")
        for name in ("wide-711167", "wide-147226", "llm-nt", "llm-tf32-nt")])  # fmt: skip
    args = parser.parse_args(argv)
    for free in (False, True):
        score(args.profile, args.sweeps, free)
    return 0


if __name__ == "__main__":
    sys.exit(main())
