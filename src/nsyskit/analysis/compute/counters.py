"""Time-weighted statistics of the counters sampled beside the trace, per device and metric, over a rank's window.

Each sample holds its value over [start, end) (read/counterread.py says how each form is timed); the window clips
it. Per series: samples, the time covered, mean, p50, p95 (a value weighted by the time it held) and max, the
total moved for rates ("B/s" -> bytes), and the mean while the rank's kernels (of that GPU, for GPU metrics) and
its NCCL kernels ran. For the run's heat map and its merge, each series' sums per time bin (value x time, time
covered, max): bins start at the rank's window start, their width 1 ms x 2^k (at most MAX_BINS of them), so a
merge brings every rank to the widest width by adding whole bins, exactly.
"""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.counterread import EFA, NIC, Series

MAX_BINS = 64  # time bins per series and rank in the parts (the heat map's columns)
BASE_BIN_NS = 1_000_000  # the narrowest bin: 1 ms; wider ones double it
NS_PER_S = 1e9
TABLES = ("counters", "counter_bins", "counter_steps")  # the per-rank tables rank_tables gives (the parts carry them)
STAT_COLUMNS = ("kind", "device", "metric", "unit", "samples", "covered_ns", "mean", "p50", "p95", "max", "total",
                "total_unit", "busy_mean", "nccl_mean", "window_start_ns", "window_end_ns")  # fmt: skip
BIN_COLUMNS = ("kind", "device", "metric", "bin", "bin_ns", "value_ns", "covered_ns", "max")
STEP_COLUMNS = ("step", "kind", "device", "metric", "unit", "total")


def bin_width(window_ns: int) -> int:
    """The narrowest 1 ms x 2^k width that covers `window_ns` in at most MAX_BINS bins."""
    width = BASE_BIN_NS
    while width * MAX_BINS < window_ns:
        width *= 2
    return width


def is_rate(unit: str) -> bool:
    """Whether a unit is a rate per second (its integral over time is an amount)."""
    return unit.endswith("/s")


def _clip(series: Series, low: int, high: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The samples holding for some time inside [low, high): their clipped starts, ends and values."""
    start, end = np.maximum(series.start, low), np.minimum(series.end, high)
    keep = (end > start) & ~np.isnan(series.value)
    return start[keep], end[keep], series.value[keep]


def _integral(start: np.ndarray, end: np.ndarray, value: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The integral of the step function (value over each disjoint sorted [start, end)) from -inf to each `at`."""
    full = np.r_[0.0, np.cumsum(value * (end - start))]
    k = np.searchsorted(start, at, side="right")  # samples starting at or before each point
    tail = np.where(k > 0, np.maximum(end[k - 1] - at, 0), 0)  # the part of sample k-1 after the point
    return full[k] - np.where(k > 0, value[k - 1], 0.0) * tail


def _covered(union_start: np.ndarray, union_end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How much of the disjoint sorted intervals lies before each point of `at`."""
    return _integral(union_start, union_end, np.ones(len(union_start)), at)


def _quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value below which at least q of the weight lies."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(values[order][min(np.searchsorted(cumulative, q * cumulative[-1], side="left"), len(values) - 1)])


def _mean_over(start, end, value, union: tuple[np.ndarray, np.ndarray]) -> float:
    """The time-weighted mean of the samples over the part of their time inside `union` (NaN when none is)."""
    if not len(union[0]):
        return np.nan
    inside = _covered(*union, end) - _covered(*union, start)
    total = inside.sum()
    return float((value * inside).sum() / total) if total > 0 else np.nan


def counter_stats(
    series: list[Series], window: tuple[int, int], busy: dict[int, tuple[np.ndarray, np.ndarray]],
    nccl: tuple[np.ndarray, np.ndarray],
) -> Table:  # fmt: skip
    """One row per series sampled inside the window: mean, p50, p95, max (time-weighted) and the rest (see module).

    `busy`: per GPU id, the union of its kernels (a GPU metric's 'busy_mean' is over its own GPU's kernels; a network
    counter's over any GPU's); `nccl`: the union of the rank's NCCL kernels."""
    low, high = window
    rows = []
    every = _every(busy)
    for one in series:
        start, end, value = _clip(one, low, high)
        if not len(value):
            continue
        weight = end - start
        covered = int(weight.sum())
        rate = is_rate(one.unit)
        rows.append((one.kind, one.device, one.metric, one.unit, len(value), covered,
                     float((value * weight).sum() / covered), _quantile(value, weight, 0.5),
                     _quantile(value, weight, 0.95), float(value.max()),
                     float((value * weight).sum() / NS_PER_S) if rate else np.nan, one.unit[:-2] if rate else "",
                     _mean_over(start, end, value, busy.get(one.device_id, every) if one.device_id >= 0 else every),
                     _mean_over(start, end, value, nccl), low, high))  # fmt: skip
    return _table(STAT_COLUMNS, rows)


def _every(busy: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The union of every GPU's busy intervals."""
    from nsyskit.analysis.compute.intervals import merge

    return merge(*busy.values())


def _table(names: tuple[str, ...], rows: list[tuple]) -> Table:
    """A Table of `rows` (tuples in `names` order), text columns as objects, numbers as int64 or float64."""
    if not rows:
        return Table({name: np.empty(0, dtype=object if name in _TEXT else np.float64) for name in names})
    columns = list(zip(*rows, strict=True))
    return Table(
        {name: np.array(col, dtype=object if name in _TEXT else None) for name, col in zip(names, columns, strict=True)}
    )


_TEXT = {"kind", "device", "metric", "unit", "total_unit"}


def counter_bins(series: list[Series], window: tuple[int, int]) -> Table:
    """Per series and time bin of the window: value x time (value_ns), time covered and the max of the samples."""
    low, high = window
    width = bin_width(high - low)
    count = max(1, -(-(high - low) // width))
    edges = low + width * np.arange(count + 1, dtype=np.int64)
    edges[-1] = min(edges[-1], high)
    parts = []
    for one in series:
        start, end, value = _clip(one, low, high)
        if not len(value):
            continue
        sums = np.diff(_integral(start, end, value, edges))
        covered = np.diff(_integral(start, end, np.ones(len(value)), edges))
        first, last = (start - low) // width, (end - 1 - low) // width
        spans = last - first + 1
        where = np.repeat(first, spans) + (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans))
        highest = np.full(count, -np.inf)
        np.maximum.at(highest, where, np.repeat(value, spans))
        held = covered > 0
        bins = np.flatnonzero(held)
        parts.append((one, bins, sums[held], covered[held], highest[held]))
    n = sum(len(p[1]) for p in parts)

    def text(pick) -> np.ndarray:
        out = np.empty(n, dtype=object)
        out[:] = [v for p in parts for v in [pick(p[0])] * len(p[1])]
        return out

    cat = (lambda i, dtype: np.concatenate([p[i] for p in parts]).astype(dtype)) if parts else (
        lambda i, dtype: np.empty(0, dtype=dtype))  # fmt: skip
    return Table({
        "kind": text(lambda s: s.kind), "device": text(lambda s: s.device), "metric": text(lambda s: s.metric),
        "bin": cat(1, np.int64), "bin_ns": np.full(n, width, dtype=np.int64), "value_ns": cat(2, np.float64),
        "covered_ns": cat(3, np.float64), "max": cat(4, np.float64),
    })  # fmt: skip


def step_totals(series: list[Series], steps: Table) -> Table:
    """What each network rate counter (EFA, NIC; a rate per second) moved in each window step (bytes for B/s)."""
    rows = []
    if len(steps):
        begin = steps["start_ns"].astype(np.int64)
        finish = begin + steps["duration_ns"].astype(np.int64)
        for one in series:
            if one.kind not in (EFA, NIC) or not is_rate(one.unit):
                continue
            keep = (one.end > one.start) & ~np.isnan(one.value)
            start, end, value = one.start[keep], one.end[keep], one.value[keep]
            if not len(value):
                continue
            moved = (_integral(start, end, value, finish) - _integral(start, end, value, begin)) / NS_PER_S
            rows += [(int(s), one.kind, one.device, one.metric, one.unit[:-2], float(m))
                     for s, m in zip(steps["step"], moved, strict=True)]  # fmt: skip
    return _table(STEP_COLUMNS, rows)


def heat_map(bins: Table, metric: str) -> tuple[list[str], int, np.ndarray]:
    """(row labels 'rank R device', bin width, matrix of time-weighted means: NaN where nothing was sampled) of one
    metric over every rank's bins, brought to the widest width (whole bins added: exact)."""
    mine = bins.take(bins["metric"] == metric) if len(bins) else bins
    if not len(mine):
        return [], BASE_BIN_NS, np.empty((0, 0))
    width = int(mine["bin_ns"].max())
    column = mine["bin"] * mine["bin_ns"] // width  # a bin of width w lies whole inside bin (b * w) // width
    labels = [f"rank {r} {d}" for r, d in zip(mine["rank"], mine["device"], strict=True)]
    names = sorted(set(labels), key=lambda label: (int(label.split()[1]), label))
    index = {name: i for i, name in enumerate(names)}
    row = np.array([index[label] for label in labels], dtype=np.int64)
    shape = (len(names), int(column.max()) + 1)
    value, covered = np.zeros(shape), np.zeros(shape)
    np.add.at(value, (row, column), mine["value_ns"])
    np.add.at(covered, (row, column), mine["covered_ns"])
    with np.errstate(invalid="ignore", divide="ignore"):
        return names, width, np.where(covered > 0, value / covered, np.nan)


def counter_window(steps: Table, kernels, series: list[Series]) -> tuple[int, int] | None:
    """The rank's analyzed window: its window steps' span, else its kernels' span, else its samples' (None: none)."""
    if len(steps):
        begin = steps["start_ns"].astype(np.int64)
        return int(begin.min()), int((begin + steps["duration_ns"].astype(np.int64)).max())
    if len(kernels):
        return int(kernels.start.min()), int(kernels.end.max())
    spans = [(int(s.start.min()), int(s.end.max())) for s in series if len(s.start)]
    return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None


def rank_tables(series: list[Series], kernels, nccl_ids: np.ndarray, steps: Table) -> dict[str, Table]:
    """The rank's counter tables over its window: stats ('counters'), time bins ('counter_bins') and what the
    network counters moved per window step ('counter_steps'); empty tables without samples."""
    from nsyskit.analysis.compute.intervals import union

    window = counter_window(steps, kernels, series)
    if window is None or window[1] <= window[0] or not series:
        return {"counters": _table(STAT_COLUMNS, []), "counter_bins": counter_bins([], (0, 1)),
                "counter_steps": _table(STEP_COLUMNS, [])}  # fmt: skip
    busy = {int(d): union(kernels.start[kernels.device == d], kernels.end[kernels.device == d])
            for d in np.unique(kernels.device)} if len(kernels) else {}  # fmt: skip
    is_nccl = (
        np.isin(kernels.extra["name"], nccl_ids) if len(kernels) and "name" in kernels.extra else np.zeros(0, bool)
    )
    nccl = union(kernels.start[is_nccl], kernels.end[is_nccl]) if is_nccl.any() else (np.empty(0, np.int64),) * 2
    return {"counters": counter_stats(series, window, busy, nccl), "counter_bins": counter_bins(series, window),
            "counter_steps": step_totals(series, steps)}  # fmt: skip
