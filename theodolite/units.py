"""Human-readable numbers with SI prefixes, for tables people read."""

from __future__ import annotations

import math

_PREFIXES: tuple[tuple[float, str], ...] = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_SMALL: tuple[tuple[float, str], ...] = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))
_BINARY: tuple[tuple[float, str], ...] = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def format_quantity(value: float, unit: str, digits: int = 4) -> str:
    """3.0e12 'B/s' -> '3 TB/s'; 52428800 'B' -> '50 MiB'; 4.1e-6 's' -> '4.1 us'."""
    if not math.isfinite(value):
        return f"{value} {unit}".strip()
    if unit in ("1", ""):
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.{digits}g}"
    if unit == "B":
        for scale, name in _BINARY:
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {name}"
        return f"{value:g} B"
    if unit == "s" and abs(value) < 1:
        for scale, prefix in _SMALL:
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {prefix}s"
        return f"{value / 1e-9:.{digits}g} ns"
    if unit in ("cycle", "B/cycle", "FLOP/cycle"):
        return f"{value:.{digits}g} {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"
