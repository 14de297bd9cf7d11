"""``validate --all-devices``: one sweep process per visible GPU, each a shard, merged into one file at the end.

A validation sweep is GPU-bound one shape at a time, so a node's GPUs take a suite's shards in parallel: GPU i runs
``--shard i/n`` into its own file next to the output, then the shard files are merged into the output and removed.
With ``--resume`` the output is continued: each shard file is seeded with the output's shapes that fall in its
shard, so a sweep begun on one GPU goes on over several (and the other way round).  The GPUs must be one model:
one results file describes one GPU.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from theodolite.results import Results, load_results, save_results
from theodolite.validation.shapes import Shape, ValidationError, result_key, shard_of
from theodolite.validation.sweep import merge_files

PROGRESS_EVERY_S = 30.0  # how often the parent prints the shards' shape counts


def shard_path(output: Path, index: int, count: int) -> Path:
    """``validate-x.json.gz`` -> ``validate-x.shard0of2.json.gz``: the shard's file beside the output."""
    name = output.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext):
            return output.with_name(f"{name[: -len(ext)]}.shard{index}of{count}{ext}")
    return output.with_name(f"{name}.shard{index}of{count}")


def shard_paths(output: Path, count: int) -> list[Path]:
    """The shard files of ``count`` GPUs beside ``output``."""
    return [shard_path(output, i, count) for i in range(count)]


def remove_stale(paths: Sequence[Path]) -> None:
    """A fresh run's shard files: any left by an earlier one (and their logs) go."""
    for path in paths:
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".log").unlink(missing_ok=True)


def visible_devices(count: int) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entry for each of ``count`` GPUs (the parent's own list where it has one)."""
    listed = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    return listed[:count] if len(listed) >= count else [str(i) for i in range(count)]


def check_one_model(names: Sequence[str]) -> None:
    if not names:
        raise ValidationError("--all-devices: no GPU visible to torch")
    if len(set(names)) > 1:
        raise ValidationError(
            f"--all-devices: the GPUs are not one model ({', '.join(sorted(set(names)))}); one results file "
            "describes one GPU: hide the others with CUDA_VISIBLE_DEVICES"
        )


def seed_shards(output: Path, shapes: Sequence[Shape], count: int, resume: bool) -> list[Path]:
    """The shard files for ``count`` GPUs: stale ones removed, or with ``resume`` each seeded from ``output``'s shapes
    of its shard (a shard file already there is kept: it is the newer)."""
    paths = shard_paths(output, count)
    if not resume:
        remove_stale(paths)
        return paths
    if not output.is_file():
        return paths
    base = load_results(output)
    suite = {shape.key for shape in shapes}
    for index, path in enumerate(paths):
        if path.is_file():
            continue
        keys = {shape.key for shape in shard_of(shapes, index, count)}
        kept = [s for s in base.shapes if result_key(s) in keys or (index == 0 and result_key(s) not in suite)]
        settings = {**base.settings, "shard": f"{index}/{count}", "shapes_total": len(keys)}
        settings["wall_s"] = base.settings.get("wall_s", 0.0) if index == 0 else 0.0  # --merge adds the shards' up
        save_results(replace(base, settings=settings, shapes=kept), path)
    return paths


def spawn(command: list[str], env: dict[str, str], log: Path) -> Any:
    """Start one shard's process with its output in ``log`` (an indirection tests replace); returns a Popen."""
    with open(log, "w") as handle:
        return subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT)


def run_shards(commands: Sequence[list[str]], paths: Sequence[Path], say: Callable[[str], None] = print) -> list[int]:
    """Run one process per GPU (``commands[i]`` on the i-th visible GPU), printing the shards' shape counts."""
    devices = visible_devices(len(commands))
    running = []
    for index, (command, path) in enumerate(zip(commands, paths, strict=True)):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": devices[index]}
        log = path.with_name(path.name + ".log")
        running.append(spawn(command, env, log))
        say(f"GPU {devices[index]}: shard {index}/{len(commands)} -> {path} (log {log})")
    last = time.monotonic()
    while any(process.poll() is None for process in running):
        time.sleep(min(1.0, PROGRESS_EVERY_S))
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            say("shapes done: " + ", ".join(_count(path) for path in paths))
    return [process.wait() for process in running]


def log_tail(path: Path, lines: int = 3) -> str:
    """The last lines of a shard's log (where a failed shard says why)."""
    log = path.with_name(path.name + ".log")
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return f"no log at {log}"


def _count(path: Path) -> str:
    try:
        results = load_results(path)
    except Exception:  # not written yet, or being rewritten this instant
        return "-"
    if "final_shard" in results.settings:  # a final round's shard: the shapes re-timed of its own
        return f"{sum(1 for shape in results.shapes if shape.final_ms)}/{len(results.shapes)} final"
    return f"{len(results.shapes)}/{results.settings.get('shapes_total', '?')}"


def merge_shards(paths: Sequence[Path], output: Path, remove: bool = True) -> Results:
    """Merge the shard files that exist into ``output``; with ``remove``, and every shard there, remove them and their
    logs once it is written (a failed shard's file and log stay for a look and for ``--resume``)."""
    present = [path for path in paths if path.is_file()]
    if not present:
        raise ValidationError(f"--all-devices: no shard wrote a results file (logs beside {output})")
    merged = merge_files(present, output)
    if len(present) < len(paths):  # a shard that never wrote its file leaves its shapes to a --resume
        merged.settings["incomplete"] = True
        save_results(merged, output)
    if remove and len(present) == len(paths):
        for path in present:
            path.unlink()
            path.with_name(path.name + ".log").unlink(missing_ok=True)
    return merged
