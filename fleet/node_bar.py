"""Node bring-up bar on a 2- or 4-GPU host: no false alarm, and each card the same as calibrated alone.

1. Each card calibrated alone, one after another, nothing else running on the host or the other GPUs:
   ``calibrate --device i --no-builds --no-model`` (full probes: the card's reference, ~45 s on an H100) and/or
   with ``--quick`` (~12 s).  ``--alone auto`` (default) takes both on 2 GPUs and the full one on more.
2. Three rounds of ``calibrate --all-devices --quick`` (kernel builds first, once per architecture, and the model
   stage after every card's probes) followed by ``check node/*.h5 --against profiles/<device>.h5``.
   ``--lean`` leaves the builds and the model stage out of the rounds (they never run beside a card's probes).
3. Every round's profile of a card against that card's alone profiles: per metric the deviation, the clock the
   metric ran at where the probe records one (``clock_hz_during``) with the clock-free (per cycle) deviation beside
   it, each card's ``clock_sustained_matrix_hz`` and nvidia-smi's temperature, power and SM clock before and after
   each round; per metric the largest deviation over rounds and cards.
   The bar's verdict uses the full alone profile when there is one ("the same card calibrated alone").

Run from the repository root:  PYTHONPATH=$PWD python3 fleet/node_bar.py [--lean] [--alone auto|quick|full|both]
JSON under $OUT (node_bar.json) and every profile, log and page of the run in one archive beside it
(node-bar-files.tar.gz; the run itself works in NODE_BAR_WORK or a temporary folder); a short table last.
Expected runtime on 2x H100: about 5 minutes (alone 2 x ~45 s full + 2 x ~12 s quick, 3 rounds of ~60-70 s with the
model stage; --lean rounds ~16 s); 4x H100: about 6-7 minutes (alone full only), --lean 197 s.  No new round starts past
NODE_BAR_BUDGET_S (default 420 s), so the whole fits 8 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BAR = 0.05
ROUNDS = 3
# no new round starts after this (the whole run must end within 8 minutes): a round's estimate is kept from the last
BUDGET_S = float(os.environ.get("NODE_BAR_BUDGET_S", "420"))
# how each alone profile is calibrated (the builds and model stage never touch the probes' metrics)
ALONE_ARGS = {"full": ["--no-builds", "--no-model"], "quick": ["--quick", "--no-builds", "--no-model"]}


ARCHIVE = "node-bar-files.tar.gz"
ARCHIVE_LIMIT_BYTES = 15 << 20  # what one result file may weigh where the run's files are collected


def pack(work: Path, out: Path, limit: int = ARCHIVE_LIMIT_BYTES) -> list[str]:
    """Archive the run's files (logs and pages first, then profiles) into ``out/ARCHIVE`` within ``limit`` bytes.

    One archive beside node_bar.json instead of ~20 loose files: collectors of a run's results often take a few
    files and only two folders down.  Returns the members left out (over the limit), which the report names.
    """
    files = sorted((p for p in work.rglob("*") if p.is_file()), key=lambda p: (p.suffix == ".h5", str(p)))
    left_out: list[str] = []
    total = 0
    with tarfile.open(out / ARCHIVE, "w:gz") as archive:
        for path in files:
            size = path.stat().st_size
            if total + size > limit:
                left_out.append(str(path.relative_to(work)))
                continue
            archive.add(path, arcname=str(path.relative_to(work)))
            total += size
    return left_out


def _run(command: list[str], log: Path) -> tuple[int, float, str]:
    begin = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    return done.returncode, time.perf_counter() - begin, (done.stdout + done.stderr)[-1500:]


def gpu_state() -> list[dict[str, str]]:
    """Temperature, power and SM clock of every GPU now (nvidia-smi; empty where it is missing)."""
    fields = "index,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active"
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = fields.split(",")
    return [dict(zip(names, (v.strip() for v in line.split(",")), strict=False)) for line in done.stdout.splitlines()]


def clock_of(profile: Any, name: str) -> float | None:
    """The SM clock ``name`` ran at, where its probe records one (``clock_hz_during``: the matrix and FMA
    throughputs); None otherwise (the card's ``clock_sustained_matrix_hz`` is recorded per card beside)."""
    measurement = profile.metrics.get(name)
    if measurement is None:
        return None
    during = measurement.settings.get("clock_hz_during")
    return float(during) if during else None


def deviations(profile: Any, alone: Any, judged: Callable[[str], bool]) -> dict[str, Any]:
    """Every metric of ``profile`` against the same card's ``alone`` profile (model parameters left out)."""
    rows: dict[str, dict[str, Any]] = {}
    for name, m in profile.metrics.items():
        if name.startswith("model_") or name not in alone.metrics or not alone.metrics[name].value:
            continue
        a = alone.metrics[name]
        row: dict[str, Any] = {
            "value": m.value,
            "alone": a.value,
            "deviation": m.value / a.value - 1.0,
            "judged": judged(name),
            "cv": m.cv,
            "alone_cv": a.cv,
        }
        clock, alone_clock = clock_of(profile, name), clock_of(alone, name)
        if clock and alone_clock:
            per_cycle, alone_per_cycle = m.value / clock, a.value / alone_clock
            row.update(
                {
                    "clock_hz": clock,
                    "alone_clock_hz": alone_clock,
                    "clock_deviation": clock / alone_clock - 1.0,
                    "per_cycle_deviation": per_cycle / alone_per_cycle - 1.0,
                }
            )
        rows[name] = row
    judged_rows = {k: v for k, v in rows.items() if v["judged"]}
    worst = max(judged_rows, key=lambda k: abs(judged_rows[k]["deviation"]), default="")
    clocks = {
        key: profile.metrics[key].value
        for key in ("clock_sustained_matrix_hz", "clock_max_hz")
        if key in profile.metrics
    }
    return {
        "max_judged_deviation": abs(judged_rows[worst]["deviation"]) if worst else 0.0,
        "max_judged_metric": worst,
        "over_bar": {k: round(v["deviation"], 4) for k, v in rows.items() if abs(v["deviation"]) > BAR},
        "over_bar_judged": sorted(k for k, v in judged_rows.items() if abs(v["deviation"]) > BAR),
        "clocks": clocks,
        "metrics": rows,
    }


def per_metric(rounds: list[dict[str, Any]], reference: str) -> dict[str, dict[str, Any]]:
    """Per metric over every round and card (against the ``reference`` alone profiles): the largest deviation, where,
    and each card's alone value with its node values round by round (and clocks where recorded)."""
    table: dict[str, dict[str, Any]] = {}
    for entry in rounds:
        for card in entry.get("cards", []):
            compared = card.get("against", {}).get(reference)
            if not compared:
                continue
            for name, row in compared["metrics"].items():
                item = table.setdefault(name, {"judged": row["judged"], "max_abs_deviation": 0.0, "cards": {}})
                per_card = item["cards"].setdefault(str(card["gpu"]), {"alone": row["alone"], "node": []})
                per_card["node"].append(row["value"])
                if "clock_hz" in row:
                    per_card.setdefault("alone_clock_hz", row["alone_clock_hz"])
                    per_card.setdefault("node_clock_hz", []).append(row["clock_hz"])
                    per_card.setdefault("per_cycle_deviation", []).append(round(row["per_cycle_deviation"], 5))
                if abs(row["deviation"]) >= item["max_abs_deviation"]:
                    item.update(
                        max_abs_deviation=abs(row["deviation"]),
                        worst={"round": entry["round"], "gpu": card["gpu"], "deviation": row["deviation"]},
                    )
    return table


def verdict(rounds: list[dict[str, Any]], reference: str) -> bool:
    """Every round's every card present and every judged metric within BAR of its ``reference`` alone profile."""
    cards = [c for r in rounds for c in r.get("cards", [])]
    return (
        bool(cards)
        and all(not c.get("missing") and reference in c.get("against", {}) for c in cards)
        and all(not c["against"][reference]["over_bar_judged"] for c in cards)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lean", action="store_true", help="node rounds without the kernel builds and model stage")
    parser.add_argument("--alone", choices=("auto", "quick", "full", "both"), default="auto")
    args = parser.parse_args(argv)

    import torch
    from theodolite.reports.check import Tolerances
    from theodolite.reports.fleet_check import fleet_check, peer_judged

    from theodolite.commands.calibrate import _targets
    from theodolite.profile import load_profile
    from theodolite.profile.resolve import slug

    out = Path(os.environ.get("OUT", "node-bar-out"))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("NODE_BAR_WORK") or tempfile.mkdtemp(prefix="node-bar-"))
    work.mkdir(parents=True, exist_ok=True)
    count = torch.cuda.device_count()
    if count < 2:
        print(f"node_bar: needs a host with 2 or more GPUs, torch sees {count}", file=sys.stderr)
        return 2
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    reference = Path("profiles") / f"{slug(names[0])}.h5"
    if not reference.is_file():
        print(f"node_bar: no bundled reference {reference} for {names[0]}", file=sys.stderr)
        return 2
    kinds = {"auto": ["full", "quick"] if count <= 2 else ["full"], "both": ["full", "quick"]}.get(
        args.alone, [args.alone]
    )
    lean = ["--no-builds", "--no-model"] if args.lean else []
    python = [sys.executable, "-m", "theodolite"]
    begin = time.perf_counter()
    report: dict[str, Any] = {
        "devices": names,
        "reference": str(reference),
        "bar": BAR,
        "lean": args.lean,
        "alone_kinds": kinds,
        "bar_reference": kinds[0],
        "alone": {},
        "rounds": [],
    }

    def save() -> None:
        report["wall_s"] = round(time.perf_counter() - begin, 1)
        (out / "node_bar.json").write_text(json.dumps(report, indent=1, default=str))

    alone: dict[str, list[Any]] = {}
    for kind in kinds:
        alone[kind] = []
        for index in range(count):
            path = work / f"alone-{kind}" / f"gpu{index}.h5"
            path.parent.mkdir(parents=True, exist_ok=True)
            command = [*python, "calibrate", "--device", str(index), *ALONE_ARGS[kind], "--force", "-o", str(path)]
            code, seconds, tail = _run(command, work / f"alone-{kind}-gpu{index}.log")
            report["alone"][f"{kind}/{index}"] = {
                "exit": code,
                "seconds": round(seconds, 1),
                "tail": tail if code else "",
            }
            alone[kind].append(load_profile(path) if code == 0 and path.is_file() else None)
            save()
    judged = lambda name: peer_judged(name, Tolerances({}, {}))  # noqa: E731

    last_round_s = 0.0
    for number in range(1, ROUNDS + 1):
        if time.perf_counter() - begin + last_round_s > BUDGET_S:
            report["rounds"].append({"round": number, "skipped": "time budget spent"})
            break
        round_begin = time.perf_counter()
        folder = work / f"node_r{number}"
        command = [*python, "calibrate", "--all-devices", "--quick", "--force", "-o", str(folder), *lean]
        state_before = gpu_state()
        code, seconds, tail = _run(command, work / f"node_r{number}.log")
        entry: dict[str, Any] = {
            "round": number,
            "calibrate_exit": code,
            "calibrate_s": round(seconds, 1),
            "gpus_before": state_before,
            "gpus_after": gpu_state(),
        }
        if code:
            entry["calibrate_tail"] = tail
        # whether the builds were reused (seconds) or compiled (minutes: kernel sources unlike the bundled profiles')
        log_text = (work / f"node_r{number}.log").read_text()
        entry["builds"] = [line for line in log_text.splitlines() if "kernel builds" in line][:4]
        targets = _targets(folder, names)
        present = [t for t in targets if t.is_file()]
        check_code, check_s, check_tail = _run(
            [*python, "check", *map(str, present), "--against", str(reference), "--html", str(folder / "node.html")],
            work / f"check_r{number}.log",
        )
        entry.update({"check_exit": check_code, "check_s": round(check_s, 1), "check_tail": check_tail[-800:]})
        profiles = [load_profile(t) if t.is_file() else None for t in targets]
        result = fleet_check([p for p in profiles if p is not None], load_profile(reference))
        cards = []
        for index, profile in enumerate(profiles):
            card: dict[str, Any] = {"gpu": index, "profile": str(targets[index])}
            if profile is None:
                card["missing"] = True
            else:
                found = next(c for c in result.cards if c.profile.origin == profile.origin)
                card.update(
                    {
                        "ref_failed": found.failed,
                        "ref_judged": sum(row.status == "pass" for row in found.rows) + len(found.failed),
                        "notes": profile.provenance.notes,
                        "against": {
                            kind: deviations(profile, alone[kind][index], judged)
                            for kind in kinds
                            if alone[kind][index] is not None
                        },
                    }
                )
            cards.append(card)
        entry["cards"] = cards
        report["rounds"].append(entry)
        last_round_s = time.perf_counter() - round_begin
        save()

    rounds = [r for r in report["rounds"] if "cards" in r]
    report["per_metric"] = {kind: per_metric(rounds, kind) for kind in kinds}
    report["bar_no_false_alarm"] = len(rounds) == ROUNDS and all(r["check_exit"] == 0 for r in rounds)
    report["bar_within_5pct_judged"] = {kind: len(rounds) == ROUNDS and verdict(rounds, kind) for kind in kinds}
    report["archive"] = {"file": ARCHIVE, "work": str(work), "left_out": pack(work, out)}
    save()
    print_table(report, count)
    return 0


def print_table(report: dict[str, Any], count: int) -> None:
    """The short table: per round and card the check and the worst judged deviation; the worst metrics overall."""
    kind = report["bar_reference"]
    print(f"\nnode bar on {count}x {report['devices'][0]} ({report['wall_s']:.0f} s; reference {report['reference']})")
    print(f"deviations against each card calibrated alone ({kind}); lean={report['lean']}")
    print(
        f"{'round':>5} {'gpu':>3} {'check':>5} {'ref fails':<24} {'max dev (judged)':<36} {'matrix clock':<17} over 5%"
    )
    for entry in report["rounds"]:
        if "cards" not in entry:
            print(f"{entry['round']:>5} skipped: {entry.get('skipped', '')}")
            continue
        for card in entry["cards"]:
            compared = card.get("against", {}).get(kind, {})
            worst = f"{100 * compared.get('max_judged_deviation', 0):.2f}% {compared.get('max_judged_metric', '')}"
            clock = compared.get("clocks", {}).get("clock_sustained_matrix_hz")
            clock_text = f"{clock / 1e9:.3f} GHz" if clock else "-"
            over = ", ".join(f"{k} {100 * v:+.1f}%" for k, v in compared.get("over_bar", {}).items()) or "-"
            fails = ", ".join(card.get("ref_failed", [])) or ("MISSING" if card.get("missing") else "-")
            print(
                f"{entry['round']:>5} {card['gpu']:>3} {entry['check_exit']:>5} {fails:<24} {worst:<36} "
                f"{clock_text:<17} {over}"
            )
    ranked = sorted(
        ((name, item) for name, item in report["per_metric"].get(kind, {}).items() if item["judged"]),
        key=lambda pair: -pair[1]["max_abs_deviation"],
    )[:6]
    print("largest judged deviations: " + ", ".join(f"{n} {100 * i['max_abs_deviation']:.1f}%" for n, i in ranked))
    print(
        f"no false alarm (check exit 0 every round): {report['bar_no_false_alarm']}; every judged metric within 5% "
        f"of alone: {report['bar_within_5pct_judged']}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
