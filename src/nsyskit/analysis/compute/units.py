"""Human units that adapt to the value: durations (ns/us/ms/s), byte sizes (B/KB/MB/GB), percentages."""

from __future__ import annotations

import math

DURATION_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
BYTE_UNITS = ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB"), (1, "B"))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals and thousands separators, never '-0.0' (a value that rounds to zero has no sign)."""
    text = f"{value:,.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def _scaled(value: float, units: tuple[tuple[float, str], ...]) -> str:
    magnitude = abs(value)
    scale, unit = next(((s, u) for s, u in units if magnitude >= s), units[-1])
    shown = value / scale
    if unit in ("ns", "B"):
        return f"{fixed(shown, 0)} {unit}"
    digits = 0 if abs(shown) >= 100 else 1 if abs(shown) >= 10 else 2
    return f"{fixed(shown, digits)} {unit}"


def duration(ns) -> str:
    """A duration in ns as '812 ns', '3.40 us', '12.3 ms', '1.52 s' (three significant digits); '-' when missing."""
    return "-" if _missing(ns) else _scaled(float(ns), DURATION_UNITS)


def size(nbytes) -> str:
    """A byte count as '512 B', '64.0 KB', '1.00 MB', '2.50 GB' (binary multiples); '-' when missing."""
    return "-" if _missing(nbytes) else _scaled(float(nbytes), BYTE_UNITS)


def percent(value) -> str:
    """A percentage with one decimal ('12.5%'); '-' when missing."""
    return "-" if _missing(value) else f"{fixed(float(value), 1)}%"


def duration_axis(largest_ns) -> tuple[float, str]:
    """(divisor, unit) for a plot axis of durations whose largest value is `largest_ns`."""
    if _missing(largest_ns):
        return 1e6, "ms"
    return next(((s, u) for s, u in DURATION_UNITS if abs(float(largest_ns)) >= s), DURATION_UNITS[-1])


def metric(name: str, value) -> str:
    """A run metric in its unit: a duration for *time* metrics, a percentage otherwise."""
    return duration(value) if "time" in name else percent(value)
