"""Human units that adapt to the value: durations (ns/us/ms/s), byte sizes (B/KB/MB/GB), percentages, and counter
quantities in 10^3 steps (kB/s, MB/s, GB/s; kB, MB, GB; MHz, GHz) with three significant digits."""

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


DECIMAL_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
# A counter's unit as the reader gives it -> (factor to its base unit, the base unit) ('%' for any percentage).
RATE_UNITS = ("B/s", "bytes/s", "Bytes/s", "byte/s")
AMOUNT_UNITS = ("B", "bytes", "Bytes", "byte")
FREQUENCY_FACTORS = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}


def significant(value: float, digits: int = 3) -> str:
    """`value` with `digits` significant digits, thousands separated, no exponent ('3.71', '37.1', '371', '1,410')."""
    if value == 0 or not math.isfinite(value):
        return fixed(value, 0) if value == 0 else str(value)
    value = float(f"{value:.{digits}g}")  # rounded first: 0.9996 is '1.00', not '1.000'
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return fixed(value, decimals)


def base_unit(unit: str) -> tuple[float, str]:
    """(factor, base unit) of a counter unit: 'MHz' -> (1e6, 'Hz'), 'bytes/s' -> (1, 'B/s'), 'Throughput %' ->
    (1, '%'), '' or 'value' -> (1, '')."""
    unit = (unit or "").strip()
    if "%" in unit:
        return 1.0, "%"
    if unit in RATE_UNITS:
        return 1.0, "B/s"
    if unit in AMOUNT_UNITS:
        return 1.0, "B"
    if unit in FREQUENCY_FACTORS:
        return FREQUENCY_FACTORS[unit], "Hz"
    return 1.0, "" if unit == "value" else unit


def _prefix(magnitude: float) -> tuple[float, str]:
    return next(((s, p) for s, p in DECIMAL_PREFIXES if magnitude >= s), DECIMAL_PREFIXES[-1])


def quantity(value, unit: str) -> str:
    """A counter value in its unit, as a person reads it: '3.71 GB/s', '715 MB', '1.41 GHz', '65.1%', '1.15 G' (a
    value of unknown unit); '-' when missing."""
    if _missing(value):
        return "-"
    factor, base = base_unit(unit)
    value = float(value) * factor
    if base == "%":
        return percent(value)
    scale, prefix = _prefix(abs(float(f"{value:.3g}")))  # as rounded: 999.6 B/s is '1.00 kB/s', not '1,000 B/s'
    joined = f"{prefix}{base}" if len(base) <= 3 or not prefix else f"{prefix} {base}"
    return f"{significant(value / scale)} {joined}".rstrip()


def axis(largest, unit: str) -> tuple[float, str]:
    """(multiplier, label) for a plot axis of counter values in `unit` whose largest is `largest`: rates of up to
    12.1e9 B/s are drawn in GB/s, a clock of 1410 MHz in GHz; a percentage stays '%', an unknown unit 'value'."""
    factor, base = base_unit(unit)
    if base == "%":
        return 1.0, "%"
    scale, prefix = (1.0, "") if _missing(largest) else _prefix(abs(float(largest)) * factor)
    label = f"{prefix}{base}" if base else (f"value ({prefix})" if prefix else "value")
    return factor / scale, label
