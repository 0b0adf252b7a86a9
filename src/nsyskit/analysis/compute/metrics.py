"""The profiled window of a run and its run-level metrics (step time, communication, idle), warm-up steps left out.

The window of a rank is its NVTX 'profile_window' range (the example's --profile-steps): the facade's steps table
holds only the steps inside it. A rank without one loses its first WARMUP_STEPS steps here instead (allocator,
autotuning, NCCL setup).
Everything here is a pure function over the analysis tables, so findings, the report and --diff agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nsyskit.analysis.compute.nccldigest import NcclRollup
from nsyskit.analysis.compute.table import Table, rows_by_rank

WINDOW_NAME = "profile_window"  # the example's NVTX range around its --profile-steps (workload/markers.py)
WARMUP_STEPS = 1  # steps dropped per rank when the run marks no profile window (and has more than this many + 1)

# name -> (short label, what it is): the metrics a diff compares and --fail-on gates (all: higher is worse).
METRICS = {
    "step_time": ("step time", "median step time in the profiled window, all ranks (ns)"),
    "step_time_slowest_rank": ("slowest rank's step", "median step time of the slowest rank (ns)"),
    "step_cv": ("step variation", "stddev / mean of the window's step times, worst rank (%)"),
    "exposed_comm": ("exposed comm", "communication not hidden by compute, % of the GPU window (mean over GPUs)"),
    "comm_share": ("comm share", "communication time, % of GPU busy time (GPU runs) or of step time (CPU runs)"),
    "gpu_idle": ("GPU idle", "GPU idle time, % of the GPU window (mean over GPUs)"),
    "small_msg_comm": ("small-message comm", "share of NCCL time spent on messages under 64 KB (%)"),
    "nccl_time_per_step": ("NCCL time per step", "NCCL operation time per step and rank (ns)"),
}


@dataclass(frozen=True)
class RunView:
    """The tables the findings and metrics read: window steps, per-GPU breakdown, NCCL ops, memcpy, ranks."""

    steps: Table  # rank, step, start_ns, duration_ns (profiled window only)
    all_steps: Table  # every step, warm-up included
    breakdown: Table | None = None
    nccl: NcclRollup | None = None  # the ranks' NCCL operations added up (nsyskit.analysis.compute.nccldigest)
    memcpy: Table | None = None
    window_source: str = "none"  # 'profile_window', 'warm-up dropped' or 'none'
    evidence: Table | None = None  # every rank's evidence rows for the findings (compute.evidence.pivot reads them)
    nccl_sizes: Table | None = None  # per op, origin, size bucket and n: count, time, median, bandwidths (size_summary;
    # the fabric's columns with --fabric)
    top_kernels: Table | None = None  # every kernel name's GPU time over all ranks (result.combine_kernel_summaries)
    ranks_table: Table | None = None  # the ranks table (analyzers.cross_rank): its straggler flags are the verdict
    straggler_pct: float = 5.0  # the threshold those flags used
    inputs: Mapping[str, Any] = field(default_factory=dict)  # what the request gives the rules (AnalyzeRequest.judge_inputs)
    counters: Table | None = None  # the sampled counters per rank, device and metric (compute.counters)
    # per_rank's and run_metrics' results, computed once per view: the rules and the summary each asked again (a
    # per-rank pass over the steps and breakdown, five times per analysis: most of the findings' 12.6 s at 16,384)
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def ranks(self) -> np.ndarray:
        """The ranks that have steps (found once per view: a unique of every rank's steps)."""
        if "ranks" not in self.memo:
            steps = self.all_steps["rank"]
            found = np.unique(steps) if len(steps) else np.empty(0, dtype=np.int64)
            found.flags.writeable = False  # shared by every caller
            self.memo["ranks"] = found
        return self.memo["ranks"]

    @property
    def has_gpu(self) -> bool:
        """Whether any GPU activity was recorded."""
        return self.breakdown is not None and len(self.breakdown) > 0

    @property
    def has_window_ops(self) -> bool:
        """Whether the window's NCCL operations were looked for: the run has operations and window steps (then a
        rank without any counts 0 communication)."""
        return self.nccl is not None and self.nccl.sums["count"] > 0 and len(self.steps) > 0


def _empty_steps() -> Table:
    return Table({n: np.empty(0, dtype=np.int64) for n in ("rank", "step", "start_ns", "duration_ns")})


def windowed_ranks(nvtx: Table | None) -> set[int]:
    """Ranks with a 'profile_window' NVTX range: the facade keeps only their steps inside it (analyzers.step_times)."""
    if nvtx is None or not len(nvtx) or "rank" not in nvtx or "name" not in nvtx:
        return set()
    return {
        int(r) for r, name in zip(nvtx["rank"], nvtx["name"], strict=True) if str(name).split("@")[0] == WINDOW_NAME
    }


def window_steps(steps: Table | None, windowed: set[int] | frozenset[int] = frozenset()) -> tuple[Table, str]:
    """The steps of the profiled window: as they are on `windowed` ranks, all but the warm-up steps on the others."""
    if steps is None or not len(steps):
        return _empty_steps(), "none"
    keep = np.zeros(len(steps), dtype=bool)
    how = set()
    for rank, index in rows_by_rank(steps["rank"]).items():  # one sort, not a pass over every step per rank
        if rank in windowed:
            keep[index] = True
            how.add("profile_window")
            continue
        order = index[np.argsort(steps["start_ns"][index], kind="stable")]
        if len(order) > WARMUP_STEPS + 1:
            order = order[WARMUP_STEPS:]
            how.add("warm-up dropped")
        keep[order] = True
    return steps.take(keep), " + ".join(sorted(how)) or "all steps"


def view_of(analysis, inputs: Mapping[str, Any] | None = None) -> RunView:
    """A RunView of an Analysis (the facade's result): its tables, steps narrowed to the profiled window; `inputs`:
    what the request gives the rules beyond the reports (e.g. a fabric's measured ceiling, FLOPs per step)."""
    steps, how = window_steps(analysis.steps, windowed_ranks(analysis.nvtx))
    return RunView(
        steps=steps,
        all_steps=analysis.steps if analysis.steps is not None else _empty_steps(),
        breakdown=analysis.breakdown,
        nccl=analysis.nccl,
        memcpy=analysis.memcpy,
        window_source=how,
        evidence=analysis.evidence,
        nccl_sizes=analysis.nccl_sizes,
        top_kernels=analysis.top_kernels,
        ranks_table=analysis.ranks,
        straggler_pct=getattr(analysis, "straggler_pct", 5.0),
        inputs=dict(inputs or {}),
        counters=getattr(analysis, "counters", None),
    )


def per_rank(view: RunView) -> Table:
    """Per rank over the window: median step, work (step minus communication), compute, communication, host (ns);
    computed once per view (callers must not change the table)."""
    if "per_rank" not in view.memo:
        view.memo["per_rank"] = _per_rank(view)
    return view.memo["per_rank"]


def _per_rank(view: RunView) -> Table:
    """per_rank's table, every rank at once: each column from sums and order statistics over the rows sorted by rank
    (a table cut out per rank cost ~0.1 ms a rank: 0.5 s of a 4,096-rank merge), with what a per-rank pass gave."""
    ranks = np.asarray(view.ranks, dtype=np.int64)
    count, _sums = _by_rank(ranks, view.steps, ())
    step = _medians(ranks, view.steps["rank"], view.steps["duration_ns"], count)
    comm = compute = busy = np.full(len(ranks), np.nan)
    on_gpu = np.zeros(len(ranks), dtype=bool)
    if view.has_gpu:
        rows, sums = _by_rank(ranks, view.breakdown, ("comm_ns", "compute_ns", "busy_ns"))
        all_count = np.maximum(_by_rank(ranks, view.all_steps, ())[0], 1)  # the breakdown spans every step
        on_gpu = rows > 0
        comm, compute, busy = (np.where(on_gpu, sums[name] / all_count, np.nan) for name in ("comm_ns", "compute_ns", "busy_ns"))
    if view.has_window_ops:  # a rank without GPU rows: its window's NCCL time per step
        window = np.fromiter((view.nccl.window_ns(rank) for rank in ranks.tolist()), dtype=np.float64, count=len(ranks))
        comm = np.where(~on_gpu & (count > 0), window / np.maximum(count, 1), comm)
    comm_or_0 = np.where(np.isnan(comm), 0.0, comm)
    host = np.where(np.isnan(busy), step - comm_or_0, step - busy)
    return Table({"rank": ranks, "step_ns": step, "comm_ns": comm, "compute_ns": compute,
                  "host_ns": np.where(host < 0, 0.0, host), "work_ns": step - comm_or_0,
                  "steps": count.astype(np.float64)})  # fmt: skip


def _by_rank(ranks: np.ndarray, table: Table, columns: tuple[str, ...]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each of `ranks`' (sorted) rows in `table` and the sums of `columns` over them (exact for integer ns: every sum
    under 2**53), rows of other ranks left out."""
    at = np.searchsorted(ranks, table["rank"]) if len(ranks) else np.zeros(len(table), dtype=np.int64)
    mine = at < len(ranks)
    mine[mine] = ranks[at[mine]] == table["rank"][mine]
    at = at[mine]
    rows = np.bincount(at, minlength=len(ranks))
    return rows, {name: np.bincount(at, weights=table[name][mine].astype(np.float64), minlength=len(ranks))
                  for name in columns}  # fmt: skip


def _medians(ranks: np.ndarray, rank: np.ndarray, values: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Each rank's median of `values` (np.median's: the middle value, or the mean of the two middle ones), NaN where
    the rank has none."""
    order = np.lexsort((values, rank))
    rank, values = rank[order], values[order].astype(np.float64)
    start = np.searchsorted(rank, ranks)
    low, high = start + np.maximum(count - 1, 0) // 2, start + count // 2
    some = count > 0
    found = np.full(len(ranks), np.nan)
    found[some] = (values[low[some]] + values[high[some]]) / 2
    return found


def _mean(values) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(values)) if len(values) and not np.isnan(values).all() else float("nan")


def step_cv_by_rank(steps: Table) -> dict[int, float]:
    """Per rank: stddev / mean of its step times, in percent (ranks with 2+ steps)."""
    found = {}
    for rank, rows in rows_by_rank(steps["rank"]).items():
        mine = steps["duration_ns"][rows].astype(np.float64)
        if len(mine) >= 2 and mine.mean() > 0:
            found[int(rank)] = float(mine.std(ddof=1) * 100.0 / mine.mean())
    return found


def small_message_share(view: RunView) -> float:
    """Percent of NCCL operation time spent on messages under 64 KB, over the window's operations (else all of them;
    NaN when none has a known size)."""
    if view.nccl is None:
        return float("nan")
    sums = view.nccl.sums
    prefix = "window_" if view.has_window_ops else ""
    total = float(sums[prefix + "known_ns"]) if sums[prefix + "count"] else 0.0
    return float(sums[prefix + "small_ns"]) * 100.0 / total if total else float("nan")


def comm_share_by_rank(view: RunView) -> dict[int, float]:
    """Per rank, the comm share as run_metrics computes it for the run: communication time in % of GPU busy time
    (GPU runs) or of the window's step time (CPU runs: the NCCL-domain ranges the example marks on gloo too)."""
    ranks = np.asarray(view.ranks, dtype=np.int64)
    if view.has_gpu:
        _rows, sums = _by_rank(ranks, view.breakdown, ("comm_ns", "busy_ns"))
        busy = sums["busy_ns"]
        share = np.where(busy != 0, sums["comm_ns"] * 100.0 / np.where(busy != 0, busy, 1), np.nan)
    else:
        _rows, sums = _by_rank(ranks, view.steps, ("duration_ns",))
        steps = sums["duration_ns"]
        comm = (np.fromiter((view.nccl.window_ns(rank) for rank in ranks.tolist()), dtype=np.float64, count=len(ranks))
                if view.has_window_ops else np.full(len(ranks), np.nan))  # fmt: skip
        share = np.where((steps != 0) & ~np.isnan(comm), comm * 100.0 / np.where(steps != 0, steps, 1), np.nan)
    return dict(zip(ranks.tolist(), share.tolist(), strict=True))


def run_metrics(view: RunView) -> dict[str, float]:
    """The run-level numbers of METRICS (NaN where the run has no data for one, e.g. GPU metrics of a CPU run);
    computed once per view, each caller given its own copy."""
    if "run_metrics" not in view.memo:
        view.memo["run_metrics"] = _run_metrics(view)
    return dict(view.memo["run_metrics"])


def _run_metrics(view: RunView) -> dict[str, float]:
    durations = view.steps["duration_ns"].astype(np.float64)
    ranks = per_rank(view)
    cvs = step_cv_by_rank(view.steps)
    breakdown = view.breakdown if view.has_gpu else None
    if breakdown is not None:
        comm_share = float(breakdown["comm_ns"].sum()) * 100.0 / max(float(breakdown["busy_ns"].sum()), 1.0)
    elif view.has_window_ops and len(durations):
        comm_share = float(view.nccl.sums["window_ns"]) * 100.0 / float(durations.sum())
    else:
        comm_share = float("nan")
    return {
        "step_time": float(np.median(durations)) if len(durations) else float("nan"),
        "step_time_slowest_rank": float(np.nanmax(ranks["step_ns"]))
        if len(ranks) and not np.isnan(ranks["step_ns"]).all()
        else float("nan"),
        "step_cv": max(cvs.values()) if cvs else float("nan"),
        "exposed_comm": _mean(breakdown["exposed_comm_pct"]) if breakdown is not None else float("nan"),
        "comm_share": comm_share,
        "gpu_idle": _mean(breakdown["idle_pct"]) if breakdown is not None else float("nan"),
        "small_msg_comm": small_message_share(view),
        "nccl_time_per_step": _mean(ranks["comm_ns"]) if len(ranks) else float("nan"),
    }
