"""Rules about how a run communicates, beyond how much: collectives far slower than their kind's median, and
communication kernels that cannot overlap compute.

nccl_outlier counts exactly from the ranks' NCCL durations folded across ranks (compute.ncclfold) and
takes when the slowest ran from each rank's evidence (compute.commcauses); serialized_streams reads the per-GPU
breakdown and each rank's stream evidence.
"""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.commcauses import OUTLIER_MIN_NS, OUTLIER_X, SEPARATOR, SERIAL_OVERLAP_PCT
from nsyskit.analysis.compute.evidence import pivot
from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.compute.ncclsizes import group_medians
from nsyskit.analysis.judge.finding import Finding, document

OUTLIERS = document(
    "nccl_outlier", "NCCL operations far slower than the median of the same operation and message-size bucket over "
    "all ranks: how many, the worst (rank, step), and the time they took beyond that median",
    f"one takes over {OUTLIER_X:g}x the median and at least {OUTLIER_MIN_NS / 1e6:g} ms more",
    "a slow collective waits for its slowest member: look at that rank and step in the timeline (a straggler, a "
    "host hiccup, a checkpoint), then at the fabric (NCCL log errors, retransmits, 'invoke analyze --fabric')",
)  # fmt: skip


def nccl_outlier(view: RunView) -> Finding | None:
    """Collectives over OUTLIER_X times their group's run-level median: the worst group, counted exactly."""
    if view.nccl is None:
        return None
    groups = []
    for key, (median, durations, counts) in group_medians(view.nccl).items():  # over every rank and kind
        if not median or median != median:
            continue
        threshold = max(OUTLIER_X * median, median + OUTLIER_MIN_NS)
        over = durations > threshold
        count = int(counts[over].sum())
        if count:  # whole numbers and halves: the excess is exact in any order
            excess = float(np.sum((durations[over] - median) * counts[over]))
            groups.append((excess, key, count, float(durations[over].max()), median))
    if not groups:
        return None
    groups.sort(key=lambda g: -g[0])
    excess, (op, origin, bucket), count, worst, median = groups[0]
    where = _worst_places(view, op, origin, bucket)
    total_excess = sum(g[0] for g in groups)
    ranks = tuple(sorted({rank for rank, _step, _ns in where}))
    steps = tuple(sorted({step for _rank, step, _ns in where if step >= 0}))
    worst_rank, worst_step, _ns = max(where, key=lambda w: w[2]) if where else (None, -1, 0.0)
    at = f" on rank {worst_rank}" + (f" in step {worst_step}" if worst_step >= 0 else "") if worst_rank is not None else ""
    more = f"; {len(groups) - 1} more group(s) have outliers" if len(groups) > 1 else ""
    all_steps = len(view.all_steps)
    return Finding(
        "nccl_outlier", "warning",
        f"{count:,} {op} {'of unknown size' if bucket == 'unknown' else 'of ' + bucket} took over {OUTLIER_X:g}x their median ({units.duration(median)}): worst "
        f"{units.duration(worst)}{at}, {units.duration(excess)} beyond the median in all{more}",
        worst / median, OUTLIER_X, OUTLIERS.advice,
        evidence={"outliers": float(count), "worst_ns": worst, "median_ns": median, "excess_ns": excess,
                  "excess_all_groups_ns": total_excess, "groups_with_outliers": float(len(groups))},
        ranks=ranks, steps=steps, at_stake_ns=total_excess / all_steps if all_steps else float("nan"),
        threshold_text=f"{OUTLIER_X:g}x the median",
    )  # fmt: skip


def _worst_places(view: RunView, op: str, origin: str, bucket: str) -> list[tuple[int, int, float]]:
    """(rank, step, duration) of each rank's slowest operation of the group, where the rank's evidence names one."""
    table = view.evidence
    if table is None or not len(table):
        return []
    prefix = SEPARATOR.join((op, origin, bucket, ""))
    mine = table.take((table["rule"] == "nccl_outlier") & np.char.startswith(table["key"].astype(str), prefix))
    found: dict[int, dict[str, float]] = {}
    for rank, key, value in zip(mine["rank"], mine["key"], mine["value"], strict=True):
        found.setdefault(int(rank), {})[str(key).rpartition(SEPARATOR)[2]] = float(value)
    return [(rank, int(facts.get("step", -1)), facts.get("worst_ns", 0.0)) for rank, facts in sorted(found.items())]


SERIAL_MIN_COMM_PCT = 5.0  # ... on a GPU whose NCCL kernels take at least this much of its window

SERIALIZED = document(
    "serialized_streams", "per GPU: the NCCL time that overlaps compute kernels, and whether NCCL kernels share a "
    "stream with compute kernels (then nothing can overlap)",
    f"a GPU with compute and communication (NCCL at least {SERIAL_MIN_COMM_PCT:g}% of its window) overlaps under "
    f"{SERIAL_OVERLAP_PCT:g}% of its NCCL time",
    "give communication its own stream and let it run beside the backward pass: DDP/FSDP do (no "
    "torch.cuda.synchronize() or .item() between buckets), custom collectives need async_op=True on a side stream; "
    "launch NCCL from one stream per process group",
)  # fmt: skip


def serialized_streams(view: RunView) -> Finding | None:
    """GPUs with both compute and communication where the two never overlap; why, where the streams tell."""
    table = view.breakdown if view.has_gpu else None
    if table is None:
        return None
    comm, compute, both = table["comm_ns"], table["compute_ns"], table["compute_comm_overlap_ns"]
    window = np.maximum(table["window_ns"], 1)
    serial = (comm > 0) & (compute > 0) & (both * 100.0 < SERIAL_OVERLAP_PCT * comm)
    serial &= comm * 100.0 / window >= SERIAL_MIN_COMM_PCT
    if not serial.any():
        return None
    ranks = tuple(sorted({int(r) for r in table["rank"][serial]}))
    facts = pivot(view.evidence, "serialized_streams")
    row_of = {int(r): i for i, r in enumerate(facts["rank"])}
    sharing = 0
    for rank, device in zip(table["rank"][serial], table["device"][serial], strict=True):
        column = f"{int(device)}{SEPARATOR}shared_stream"
        if column in facts and int(rank) in row_of and facts[column][row_of[int(rank)]] == 1.0:
            sharing += 1
    steps = {int(r): n for r, n in zip(*np.unique(view.all_steps["rank"], return_counts=True), strict=True)}
    per_step = [min(float(c), float(k)) / steps[int(r)] for r, c, k in zip(table["rank"][serial], comm[serial],
                compute[serial], strict=True) if steps.get(int(r))]  # fmt: skip
    stake = float(np.mean(per_step)) if per_step else float("nan")
    hidden_not = float(100.0 - (both[serial] * 100.0 / comm[serial]).mean())  # % of their NCCL time not overlapped
    why = f"; on {sharing} of them NCCL kernels share a stream with compute kernels" if sharing else ""
    return Finding(
        "serialized_streams", "warning",
        f"communication never overlaps compute on {int(serial.sum())} of {len(table)} GPUs "
        f"({units.duration(float(comm[serial].mean()))} of NCCL kernels each, none hidden){why}",
        hidden_not, 100.0 - SERIAL_OVERLAP_PCT, SERIALIZED.advice,
        evidence={"gpus_serialized": float(serial.sum()), "gpus": float(len(table)),
                  "gpus_sharing_a_stream": float(sharing), "comm_ns_mean": float(comm[serial].mean())},
        ranks=ranks, at_stake_ns=stake, threshold_text=f"{100 - SERIAL_OVERLAP_PCT:g}% of NCCL time not overlapped",
    )  # fmt: skip
