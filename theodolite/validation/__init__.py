"""Validation harness: the model's pick against the exhaustive oracle, torch.matmul and peers, per shape.

For each shape, one run times side by side (``theodolite.kernels.benchmark``'s timer: fresh random
inputs, outputs checked against torch.matmul, median of L2-flushed runs): torch.matmul, every legal
config of the kernels' space (the oracle), and therefore the model's pick and each peer's pick
(a fixed 128x128x64 config, nvMatmulHeuristics' pick mapped onto our nearest legal config, and
optionally Triton's autotune procedure over the same space, whose wall time is reported).

The results file (``theodolite.results``) is rewritten after every shape, so ``--resume`` continues
an interrupted sweep, ``--shard i/n`` splits one over several machine calls (merge with
``--merge``), and ``--budget-s`` stops before a shape that would not fit.  Measurement, model,
peers and the clock are injected, so the bookkeeping is tested on a CPU with fake timings.

``summarize(results)`` is the one place the summary figures are computed (harness and report page).

The modules, one job each: ``shapes`` (settings, suites, shards), ``picks`` (the model's pick), ``peers``
(fixed and nvMatmulHeuristics picks), ``sweep`` (the per-shape sweep and its bookkeeping), ``final`` (the
side-by-side final round), ``summary`` (the figures), ``gpu`` (the GPU entry points), ``devices`` (a shard per GPU of
a node, ``--all-devices``) and ``dry_run``.  This
package re-exports their names: import from ``theodolite.validation``.
"""

from __future__ import annotations

# The private names re-exported here (``_precompile_pairs``, ...) are imported by other modules and tests:
# ruff: noqa: F401
from theodolite.validation.dry_run import CONFIG_OVERHEAD_MS, FLUSH_MS, dry_run, estimate_shape_s
from theodolite.validation.final import (
    FINAL_PREDICTED,
    FINAL_TOP,
    Final,
    _release_memory,
    add_final_round,
    final_candidates,
    time_final_round,
)
from theodolite.validation.gpu import (
    _precompile_pairs,
    final_on_file,
    gpu_autotune,
    gpu_final,
    gpu_floors,
    gpu_measure,
    load_validation_profile,
    precompile_all,
    validate,
)
from theodolite.validation.peers import (
    _NVMMH_PRECISION,
    FIXED_CONFIG,
    PEERS,
    NvmmhPeer,
    _log2,
    add_peer_picks,
    fixed_pick,
    nearest_config,
)
from theodolite.validation.picks import ModelPick, add_model_picks, model_pick
from theodolite.validation.shapes import (
    Shape,
    ValidateSettings,
    ValidationError,
    load_shapes,
    parse_shard,
    result_key,
    shard_of,
)
from theodolite.validation.summary import (
    _geomean,
    _num,
    _percentile,
    _progress,
    arithmetic_intensity,
    print_summary,
    rank_correlation,
    recorded_picks,
    shape_line,
    shape_summary,
    summarize,
    summary_lines,
)
from theodolite.validation.sweep import (
    Autotune,
    Harness,
    Measure,
    _new_results,
    merge_files,
    run_validation,
    validate_shape,
)

__all__ = [
    "CONFIG_OVERHEAD_MS",
    "FINAL_PREDICTED",
    "FINAL_TOP",
    "FIXED_CONFIG",
    "FLUSH_MS",
    "PEERS",
    "Autotune",
    "Final",
    "Harness",
    "Measure",
    "ModelPick",
    "NvmmhPeer",
    "Shape",
    "ValidateSettings",
    "ValidationError",
    "add_final_round",
    "add_model_picks",
    "add_peer_picks",
    "arithmetic_intensity",
    "dry_run",
    "estimate_shape_s",
    "final_candidates",
    "final_on_file",
    "fixed_pick",
    "gpu_autotune",
    "gpu_final",
    "gpu_floors",
    "gpu_measure",
    "load_shapes",
    "load_validation_profile",
    "merge_files",
    "model_pick",
    "nearest_config",
    "parse_shard",
    "precompile_all",
    "print_summary",
    "rank_correlation",
    "recorded_picks",
    "result_key",
    "run_validation",
    "shape_line",
    "shape_summary",
    "shard_of",
    "summarize",
    "summary_lines",
    "time_final_round",
    "validate",
    "validate_shape",
]
