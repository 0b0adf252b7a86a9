"""Compare two analyses (baseline A, candidate B) metric by metric, and find regressions beyond a threshold."""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.table import Table
from nsyskit.analysis.trace import Analysis

# Metrics where a larger value is worse; checked by --fail-on-regression.
GATED = ("step_time_mean_ns", "step_time_max_rank_ns", "gpu_busy_per_step_ns")


def metrics(analysis: Analysis) -> dict[str, float]:
    """The run-level numbers a diff compares (NaN when the run has none, e.g. GPU metrics of a CPU run)."""
    steps = analysis.steps["duration_ns"] if analysis.steps is not None else np.empty(0)
    ranks = analysis.ranks
    busy = float(analysis.breakdown["busy_ns"].sum()) if analysis.has_gpu else np.nan
    step_count = len(steps)
    per_rank_means = ranks["step_mean_ns"] if ranks is not None and len(ranks) else np.empty(0)
    return {
        "step_time_mean_ns": float(steps.mean()) if step_count else np.nan,
        "step_time_max_rank_ns": float(np.nanmax(per_rank_means))
        if len(per_rank_means) and not np.isnan(per_rank_means).all()
        else np.nan,
        "gpu_busy_ns": busy,
        "gpu_busy_per_step_ns": busy / step_count if step_count and analysis.has_gpu else busy,
        "compute_ns": float(analysis.breakdown["compute_ns"].sum()) if analysis.has_gpu else np.nan,
        "comm_ns": float(analysis.breakdown["comm_ns"].sum()) if analysis.has_gpu else np.nan,
        "exposed_comm_ns": float(analysis.breakdown["exposed_comm_ns"].sum()) if analysis.has_gpu else np.nan,
        "kernel_time_ns": float(analysis.top_kernels["total_ns"].sum())
        if analysis.top_kernels is not None and len(analysis.top_kernels)
        else np.nan,
        "ranks": float(len(analysis.sources)),
    }


def compare(baseline: Analysis, candidate: Analysis, threshold_pct: float | None = None) -> Table:
    """Per metric: A, B, change % and whether it is a regression (a gated metric worse by more than threshold_pct)."""
    a, b = metrics(baseline), metrics(candidate)
    names = list(a)
    change = np.asarray(
        [(b[n] - a[n]) * 100.0 / a[n] if a[n] and not np.isnan(a[n]) and not np.isnan(b[n]) else np.nan for n in names]
    )
    regression = np.asarray(
        [
            threshold_pct is not None and n in GATED and not np.isnan(c) and c > threshold_pct
            for n, c in zip(names, change, strict=True)
        ]
    )
    return Table(
        {
            "metric": np.asarray(names, dtype=object),
            "a": np.asarray([a[n] for n in names], dtype=np.float64),
            "b": np.asarray([b[n] for n in names], dtype=np.float64),
            "change_pct": change,
            "regression": regression,
        }
    )
