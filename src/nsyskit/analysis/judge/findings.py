"""The rules that turn a run's tables into findings: what is wrong, the number behind it, the rule that fired.

Each rule is a pure function of a RunView (metrics.py) returning a Finding or None; RULES lists them in the
order a reader should see them. Thresholds are module constants so that docs/analysis.md and the tests quote them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.analyzers import over_the_others, stragglers
from nsyskit.analysis.compute.metrics import RunView, per_rank, run_metrics, step_cv_by_rank
from nsyskit.analysis.judge.diagnoses import HOST_RULES
from nsyskit.analysis.judge.finding import Finding, ordered

__all__ = ["RULES", "Finding", "find"]

EXPOSED_COMM_PCT = 10.0  # communication not hidden by compute, % of the GPU window
CPU_COMM_SHARE_PCT = 20.0  # CPU runs (no GPU intervals to overlap): communication % of step time
GPU_IDLE_PCT = 20.0  # GPU idle, % of the GPU window
STRAGGLER_PCT = 5.0  # a rank's non-communication time per step above the median of the ranks
SMALL_MESSAGE_PCT = 50.0  # share of NCCL time spent on messages under 64 KB
STEP_CV_PCT = 10.0  # stddev / mean of the window's step times on one rank
PAGEABLE_MEMCPY_COUNT = 0  # more pageable (unpinned) host copies than this: any one is worth a line
SLOW_COPY_KINDS = ("HtoD", "DtoH")


def exposed_communication(view: RunView) -> Finding | None:
    """GPU runs: communication not overlapped by compute above EXPOSED_COMM_PCT of the window; CPU runs: comm share."""
    metrics = run_metrics(view)
    if view.has_gpu:
        value = metrics["exposed_comm"]
        if np.isnan(value) or value <= EXPOSED_COMM_PCT:
            return None
        return Finding(
            "exposed_comm", "warning",
            f"{units.percent(value)} of GPU time is communication not hidden by compute",
            value, EXPOSED_COMM_PCT,
            "overlap more: larger DDP buckets (bucket_cap_mb), gradient accumulation, or check the network (NCCL log)",
        )  # fmt: skip
    value = metrics["comm_share"]
    if np.isnan(value) or value <= CPU_COMM_SHARE_PCT:
        return None
    return Finding(
        "comm_share", "warning", f"communication in flight for {units.percent(value)} of step time (no GPU: CPU run)",
        value, CPU_COMM_SHARE_PCT, "fewer or larger messages (bucket_cap_mb), or more compute per step (batch size)",
    )  # fmt: skip


def gpu_idle(view: RunView) -> Finding | None:
    """The GPUs sat idle for more than GPU_IDLE_PCT of their window (gaps between kernels inside the steps)."""
    value = run_metrics(view)["gpu_idle"]
    if np.isnan(value) or value <= GPU_IDLE_PCT:
        return None
    worst = view.breakdown.take(np.argsort(view.breakdown["idle_pct"])[::-1][:1]).rows().__next__()
    return Finding(
        "gpu_idle", "warning",
        f"GPUs idle {units.percent(value)} of the profiled window (worst: rank {worst['rank']} GPU {worst['device']}, "
        f"{units.percent(worst['idle_pct'])})",
        value, GPU_IDLE_PCT,
        "the host does not feed the GPU: look at data loading, synchronizations (.item(), .cpu()) and launch overhead "
        "in the timeline; CUDA graphs or a larger batch hide launch gaps",
    )  # fmt: skip


def straggler(view: RunView) -> Finding | None:
    """The rank whose time per step outside communication exceeds the median of the other ranks by STRAGGLER_PCT,
    and why (a rank slower than the rest; a faster one never is)."""
    ranks = per_rank(view)
    if len(ranks) < 2 or np.isnan(ranks["work_ns"]).all():
        return None
    work = ranks["work_ns"]
    slow = int(np.nanargmax(work))
    others = np.arange(len(ranks)) != slow
    median = float(np.nanmedian(work[others])) if not np.isnan(work[others]).all() else float("nan")
    over = over_the_others(work)
    excess_pct = float(over[slow])
    if not stragglers(work, over, STRAGGLER_PCT)[slow]:
        return None
    excess = {}
    for component in ("compute_ns", "host_ns"):
        values = ranks[component]
        if not np.isnan(values[slow]) and not np.isnan(values[others]).all():
            excess[component] = values[slow] - float(np.nanmedian(values[others]))
    cause = max(excess, key=excess.get).removesuffix("_ns") if excess else "host"
    if not view.has_gpu:
        cause = "compute/host (CPU run)"
    rank = int(ranks["rank"][slow])
    return Finding(
        "straggler", "warning",
        f"rank {rank} is a straggler: {units.duration(work[slow])} per step outside communication, "
        f"{excess_pct:.1f}% over the median of the other ranks ({units.duration(median)}); cause: {cause}",
        excess_pct, STRAGGLER_PCT,
        "the other ranks wait for it in their collectives: compare its GPU, host and data loading with a healthy "
        "rank (open both .nsys-rep files side by side)",
    )  # fmt: skip


def small_messages(view: RunView) -> Finding | None:
    """Messages under 64 KB take more than SMALL_MESSAGE_PCT of the NCCL time (latency-bound communication)."""
    value = run_metrics(view)["small_msg_comm"]
    if np.isnan(value) or value <= SMALL_MESSAGE_PCT:
        return None
    count = view.nccl.sums["small_count"]
    return Finding(
        "small_messages", "warning",
        f"{units.percent(value)} of NCCL time goes to {count:,} messages under 64 KB",
        value, SMALL_MESSAGE_PCT,
        "small messages are latency-bound: fuse them (larger DDP buckets, fewer parameter groups, coalesced collectives)",
    )  # fmt: skip


def pageable_memcpy(view: RunView) -> Finding | None:
    """Host/device copies from or to pageable (unpinned) host memory: synchronous for the host, no overlap."""
    table = view.memcpy
    if table is None or not len(table) or "pageable_count" not in table:
        return None
    pageable = int(np.nansum(table["pageable_count"]))
    if pageable <= PAGEABLE_MEMCPY_COUNT:
        return None
    slow = np.isin(table["kind"], SLOW_COPY_KINDS)
    spent = float(table["total_ns"][slow].sum()) if slow.any() else float("nan")
    return Finding(
        "pageable_memcpy", "warning",
        f"{pageable:,} pageable host/device memcpy (HtoD/DtoH copies take {units.duration(spent)} in all)",
        float(pageable), float(PAGEABLE_MEMCPY_COUNT),
        "pin host memory (DataLoader(pin_memory=True)) and copy with non_blocking=True so copies overlap compute",
    )  # fmt: skip


def step_variance(view: RunView) -> Finding | None:
    """Step times of one rank vary by more than STEP_CV_PCT (stddev / mean) inside the profiled window."""
    cvs = step_cv_by_rank(view.steps)
    if not cvs:
        return None
    rank = max(cvs, key=cvs.get)
    if cvs[rank] <= STEP_CV_PCT:
        return None
    mine = view.steps["duration_ns"][view.steps["rank"] == rank]
    return Finding(
        "step_variance", "info",
        f"step time varies {cvs[rank]:.1f}% on rank {rank} ({units.duration(mine.min())} to {units.duration(mine.max())}, "
        f"{view.window_source})",
        cvs[rank], STEP_CV_PCT,
        "irregular steps: look for periodic work (checkpoints, logging, evaluation), data loading stalls or "
        "interference from other jobs",
    )  # fmt: skip


Rule = Callable[[RunView], "Finding | None"]
RULES: tuple[Rule, ...] = (
    exposed_communication, straggler, gpu_idle, small_messages, pageable_memcpy, step_variance, *HOST_RULES,
)  # fmt: skip


def find(view: RunView, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Every finding the rules make about the run, by time at stake per step (finding.ordered)."""
    return ordered([f for f in (rule(view) for rule in rules) if f is not None])
