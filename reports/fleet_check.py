"""Node and fleet verdict: many cards, each against a reference and against the median of its peers.

Bring-up validates racks, not one card.  Every card is checked against the reference
(reports/check.py, per-metric tolerances) *and* against its peers: cards with the same device name,
metric by metric.  An outlier among identical cards is a signal even when every card is within the
reference's tolerance (a card 8% slower than its seven siblings is suspect; the reference's +-10% lets
it through).

Peer rule, per group of identical cards and per judged metric:

    median   = median of the group's values
    dev      = |value / median - 1|
    limit    = max(floor, PEER_K * 1.4826 * MAD(value / median), NOISE_FACTOR * the card's own CV)
    outlier  = dev > limit

``floor`` is half the metric's reference tolerance, at least PEER_MIN_FLOOR (bandwidths +-5%,
latencies +-7.5%, clocks 3%, driver counts exact), or ``--peer-tolerance`` for every non-exact
metric.  The MAD term (PEER_K = 3.5, the modified z-score rule of probes/analysis.py) widens the
limit where the whole group scatters; the CV term where the card's own measurement was noisy.  So
identical cards with a few % noise raise nothing, and one card 15% off is named.

A group needs MIN_PEERS (3) cards to name an outlier: with two, the median is their mean and
nothing says which card is off, so the page shows their difference ("differs": each card is off
the pair's mean by more than max(floor, its CV term), i.e. the two differ by more than twice that)
without failing either; the MAD term is left out for pairs (it would be their half-gap itself).
A lone card has no peers.  The verdict fails (exit 1) when any card fails against the reference
or is a peer outlier.  Judged metrics are those check.py judges: model parameters, the
clock ramp and the host-dependent launch costs are left out unless a tolerance file names them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from theodolite.reports.check import (
    HOST_DEPENDENT,
    INFORMATIONAL,
    NOISE_FACTOR,
    CheckRow,
    Tolerances,
    check_profiles,
    expected_failure,
)

from theodolite.profile.schema import METRICS, Profile
from theodolite.units import format_quantity

PEER_K = 3.5
PEER_MIN_FLOOR = 0.03
PEER_FLOOR_SHARE = 0.5
MIN_PEERS = 3
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class PeerCell:
    """One card's metric against its group's median."""

    value: float
    median: float
    limit: float  # relative deviation allowed
    status: str  # "ok", "outlier", "differs" (pair: reported, not failing), "alone"

    @property
    def ratio(self) -> float:
        return self.value / self.median if self.median else math.nan


@dataclass
class Card:
    """One profile of the fleet with its reference rows and peer cells."""

    label: str
    profile: Profile
    rows: list[CheckRow] = field(default_factory=list)  # against the reference (empty without one)
    peers: dict[str, PeerCell] = field(default_factory=dict)
    group_size: int = 1

    @property
    def failed(self) -> list[str]:
        return [row.metric for row in self.rows if row.failed and not expected_failure(row)]

    @property
    def outliers(self) -> list[str]:
        return [name for name, cell in self.peers.items() if cell.status == "outlier"]

    @property
    def differs(self) -> list[str]:
        return [name for name, cell in self.peers.items() if cell.status == "differs"]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.outliers


@dataclass
class FleetResult:
    cards: list[Card]
    reference: Profile | None

    @property
    def passed(self) -> bool:
        return all(card.passed for card in self.cards)

    def metrics(self) -> list[str]:
        """Metrics shown: those any card or the reference has, in schema order, judged ones first."""
        present = {name for card in self.cards for name in card.profile.metrics}
        if self.reference is not None:
            present |= set(self.reference.metrics)
        return [name for name in METRICS if name in present]


def labels(paths: Sequence[str | Path]) -> list[str]:
    """Shortest unique path tails: gpu0.h5, gpu1.h5, or node-a/nvidia-h100.h5 when file names repeat."""
    parts = [Path(path).parts for path in paths]
    for depth in range(1, max((len(p) for p in parts), default=1) + 1):
        tails = ["/".join(p[-depth:]) for p in parts]
        if len(set(tails)) == len(tails):
            return tails
    return [str(path) for path in paths]


def peer_judged(name: str, tolerances: Tolerances) -> bool:
    """Whether the peer check judges ``name`` (the metrics check.py judges; info ones only when named)."""
    if name not in METRICS or tolerances.for_metric(name).skip:
        return False
    if name in tolerances.metrics:
        return True
    return not (name.startswith("model_") or name in INFORMATIONAL or name in HOST_DEPENDENT)


def peer_floor(name: str, tolerances: Tolerances, peer_tolerance: float | None, median: float) -> float:
    """The smallest relative deviation that can make a card an outlier on ``name``."""
    tolerance = tolerances.for_metric(name)
    if tolerance.rel == 0 and tolerance.abs is None:
        return 0.0  # driver counts: any difference among identical cards is a finding
    if peer_tolerance is not None:
        return peer_tolerance
    rel = tolerance.rel if tolerance.rel is not None else 0.0
    if tolerance.abs is not None and median:
        rel = max(rel, tolerance.abs / abs(median))
    return max(PEER_MIN_FLOOR, PEER_FLOOR_SHARE * rel)


def _cv(profile: Profile, name: str) -> float:
    cv = profile.metrics[name].cv
    return float(cv) if math.isfinite(cv) else 0.0


def peer_cells(
    profiles: Sequence[Profile], name: str, floor: float, *, min_peers: int = MIN_PEERS
) -> list[PeerCell | None]:
    """Each card's cell for ``name`` among ``profiles`` (one group); None for a card that lacks the metric."""
    have = [i for i, p in enumerate(profiles) if name in p.metrics]
    cells: list[PeerCell | None] = [None] * len(profiles)
    if len(have) < 2:
        for i in have:
            cells[i] = PeerCell(profiles[i].metrics[name].value, math.nan, math.nan, "alone")
        return cells
    values = np.array([profiles[i].metrics[name].value for i in have], dtype=float)
    median = float(np.median(values))
    if median == 0:
        return cells
    ratios = values / median
    # the group's own scatter, robustly; two cards have no scatter to speak of (each is off by half their gap)
    spread = PEER_K * MAD_TO_SIGMA * float(np.median(np.abs(ratios - 1.0))) if len(have) >= min_peers else 0.0
    for i, ratio in zip(have, ratios, strict=True):
        limit = max(floor, spread, NOISE_FACTOR * _cv(profiles[i], name))
        off = abs(float(ratio) - 1.0) > limit + 1e-12
        status = ("outlier" if len(have) >= min_peers else "differs") if off else "ok"
        cells[i] = PeerCell(float(values[have.index(i)]), median, limit, status)
    return cells


def group_key(profile: Profile) -> str:
    return profile.device_name.strip().lower()


def fleet_check(
    profiles: Sequence[Profile],
    reference: Profile | None,
    tolerances: Tolerances | None = None,
    *,
    peer_tolerance: float | None = None,
    names: Sequence[str] | None = None,
) -> FleetResult:
    """Every card against the reference (if any) and against the median of its same-device peers."""
    tolerances = tolerances or Tolerances({}, {})
    if peer_tolerance is not None and peer_tolerance < 0:
        raise ValueError(f"peer tolerance must be >= 0, got {peer_tolerance}")
    shown = list(names) if names is not None else labels([p.origin for p in profiles])
    cards = [
        Card(label, profile, check_profiles(profile, reference, tolerances) if reference is not None else [])
        for label, profile in zip(shown, profiles, strict=True)
    ]
    groups: dict[str, list[int]] = {}
    for index, profile in enumerate(profiles):
        groups.setdefault(group_key(profile), []).append(index)
    for members in groups.values():
        group = [profiles[i] for i in members]
        for i in members:
            cards[i].group_size = len(members)
        metric_names = [n for n in METRICS if any(n in p.metrics for p in group) and peer_judged(n, tolerances)]
        for name in metric_names:
            values = [p.metrics[name].value for p in group if name in p.metrics]
            floor = peer_floor(name, tolerances, peer_tolerance, float(np.median(values)))
            for i, cell in zip(members, peer_cells(group, name, floor), strict=True):
                if cell is not None:
                    cards[i].peers[name] = cell
    return FleetResult(cards, reference)


# --- terminal ---------------------------------------------------------------------------------


def _fmt(value: float | None, unit: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format_quantity(value, unit)


def _peer_text(card: Card) -> str:
    if card.group_size < 2:
        return "no peers"
    if card.outliers:
        worst = ", ".join(f"{n} {card.peers[n].ratio:.3f}x" for n in card.outliers[:4])
        return f"outlier: {worst}" + (" ..." if len(card.outliers) > 4 else "")
    if card.group_size < MIN_PEERS:
        return "pair: differs on " + ", ".join(card.differs[:4]) if card.differs else "pair: agree"
    return f"ok (1 of {card.group_size} alike)"


def summary_table(result: FleetResult) -> Any:
    from rich.table import Table

    ref = result.reference
    title = f"fleet check: {len(result.cards)} card(s)" + (
        f" against {ref.device_name} ({ref.origin})" if ref else " (peers only)"
    )
    failing = sum(not card.passed for card in result.cards)
    table = Table(title=title, caption=f"{failing} of {len(result.cards)} card(s) failed: " + _word(result.passed))
    for column in ("card", "device", "host", "against reference", "against peers", "verdict"):
        table.add_column(column, overflow="fold")
    for card in result.cards:
        if ref is None:
            against = "-"
        elif card.failed:
            against = f"[red]FAIL[/red] {', '.join(card.failed)}"
        else:
            judged = sum(row.status == "pass" for row in card.rows)
            against = f"[green]pass[/green] ({judged} metrics)"
        verdict = "[green]PASS[/green]" if card.passed else "[red]FAIL[/red]"
        peers = _peer_text(card)
        peers = f"[red]{peers}[/red]" if card.outliers else (f"[yellow]{peers}[/yellow]" if card.differs else peers)
        table.add_row(card.label, card.profile.device_name, card.profile.provenance.host, against, peers, verdict)
    return table


def findings_table(result: FleetResult) -> Any | None:
    """One row per failing, outlying or differing (card, metric); None when there is nothing to show."""
    from rich.table import Table

    rows = []
    for card in result.cards:
        by_metric = {row.metric: row for row in card.rows}
        for name in METRICS:
            row = by_metric.get(name)
            cell = card.peers.get(name)
            failed = row is not None and row.failed and not expected_failure(row)
            if not failed and (cell is None or cell.status not in ("outlier", "differs")):
                continue
            unit = METRICS[name].unit
            value = card.profile.get(name)
            ratio = "-" if row is None or row.ratio is None else f"{row.ratio:.3f}"
            peer = "-" if cell is None or not math.isfinite(cell.ratio) else f"{cell.ratio:.3f}"
            limit = "-" if cell is None or not math.isfinite(cell.limit) else f"+-{cell.limit:.1%}"
            what = ["reference " + row.status] if failed and row is not None else []
            if cell is not None and cell.status in ("outlier", "differs"):
                what.append(f"peer {cell.status}")
            rows.append([card.label, name, _fmt(value, unit), ratio, peer, limit, ", ".join(what)])
    if not rows:
        return None
    table = Table(title="findings")
    for column in ("card", "metric", "value", "/ref", "/peers", "peer limit", "what"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _word(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


# --- HTML -------------------------------------------------------------------------------------

FLEET_CSS = """
.scroll { overflow-x: auto; max-width: 100%; }
table.fleet td, table.fleet th { white-space: nowrap; font-size: .82em; }
table.fleet th.card, table.fleet td.card { position: sticky; left: 0; background: #fff; z-index: 1; }
table.fleet th.card { background: #f0f0f0; }
table.fleet td .r { display: block; color: #555; font-size: .85em; }
td.fail, span.key.fail { background: #fde2e2; }
td.outlier, span.key.outlier { background: #ffd8a8; outline: 2px solid #d9480f; outline-offset: -2px; }
td.differs, span.key.differs { background: #fff6d6; }
td.info, span.key.info { color: #888; }
td.noisy, span.key.noisy { font-style: italic; }
span.key { display: inline-block; padding: .1em .6em; margin-right: .6em; border: 1px solid #ccc; }
"""


def _cell(card: Card, name: str) -> tuple[str, list[str]]:
    from theodolite.reports import html

    unit = METRICS[name].unit
    value = card.profile.get(name)
    if value is None:
        return "-", ["info"]
    row = next((r for r in card.rows if r.metric == name), None)
    cell = card.peers.get(name)
    parts = [html.esc(_fmt(value, unit))]
    ratios = []
    if row is not None and row.ratio is not None:
        ratios.append(f"ref {row.ratio:.3f}x")
    if cell is not None and math.isfinite(cell.ratio):
        ratios.append(f"peers {cell.ratio:.3f}x")
    if ratios:
        parts.append(f"<span class='r'>{html.esc(' / '.join(ratios))}</span>")
    classes = []
    if row is not None and row.failed and not expected_failure(row):
        classes.append("fail")
    if cell is not None and cell.status in ("outlier", "differs"):
        classes.append(cell.status)
    if (row is None or row.status in ("info", "skip")) and cell is None:
        classes.append("info")
    if card.profile.metrics[name].flagged:
        classes.append("noisy")
    return "".join(parts), classes


def render_fleet_html(result: FleetResult, tolerance_file: str | None = None) -> str:
    """One self-contained page: a verdict per card, then cards x metrics with failures and outliers marked."""
    from theodolite.reports import html

    ref = result.reference
    failing = [card for card in result.cards if not card.passed]
    badge = f'<span class="badge {"good" if result.passed else "bad"}">{_word(result.passed)}</span>'
    body = [
        f"<style>{FLEET_CSS}</style>",
        f"<p>{badge} {len(result.cards)} card(s), {len(failing)} failed. "
        + (
            f"Reference: <b>{html.esc(ref.device_name)}</b> ({html.esc(ref.origin)}, "
            f"{'tolerances from ' + html.esc(tolerance_file) if tolerance_file else 'default tolerances'})."
            if ref is not None
            else "No reference: peers only."
        )
        + "</p>",
        "<p class='small'>Each card is checked against the reference (per-metric tolerance) and against the median "
        "of the cards with the same device name: a card deviating from its peers' median by more than the largest "
        f"of half the metric's tolerance (at least {PEER_MIN_FLOOR:.0%}), {PEER_K} robust standard deviations of "
        f"the group and {NOISE_FACTOR:g}x its own CV is an outlier. Groups of two cannot name an outlier: their "
        "difference is shown, not failed.</p>",
        "<p class='legend'><span class='key fail'>fails against the reference</span>"
        "<span class='key outlier'>outlier among its peers</span>"
        "<span class='key differs'>pair of cards differ (not failing)</span>"
        "<span class='key info'>not judged</span><span class='key noisy'>noisy measurement (italic)</span></p>",
        "<h2>Cards</h2>",
    ]
    summary = []
    classes = []
    for card in result.cards:
        summary.append(
            [
                card.label,
                card.profile.device_name,
                card.profile.provenance.host,
                "-" if ref is None else (", ".join(card.failed) or "pass"),
                _peer_text(card),
                _word(card.passed),
            ]
        )
        classes.append("pass" if card.passed else "fail")
    body.append(
        html.table(
            ["card", "device", "host", "against reference", "against peers", "verdict"],
            summary,
            row_classes=classes,
            cell_classes={5: "status"},
        )
    )
    body.append("<h2>Cards &times; metrics</h2>")
    body.append(
        "<p class='small'>Each cell: the card's value, its ratio to the reference and to the median of its "
        "peers (cards with the same device name).</p>"
    )
    names = result.metrics()
    grid = ["<div class='scroll'><table class='fleet'><thead><tr><th class='card'>metric</th>"]
    if ref is not None:
        grid.append("<th><i>reference</i></th>")
    grid += [f"<th>{html.esc(card.label)}</th>" for card in result.cards]
    grid.append("</tr></thead><tbody>")
    for name in names:
        grid.append(f"<tr><td class='card' title='{html.esc(METRICS[name].description)}'>{html.esc(name)}</td>")
        if ref is not None:
            grid.append(f"<td class='num'>{html.esc(_fmt(ref.get(name), METRICS[name].unit))}</td>")
        for card in result.cards:
            text, css = _cell(card, name)
            grid.append(f"<td class='{' '.join(['num', *css])}'>{text}</td>")
        grid.append("</tr>")
    grid.append("</tbody></table></div>")
    body.append("".join(grid))
    title = f"Fleet check: {len(result.cards)} card(s)"
    return html.page(title, body, f"against {ref.device_name}" if ref is not None else "peers only")
