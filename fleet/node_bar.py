"""Node bring-up bar on a 2- or 4-GPU host: no false alarm, and each card the same as calibrated alone.

1. Each card calibrated alone, one after another (``calibrate --device i --quick --no-builds``: nothing
   else runs on the host or the other GPUs).
2. Three rounds of ``calibrate --all-devices --quick`` (kernel builds included: compiled first, once)
   followed by ``check node/*.h5 --against profiles/<device>.h5``.
3. Every round's profile of a card against that card's alone profile: the largest relative deviation
   over the judged metrics (what ``check`` judges: not model parameters, the clock ramp or the
   host-dependent launch costs), and every metric over 5% (judged or not).

``--quick`` writes the same metric set as a full calibration, with fewer points and shorter runs.
Run from the repository root:  PYTHONPATH=$PWD python3 fleet/node_bar.py [--lean]   (JSON under $OUT)
Expected runtime on 2x H100: about 5-6 minutes (4 quick calibrations of ~45 s, 3 node rounds of ~60-90 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BAR = 0.05
ROUNDS = 3
# --lean: the node rounds skip the kernel builds and the model stage (both run after, never beside, any card's probe
# timing; the bar is about the probes timed on every card at once), to fit a short lease
LEAN = ["--no-builds", "--no-model"] if "--lean" in sys.argv[1:] else []
# no new round starts after this (the whole run must end within a 10 minute limit)
BUDGET_S = float(os.environ.get("NODE_BAR_BUDGET_S", "480"))


def _run(command: list[str], log: Path) -> tuple[int, float, str]:
    begin = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    return done.returncode, time.perf_counter() - begin, (done.stdout + done.stderr)[-1500:]


def _deviations(profile: Any, alone: Any, judged: Any) -> dict[str, Any]:
    rows = {}
    for name, m in profile.metrics.items():
        if name.startswith("model_") or name not in alone.metrics or not alone.metrics[name].value:
            continue
        rows[name] = {
            "value": m.value,
            "alone": alone.metrics[name].value,
            "deviation": m.value / alone.metrics[name].value - 1.0,
            "judged": judged(name),
            "cv": m.cv,
            "alone_cv": alone.metrics[name].cv,
        }
    judged_rows = {k: v for k, v in rows.items() if v["judged"]}
    worst = max(judged_rows, key=lambda k: abs(judged_rows[k]["deviation"]), default="")
    return {
        "max_judged_deviation": abs(judged_rows[worst]["deviation"]) if worst else 0.0,
        "max_judged_metric": worst,
        "over_bar": {k: round(v["deviation"], 4) for k, v in rows.items() if abs(v["deviation"]) > BAR},
        "over_bar_judged": sorted(k for k, v in judged_rows.items() if abs(v["deviation"]) > BAR),
        "metrics": rows,
    }


def main() -> int:
    import torch
    from theodolite.reports.check import Tolerances
    from theodolite.reports.fleet_check import fleet_check, peer_judged

    from theodolite.commands.calibrate import _targets
    from theodolite.profile import load_profile
    from theodolite.profile.resolve import slug

    out = Path(os.environ.get("OUT", "node-bar-out"))
    out.mkdir(parents=True, exist_ok=True)
    count = torch.cuda.device_count()
    if count < 2:
        print(f"node_bar: needs a host with 2 or more GPUs, torch sees {count}", file=sys.stderr)
        return 2
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    reference = Path("profiles") / f"{slug(names[0])}.h5"
    if not reference.is_file():
        print(f"node_bar: no bundled reference {reference} for {names[0]}", file=sys.stderr)
        return 2
    python = [sys.executable, "-m", "theodolite"]
    begin = time.perf_counter()
    report: dict[str, Any] = {"devices": names, "reference": str(reference), "bar": BAR, "alone": {}, "rounds": []}

    def save() -> None:
        report["wall_s"] = round(time.perf_counter() - begin, 1)
        (out / "node_bar.json").write_text(json.dumps(report, indent=1, default=str))

    alone_paths = []
    for index in range(count):
        path = out / "alone" / f"gpu{index}.h5"
        path.parent.mkdir(parents=True, exist_ok=True)
        command = [*python, "calibrate", "--device", str(index), "--quick", "--no-builds", "--no-model", "--force",
                   "-o", str(path)]  # fmt: skip
        code, seconds, tail = _run(command, out / f"alone-gpu{index}.log")
        report["alone"][index] = {"exit": code, "seconds": round(seconds, 1), "tail": tail if code else ""}
        alone_paths.append(path)
        save()
    alone = [load_profile(p) if p.is_file() else None for p in alone_paths]
    judged = lambda name: peer_judged(name, Tolerances({}, {}))  # noqa: E731

    for number in range(1, ROUNDS + 1):
        if time.perf_counter() - begin > BUDGET_S:
            report["rounds"].append({"round": number, "skipped": "time budget spent"})
            break
        folder = out / f"node_r{number}"
        command = [*python, "calibrate", "--all-devices", "--quick", "--force", "-o", str(folder), *LEAN]
        code, seconds, tail = _run(command, out / f"node_r{number}.log")
        entry: dict[str, Any] = {"round": number, "calibrate_exit": code, "calibrate_s": round(seconds, 1)}
        if code:
            entry["calibrate_tail"] = tail
        targets = _targets(folder, names)
        present = [t for t in targets if t.is_file()]
        check_code, check_s, check_tail = _run(
            [*python, "check", *map(str, present), "--against", str(reference), "--html", str(folder / "node.html")],
            out / f"check_r{number}.log",
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
                verdict = next(c for c in result.cards if c.profile.origin == profile.origin)
                card.update(
                    {
                        "ref_failed": verdict.failed,
                        "ref_judged": sum(row.status == "pass" for row in verdict.rows) + len(verdict.failed),
                        "notes": profile.provenance.notes,
                    }
                )
                if alone[index] is not None:
                    card.update(_deviations(profile, alone[index], judged))
            cards.append(card)
        entry["cards"] = cards
        report["rounds"].append(entry)
        save()

    rounds = [r for r in report["rounds"] if "cards" in r]
    report["bar_no_false_alarm"] = bool(rounds) and all(r["check_exit"] == 0 for r in rounds)
    report["bar_within_5pct_judged"] = bool(rounds) and all(
        not c.get("over_bar_judged") and not c.get("missing") for r in rounds for c in r["cards"]
    )
    save()
    print(f"\nnode bar on {count}x {names[0]} ({report['wall_s']:.0f} s; reference {reference})")
    print(f"{'round':>5} {'gpu':>3} {'check':>5} {'ref fails':<28} {'max dev (judged)':<40} over 5% (any)")
    for entry in rounds:
        for card in entry["cards"]:
            worst = f"{100 * card.get('max_judged_deviation', 0):.2f}% {card.get('max_judged_metric', '')}"
            over = ", ".join(f"{k} {100 * v:+.1f}%" for k, v in card.get("over_bar", {}).items()) or "-"
            fails = ", ".join(card.get("ref_failed", [])) or ("MISSING" if card.get("missing") else "-")
            print(f"{entry['round']:>5} {card['gpu']:>3} {entry['check_exit']:>5} {fails:<28} {worst:<40} {over}")
    print(
        f"no false alarm (check exit 0 every round): {report['bar_no_false_alarm']}; "
        f"every judged metric within 5% of alone: {report['bar_within_5pct_judged']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
