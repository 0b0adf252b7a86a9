"""The bandwidth of every collective, as nccl-tests reports it: algbw = size / GPU time and busbw = algbw x NCCL's
factor for the operation and communicator size n (nccl-tests' doc/PERFORMANCE.md), in GB/s (10^9 bytes/s).

Sizes follow nccl-tests' convention: AllReduce, Broadcast, Reduce and Send/Recv move their message; NCCL states the
per-rank part of an AllGather (sendcount), of a ReduceScatter (recvcount) and of an AlltoAll (the count sent to each
peer: ncclAlltoAll's payload, 2.28+), whose nccl-tests size is n times it (the whole gathered output, the whole
reduced input, the whole send buffer: alltoall_perf's size is nranks x its per-peer count). Only operations timed
by their GPU kernels have a bandwidth (a CPU range's time is not the transfer's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.compute.nccl import NO_NRANKS
from nsyskit.analysis.compute.table import Table

PER_RANK_SIZE = frozenset({"AllGather", "ReduceScatter", "AllToAll"})
QUANTILES = (("p10", 0.1), ("median", 0.5), ("p90", 0.9))
BANDWIDTH_COLUMNS = tuple(f"{kind}_{name}_gbps" for kind in ("algbw", "busbw") for name, _q in QUANTILES)
STATED = "report"  # n as the report states it (NCCL's NVTX payloads: the communicator's "No. of ranks")


@dataclass(frozen=True)
class WorldSize:
    """The communicator size that stands in where the report states none, and where it comes from."""

    n: int
    source: str  # "run.json" (the run's world size) or "rank reports" (the number of ranks analyzed)


def bus_factor(op: str, n: int) -> float:
    """busbw / algbw for a collective of `n` ranks (nccl-tests' PERFORMANCE.md); NaN where nccl-tests defines none."""
    if op == "AllReduce":
        return 2.0 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter", "AllToAll"):
        return (n - 1) / n
    if op in ("Broadcast", "Reduce", "Send/Recv"):
        return 1.0
    return float("nan")


def size_factor(op: str, n: int) -> int:
    """nccl-tests' size over the message size NCCL states: n for AllGather, ReduceScatter and AllToAll, else 1."""
    return n if op in PER_RANK_SIZE else 1


LOGGED = "nccl log"  # n as the run's NCCL log states it for the collective and size ([nranks=N] on its lines)


def communicator_sizes(
    kinds: Table, op: str, world: WorldSize, logged: dict[tuple[str, float], int] | None = None
) -> tuple[np.ndarray, list[str]]:
    """(n, where n comes from) of each kind of operation `op`: the report's communicator size where it states one,
    else the NCCL log's for that collective and message size where the log states exactly one, else the world's."""
    stated = kinds["nranks"] != NO_NRANKS
    sizes = np.where(stated, kinds["nranks"], world.n).astype(np.int64)
    sources = [STATED if s else world.source for s in stated.tolist()]
    for kind in np.flatnonzero(~stated).tolist() if logged else ():
        found = logged.get((op, float(kinds["size_bytes"][kind])))
        if found:
            sizes[kind], sources[kind] = found, LOGGED
    return sizes, sources


def logged_sizes(rows: list[dict]) -> dict[tuple[str, float], int]:
    """(collective, message bytes) -> communicator size, from an NCCL log's collective calls (NcclLogAnalysis
    .communicators: op, bytes, nranks); a collective and size logged with several sizes states none."""
    from nsyskit.analysis.compute.nccl import collective

    found: dict[tuple[str, float], set[int]] = {}
    for row in rows:
        op = collective(str(row["op"]))
        if op is not None and row.get("nranks"):
            found.setdefault((op, float(row["bytes"])), set()).add(int(row["nranks"]))
    return {key: next(iter(ns)) for key, ns in found.items() if len(ns) == 1}


def bandwidths(
    op: str, n: int, sizes: np.ndarray, durations: np.ndarray, bus: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """(algbw, busbw) in GB/s of operations of `sizes` bytes (as NCCL states them) taking `durations` ns on the GPU:
    bytes per ns is GB/s. `bus=False`: algbw only (None for busbw)."""
    algbw = sizes * float(size_factor(op, n)) / durations.astype(np.float64)
    return algbw, algbw * bus_factor(op, n) if bus else None


def quantiles(values: list[np.ndarray], in_place: bool = False) -> list[float]:
    """p10, median and p90 (numpy's linear interpolation) of the values of several arrays, as of one array of them
    all: exact whatever the split (a merge of parts gives the numbers one process gives). `in_place`: the one array
    given may be reordered (no copy of tens of millions of values)."""
    joined = values[0] if len(values) == 1 else np.concatenate(values) if values else np.empty(0)
    if not len(joined):
        return [float("nan")] * len(QUANTILES)
    found = np.quantile(joined, [q for _name, q in QUANTILES], overwrite_input=in_place and len(values) == 1)
    return [float(v) for v in found]


def world_size(reports: list[str], ranks: int) -> WorldSize:
    """The run's world size: run.json's beside the reports where a collect wrote one, else the number of ranks
    analyzed."""
    import os
    from pathlib import Path

    from nsyskit.analysis.read.runinfo import read_run_record

    # the reports' folders by name: a stat per report was 0.15 s of a 4,096-rank merge here, more on a shared FS
    record = read_run_record([Path(folder) for folder in sorted({os.path.dirname(report) for report in reports})])
    recorded = getattr(record, "world_size", None) if record is not None else None
    if isinstance(recorded, int) and recorded > 0:
        return WorldSize(recorded, "run.json")
    return WorldSize(max(1, ranks), "rank reports")


NCCL_TESTS_NAMES = {"Send/Recv": "sendrecv"}  # the collectives whose nccl-tests name canonical_op cannot derive


def nccl_tests_op(op: str) -> str:
    """The name a ceiling knows a collective by (AllReduce, or nccl-tests' sendrecv for Send/Recv)."""
    return NCCL_TESTS_NAMES.get(op, op)


def nccl_tests_size(row: dict) -> float:
    """A sizes row's average message size in nccl-tests' convention (n x the per-rank size for AllGather and
    ReduceScatter): where it sits on nccl-tests' size axis."""
    return row["bytes"] / row["count"] * size_factor(row["op"], row["nranks"])


def with_fabric(sizes: Table, ceiling) -> tuple[Table, list[str]]:
    """The sizes table with each row's fabric ceiling: nccl-tests' out-of-place busbw for the same operation at the
    row's average size (nccl-tests' size convention; interpolated on log size by `ceiling.busbw_at`) and the ratio of
    the row's median busbw to it; and one line naming the run's operations the measurement has no test for."""
    count = len(sizes)
    ceiling_of, ratio = np.full(count, np.nan), np.full(count, np.nan)
    missing: list[str] = []
    for at, row in enumerate(sizes.rows()):
        op, known = row["op"], row["bw_count"] > 0 and row["count"] > 0 and row["bytes"] == row["bytes"]
        if not known:
            continue
        if not ceiling.has(nccl_tests_op(op)):
            missing += [op] if op not in missing else []
            continue
        ceiling_of[at] = ceiling.busbw_at(nccl_tests_op(op), nccl_tests_size(row))
        ratio[at] = row["busbw_median_gbps"] / ceiling_of[at] if ceiling_of[at] > 0 else np.nan
    columns = dict(sizes.columns) | {"fabric_busbw_gbps": ceiling_of, "fabric_ratio": ratio}
    notes = []
    if missing:
        measured, binaries = ", ".join(ceiling.ops) or "nothing", ", ".join(BINARIES.get(op, op) for op in missing)
        if np.isnan(ceiling_of).all():
            notes.append(f"--fabric: the nccl-tests output measures none of this run's collectives ({', '.join(missing)}; "
                         f"it measures {measured}): no ceiling to compare with; run {binaries} on the same nodes")  # fmt: skip
        else:
            notes.append(f"--fabric: no nccl-tests measurement of {', '.join(missing)} (it measures {measured}): "
                         f"run {binaries} on the same nodes to compare them too")  # fmt: skip
    if ceiling.one_rank:  # kept out of the ceiling (nccltests.Ceiling): said once, with where they are
        notes.append(f"--fabric: left out {len(ceiling.one_rank)} test(s) run on one rank (no link "
                     f"crossed): {', '.join(ceiling.one_rank[:3])}{' ...' if len(ceiling.one_rank) > 3 else ''}")  # fmt: skip
    return Table(columns), notes


BINARIES = {"AllReduce": "all_reduce_perf", "AllGather": "all_gather_perf", "ReduceScatter": "reduce_scatter_perf",
            "AllToAll": "alltoall_perf", "Broadcast": "broadcast_perf", "Reduce": "reduce_perf",
            "Send/Recv": "sendrecv_perf", "Gather": "gather_perf", "Scatter": "scatter_perf"}  # fmt: skip
