"""The rules that turn a run's tables into findings: what is wrong, the number behind it, the rule that fired.

Each rule is a pure function of a RunView (metrics.py) returning a Finding or None; RULES lists them in the
order a reader should see them. Thresholds are module constants so that docs/analysis.md and the tests quote them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.metrics import RunView, per_rank, run_metrics, step_cv_by_rank
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge import commcauses, counterfindings, gpuwork, recording
from nsyskit.analysis.judge.diagnoses import HOST_RULES
from nsyskit.analysis.judge.fabric import below_fabric
from nsyskit.analysis.judge.finding import CATALOG, Finding, document, ordered, ranks_text
from nsyskit.analysis.judge.mfu import low_mfu
from nsyskit.errors import UsageError

__all__ = ["RULES", "Finding", "explain", "find"]

EXPOSED_COMM_PCT = 10.0  # communication not hidden by compute, % of the GPU window
CPU_COMM_SHARE_PCT = 20.0  # CPU runs (no GPU intervals to overlap): communication % of step time
GPU_IDLE_PCT = 20.0  # GPU idle, % of the GPU window
STRAGGLER_PCT = 5.0  # default of --straggler-pct: a rank's time per step outside communication over the others' median
SMALL_MESSAGE_PCT = 50.0  # share of NCCL time spent on messages under 64 KB
STEP_CV_PCT = 10.0  # stddev / mean of the window's step times on one rank
PAGEABLE_MIN_BYTES = 1 << 20  # pageable (unpinned) HtoD/DtoH copies moving at least this much (bytes, all ranks) ...
PAGEABLE_MIN_NS = 1_000_000  # ... in at least this much copy time (ns): scalar .item() copies are a sync's cost
SLOW_COPY_KINDS = ("HtoD", "DtoH")

EXPOSED = document(
    "exposed_comm", "GPU time spent in communication kernels while no compute kernel runs, % of the GPU window (mean "
    "over GPUs; the breakdown's exposed_comm_pct)", f"above {EXPOSED_COMM_PCT:g}% of the GPU window",
    "overlap more: larger DDP buckets (bucket_cap_mb), gradient accumulation, or check the network (NCCL log, "
    "'invoke analyze --fabric')",
)  # fmt: skip
COMM_SHARE = document(
    "comm_share", "CPU runs (no GPU kernels to overlap): the time communication is in flight, % of the window's step "
    "time", f"above {CPU_COMM_SHARE_PCT:g}% of step time",
    "fewer or larger messages (bucket_cap_mb), or more compute per step (batch size)",
)  # fmt: skip
IDLE = document(
    "gpu_idle", "time no kernel, copy or memset runs on a GPU inside its window (first to last activity), % of the "
    "window (mean over GPUs)", f"above {GPU_IDLE_PCT:g}% of the window",
    "the host does not feed the GPU: look at data loading, synchronizations (.item(), .cpu()) and launch overhead "
    "in the timeline; CUDA graphs or a larger batch hide launch gaps",
)  # fmt: skip
STRAGGLER = document(
    "straggler", "each rank's time per step outside communication (step minus NCCL time; without steps, the mean "
    "step time or GPU busy time) against the median of the other ranks",
    f"a rank lies more than --straggler-pct (default {STRAGGLER_PCT:g}%) over that median and in the slower half; "
    "the ranks table flags the same ranks",
    "the other ranks wait for it in their collectives: compare its GPU, host and data loading with a healthy "
    "rank (open both .nsys-rep files side by side)",
)  # fmt: skip
SMALL = document(
    "small_messages", "share of NCCL operation time spent on messages under 64 KB (the window's operations)",
    f"above {SMALL_MESSAGE_PCT:g}% of NCCL time",
    "small messages are latency-bound: fuse them (larger DDP buckets, fewer parameter groups, coalesced collectives)",
)  # fmt: skip
PAGEABLE = document(
    "pageable_memcpy", "HtoD/DtoH copies from or to pageable (unpinned) host memory: their count, bytes and time",
    f"they move at least {PAGEABLE_MIN_BYTES >> 20} MiB in at least {PAGEABLE_MIN_NS / 1e6:g} ms (scalar .item() "
    "copies stay below: they are a sync's cost)",
    "pin host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with non_blocking=True so copies "
    "overlap compute",
)  # fmt: skip
VARIANCE = document(
    "step_variance", "stddev / mean of one rank's step times in the profiled window (the worst rank)",
    f"above {STEP_CV_PCT:g}%",
    "irregular steps: look for periodic work (checkpoints, logging, evaluation), data loading stalls or "
    "interference from other jobs",
)  # fmt: skip


def exposed_communication(view: RunView) -> Finding | None:
    """GPU runs: communication not overlapped by compute above EXPOSED_COMM_PCT of the window; CPU runs: comm share."""
    metrics = run_metrics(view)
    if view.has_gpu:
        value = metrics["exposed_comm"]
        if np.isnan(value) or value <= EXPOSED_COMM_PCT:
            return None
        per_step = _per_step(view, "exposed_comm_ns")
        table = view.breakdown
        return Finding(
            "exposed_comm", "warning",
            f"{units.percent(value)} of GPU time is communication not hidden by compute",
            value, EXPOSED_COMM_PCT, EXPOSED.advice,
            evidence={"exposed_comm_pct": value, "exposed_comm_ns_per_step": per_step},
            ranks=_ranks_over(table, "exposed_comm_pct", EXPOSED_COMM_PCT), at_stake_ns=per_step,
        )  # fmt: skip
    value = metrics["comm_share"]
    if np.isnan(value) or value <= CPU_COMM_SHARE_PCT:
        return None
    per_step = metrics["nccl_time_per_step"]
    return Finding(
        "comm_share", "warning", f"communication in flight for {units.percent(value)} of step time (no GPU: CPU run)",
        value, CPU_COMM_SHARE_PCT, COMM_SHARE.advice,
        evidence={"comm_share_pct": value, "comm_ns_per_step": per_step}, at_stake_ns=per_step,
    )  # fmt: skip


def gpu_idle(view: RunView) -> Finding | None:
    """The GPUs sat idle for more than GPU_IDLE_PCT of their window (gaps between kernels inside the steps)."""
    value = run_metrics(view)["gpu_idle"]
    if np.isnan(value) or value <= GPU_IDLE_PCT:
        return None
    worst = view.breakdown.take(np.argsort(view.breakdown["idle_pct"])[::-1][:1]).rows().__next__()
    per_step = _per_step(view, "idle_ns")
    return Finding(
        "gpu_idle", "warning",
        f"GPUs idle {units.percent(value)} of the profiled window (worst: rank {worst['rank']} GPU {worst['device']}, "
        f"{units.percent(worst['idle_pct'])})",
        value, GPU_IDLE_PCT, IDLE.advice,
        evidence={"gpu_idle_pct": value, "idle_ns_per_step": per_step, "worst_idle_pct": float(worst["idle_pct"])},
        ranks=_ranks_over(view.breakdown, "idle_pct", GPU_IDLE_PCT), at_stake_ns=per_step,
    )  # fmt: skip


def _per_step(view: RunView, column: str) -> float:
    """A breakdown column's time per step: each GPU's total over its rank's steps (the breakdown spans all of them),
    averaged over the GPUs; NaN without steps."""
    table = view.breakdown
    steps = {int(r): n for r, n in zip(*np.unique(view.all_steps["rank"], return_counts=True), strict=True)}
    per_gpu = [float(t) / steps[int(r)] for r, t in zip(table["rank"], table[column], strict=True) if steps.get(int(r))]
    return float(np.mean(per_gpu)) if per_gpu else float("nan")


def _ranks_over(table: Table, column: str, threshold: float) -> tuple[int, ...]:
    """The ranks with a GPU whose `column` lies above `threshold`."""
    return tuple(sorted({int(r) for r in table["rank"][np.nan_to_num(table[column]) > threshold]}))


def straggler(view: RunView) -> Finding | None:
    """The ranks the ranks table flags as stragglers (one verdict: analyzers.cross_rank on the time per step outside
    communication, more than --straggler-pct over the median of the other ranks), the slowest first, and why."""
    table = view.ranks_table
    if table is None or "straggler" not in table or not table["straggler"].any():
        return None
    flagged = np.flatnonzero(table["straggler"])
    flagged = flagged[np.argsort(-table["deviation_pct"][flagged], kind="stable")]
    slow_rank, excess_pct = int(table["rank"][flagged[0]]), float(table["deviation_pct"][flagged[0]])
    ranks = per_rank(view)
    mine = np.flatnonzero(ranks["rank"] == slow_rank)
    work = ranks["work_ns"]
    if len(mine) and not np.isnan(work[mine[0]]):  # the table's measure (cross_rank's `work`)
        measure, value = "per step outside communication", float(work[mine[0]])
    elif not np.isnan(table["step_mean_ns"]).all():
        measure, value = "mean step time", float(table["step_mean_ns"][flagged[0]])
    else:
        measure, value = "GPU busy time", float("nan")
    median = value * 100.0 / (100.0 + excess_pct) if excess_pct > -100 else float("nan")
    cause = _straggler_cause(ranks, mine[0] if len(mine) else None) if view.has_gpu else "compute/host (CPU run)"
    others = [int(r) for r in table["rank"][flagged[1:]]]
    also = f"; also {ranks_text(others, len(table))}" if others else ""
    stake = value - median if measure != "GPU busy time" else float("nan")
    return Finding(
        "straggler", "warning",
        f"rank {slow_rank} is a straggler: {units.duration(value) + ' ' if value == value else ''}{measure}, "
        f"{excess_pct:.1f}% over the median of the other ranks"
        f"{f' ({units.duration(median)})' if median == median else ''}; cause: {cause}{also}",
        excess_pct, view.straggler_pct, STRAGGLER.advice,
        evidence={"excess_pct": excess_pct, "value_ns": value, "median_of_others_ns": median,
                  "stragglers": float(len(flagged))},
        ranks=tuple(int(r) for r in table["rank"][flagged]), at_stake_ns=stake,
    )  # fmt: skip


def _straggler_cause(ranks, slow: int | None) -> str:
    """Which of compute and host time lies furthest over the other ranks' median on the slow rank."""
    if slow is None:
        return "host"
    others = np.arange(len(ranks)) != slow
    excess = {}
    for component in ("compute_ns", "host_ns"):
        values = ranks[component]
        if not np.isnan(values[slow]) and not np.isnan(values[others]).all():
            excess[component] = values[slow] - float(np.nanmedian(values[others]))
    return max(excess, key=excess.get).removesuffix("_ns") if excess else "host"


def small_messages(view: RunView) -> Finding | None:
    """Messages under 64 KB take more than SMALL_MESSAGE_PCT of the NCCL time (latency-bound communication)."""
    value = run_metrics(view)["small_msg_comm"]
    if np.isnan(value) or value <= SMALL_MESSAGE_PCT:
        return None
    sums = view.nccl.sums
    count = sums["small_count"]
    # At stake: their time per step and rank, were each step's small messages fused into one operation.
    window = view.has_window_ops and sums["window_count"] > 0
    steps = len(view.steps) if window else 0
    small_ns = float(sums["window_small_ns" if window else "small_ns"])
    per_step = small_ns / steps if steps else float("nan")
    per_op = count / steps if steps else float("nan")
    stake = per_step * (1 - 1 / per_op) if steps and per_op >= 1 else float("nan")
    return Finding(
        "small_messages", "warning",
        f"{units.percent(value)} of NCCL time goes to {count:,} messages under 64 KB",
        value, SMALL_MESSAGE_PCT, SMALL.advice,
        evidence={"small_msg_pct": value, "small_messages": float(count), "small_ns_per_step": per_step},
        at_stake_ns=stake,
    )  # fmt: skip


def pageable_memcpy(view: RunView) -> Finding | None:
    """Host/device copies from or to pageable (unpinned) host memory that move real data: synchronous for the host,
    staged through a bounce buffer, never overlapped. Judged by their own bytes and time (a scalar .item() copy is
    pageable too, but it is a sync's cost, not a copy's)."""
    table = view.memcpy
    if table is None or not len(table) or "pageable_bytes" not in table:
        return None
    slow = np.isin(table["kind"], SLOW_COPY_KINDS)
    count = int(table["pageable_count"][slow].sum())
    moved = float(table["pageable_bytes"][slow].sum())
    spent = float(table["pageable_ns"][slow].sum())
    if moved < PAGEABLE_MIN_BYTES or spent < PAGEABLE_MIN_NS:
        return None
    ranks = tuple(sorted({int(r) for r in table["rank"][slow & (table["pageable_bytes"] > 0)]})) if "rank" in table else ()
    steps = len(view.steps)  # every rank's window steps: the copies' time per step and rank
    return Finding(
        "pageable_memcpy", "warning",
        f"{count:,} pageable host/device copies move {units.size(moved)} in {units.duration(spent)}"
        f" ({moved / spent:.2f} GB/s)",
        moved, float(PAGEABLE_MIN_BYTES), PAGEABLE.advice,
        evidence={"pageable_copies": float(count), "pageable_bytes": moved, "pageable_ns": spent},
        ranks=ranks, at_stake_ns=spent / steps if steps else float("nan"),
        threshold_text=f"{units.size(PAGEABLE_MIN_BYTES)} in {units.duration(PAGEABLE_MIN_NS)}",
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
    stake = float(mine.mean() - np.median(mine))  # what the irregular steps add to a typical one, per step
    return Finding(
        "step_variance", "info",
        f"step time varies {cvs[rank]:.1f}% on rank {rank} ({units.duration(mine.min())} to {units.duration(mine.max())}, "
        f"{view.window_source})",
        cvs[rank], STEP_CV_PCT, VARIANCE.advice,
        evidence={"step_cv_pct": cvs[rank], "step_min_ns": float(mine.min()), "step_max_ns": float(mine.max())},
        ranks=tuple(sorted(r for r, cv in cvs.items() if cv > STEP_CV_PCT)), at_stake_ns=max(stake, 0.0),
    )  # fmt: skip


Rule = Callable[[RunView], "Finding | None"]
RULES: tuple[Rule, ...] = (
    recording.kernels_not_recorded,  # first: when it holds for every GPU rank, the kernel-time rules stay silent
    exposed_communication, straggler, gpu_idle, small_messages, pageable_memcpy, step_variance,
    gpuwork.tensor_cores_unused, commcauses.nccl_outlier, commcauses.serialized_streams, low_mfu, below_fabric,
    *counterfindings.RULES,  # the sampled counters' rules (judge/counterfindings.py)
    *HOST_RULES,
)  # fmt: skip


def explain(rule: str) -> str:
    """What --explain prints about `rule`: what it measures, its thresholds, what to try; an error naming the rules."""
    if rule not in CATALOG:
        raise UsageError(f"--explain {rule!r}: no such rule", fix=f"one of: {', '.join(sorted(CATALOG))}")
    return CATALOG[rule].text()


# A cause's finding that explains GPU idle time says how much, per step, in this evidence key.
IDLE_EXPLAINED = "gpu_idle_explained_ns_per_step"


def find(view: RunView, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Every finding the rules make about the run, by time at stake per step (finding.ordered); gpu_idle says
    which of the other findings explain its idle time and how much stays unexplained. kernels_not_recorded comes
    first whatever its stake: it says how far the GPU figures of the others can be trusted."""
    found = recording.silenced([f for f in (rule(view) for rule in rules) if f is not None], view)
    found = ordered([explain_idle(f, found) if f.rule == "gpu_idle" else f for f in found])
    return sorted(found, key=lambda finding: finding.rule != recording.RULE)  # stable: the others keep their order


def explain_idle(idle: Finding, found: list[Finding]) -> Finding:
    """gpu_idle with the causes found beside it that explain its idle time (their IDLE_EXPLAINED evidence, capped
    at the idle time), and the part no cause explains."""
    per_step = idle.evidence.get("idle_ns_per_step", float("nan"))
    causes = [(f.rule, f.evidence[IDLE_EXPLAINED]) for f in found if f.evidence.get(IDLE_EXPLAINED, 0) > 0]
    if not causes or math.isnan(per_step):
        return idle
    causes.sort(key=lambda c: -c[1])
    explained = min(sum(ns for _rule, ns in causes), per_step)
    named = ", ".join(f"{rule} {units.duration(ns)}" for rule, ns in causes)
    unexplained = per_step - explained
    return dataclasses.replace(
        idle, title=f"{idle.title}; per step, explained by {named}; {units.duration(unexplained)} unexplained",
        evidence={**idle.evidence, "idle_explained_ns_per_step": explained, "idle_unexplained_ns_per_step": unexplained,
                  **{f"explained_by_{rule}_ns_per_step": ns for rule, ns in causes}},
    )  # fmt: skip
