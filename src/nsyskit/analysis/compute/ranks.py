"""The ranks side by side: how far each lies over the others, which are stragglers, the ranks table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from nsyskit.analysis.compute.table import Table


def over_the_others(values: np.ndarray) -> np.ndarray:
    """Per value, how many percent it lies above (or below: negative) the median of the OTHER values; NaN for a
    missing value or when no other value is there. Against the others, not all: with 2 ranks 12% apart the slow
    one is 12% over the other, and the fast one is not 'slower than the median' by half of it."""
    values = np.asarray(values, dtype=np.float64)
    out = np.full(len(values), np.nan)
    valid = np.flatnonzero(~np.isnan(values))
    if len(valid) < 2:
        return out
    order = valid[np.argsort(values[valid], kind="stable")]
    ranked = values[order]
    n = len(ranked) - 1  # how many others each value has

    def other(position: int, k: int) -> float:  # the k-th smallest of the others of the value at `position`
        return ranked[k] if k < position else ranked[k + 1]

    for position, index in enumerate(order):
        mid = n // 2
        median = other(position, mid) if n % 2 else (other(position, mid - 1) + other(position, mid)) / 2
        out[index] = (values[index] - median) * 100.0 / median if median else np.nan
    return out


def stragglers(values: np.ndarray, over_others: np.ndarray, pct: float) -> np.ndarray:
    """The ranks slower than the rest: more than `pct` over the median of the others, and in the slower half
    (two ranks at the median with a fast third are not slower than the rest)."""
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).all():
        return np.zeros(len(values), dtype=bool)
    above = np.nan_to_num(values, nan=-np.inf) > np.nanmedian(values)
    return above & (np.nan_to_num(over_others, nan=0.0) > pct)


def cross_rank(
    per_rank: Sequence[Mapping[str, float]], straggler_pct: float = 5.0, work: Mapping[int, float] | None = None
) -> Table:
    """Per rank: step time and communication share, how far each lies over the other ranks, stragglers flagged.

    A straggler is a rank slower than the rest: its time per step outside communication (`work`, per rank: the
    findings' measure, since the others wait for a straggler inside their collectives, so every rank's step time is
    alike) lies more than `straggler_pct` percent above the median of the other ranks (over_the_others). Without
    `work`, the mean step time (or, without steps, GPU busy time) is the measure. A faster rank never is one.
    """
    if not per_rank:
        return Table.empty(
            (
                "rank",
                "host",
                "steps",
                "step_mean_ns",
                "step_median_ns",
                "gpu_busy_pct",
                "comm_share_pct",
                "deviation_pct",
                "straggler",
            )
        )
    rank = np.asarray([r["rank"] for r in per_rank], dtype=np.int64)
    step_mean = np.asarray([r.get("step_mean_ns", np.nan) for r in per_rank], dtype=np.float64)
    busy = np.asarray([r.get("gpu_busy_ns", np.nan) for r in per_rank], dtype=np.float64)
    basis = step_mean if not np.isnan(step_mean).all() else busy
    if work is not None:
        outside = np.asarray([work.get(int(r), np.nan) for r in rank], dtype=np.float64)
        basis = outside if not np.isnan(outside).all() else basis
    deviation = over_the_others(basis)
    flagged = stragglers(basis, deviation, straggler_pct)
    table = Table(
        {
            "rank": rank,
            "host": np.asarray([r.get("host", "") for r in per_rank], dtype=object),
            "steps": np.asarray([r.get("steps", 0) for r in per_rank], dtype=np.int64),
            "step_mean_ns": step_mean,
            "step_median_ns": np.asarray([r.get("step_median_ns", np.nan) for r in per_rank], dtype=np.float64),
            "gpu_busy_pct": np.asarray([r.get("gpu_busy_pct", np.nan) for r in per_rank], dtype=np.float64),
            "comm_share_pct": np.asarray([r.get("comm_share_pct", np.nan) for r in per_rank], dtype=np.float64),
            "deviation_pct": deviation,
            "straggler": flagged,
        }
    )
    return table.sorted_by("rank", descending=False)
