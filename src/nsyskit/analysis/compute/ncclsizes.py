"""The run's NCCL tables read from its roll-up (compute.nccldigest.NcclRollup): the sizes table (per collective,
origin, size bucket and communicator size: count, time, median, bandwidth quantiles), each group's median over
every rank, and each size bucket's durations (the histogram)."""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute import ncclfold
from nsyskit.analysis.compute.nccl import SIZE_BUCKETS
from nsyskit.analysis.compute.ncclbandwidth import BANDWIDTH_COLUMNS, QUANTILES, WorldSize, bandwidths, bus_factor
from nsyskit.analysis.compute.nccldigest import GROUP_KEYS, Folded, GroupSums, NcclRollup
from nsyskit.analysis.compute.table import Table


def group_medians(total: NcclRollup) -> dict[tuple[str, str, str], tuple[float, np.ndarray, np.ndarray]]:
    """(op, origin, bucket) -> (the median over every rank and kind, the durations, their counts), groups in the
    order they first came."""
    folded = total.folded()
    found = {}
    for key, cells in folded.by_group().items():
        durations, counts = folded.of(cells)
        found[key] = (ncclfold.median(durations, counts), durations, counts)
    return found


SIZE_COLUMNS = ("op", "origin", "bucket", "nranks", "n_source", "count", "total_ns", "avg_ns", "median_ns", "bytes",
                "bw_count", *BANDWIDTH_COLUMNS)  # fmt: skip
TEXT_KEYS = (*GROUP_KEYS, "n_source")


def size_summary(total: NcclRollup, world: WorldSize | None = None) -> Table:
    """Per collective, origin, message-size bucket and communicator size n (the report's where it states one, else
    `world`'s; by default the number of ranks): count, total/average/median duration, total bytes, and the p10,
    median and p90 of the algbw and busbw of the operations timed on the GPU (bw_count of them), in GB/s."""
    world = world or total.world or WorldSize(max(1, len(total.by_rank)), "rank reports")
    folded = total.folded()
    rows: dict[str, list] = {c: [] for c in SIZE_COLUMNS}
    bucket_rank = {label: i for i, (label, _, _) in enumerate(SIZE_BUCKETS)}
    by_group = folded.by_group()
    sizes_of = {op: folded.sizes(op, world, total.logged) for op in {key[0] for key in by_group}}
    for key in sorted(by_group, key=lambda k: (k[0], k[1], bucket_rank.get(k[2], 99))):
        n_of, source_of = sizes_of[key[0]]
        by_n: dict[tuple[int, str], list[int]] = {}
        for cell in by_group[key]:
            by_n.setdefault((int(n_of[cell]), source_of[cell]), []).append(cell)
        for (n, source), cells in sorted(by_n.items()):
            _size_row(rows, key, n, source, cells, total.groups[key] if len(by_n) == 1 else None, folded)
    return Table({
        **{k: np.asarray(rows[k], dtype=object) for k in TEXT_KEYS},
        **{k: np.asarray(rows[k], dtype=np.int64) for k in ("nranks", "count", "total_ns", "bw_count")},
        **{k: np.asarray(rows[k], dtype=np.float64) for k in ("avg_ns", "median_ns", "bytes", *BANDWIDTH_COLUMNS)},
    })  # fmt: skip


def _size_row(
    rows: dict[str, list], key: tuple, n: int, source: str, cells: list[int], whole: GroupSums | None, folded: Folded
) -> None:
    """Append the row of one (op, origin, bucket) and communicator size n: its cells; `whole`: the group's per-rank
    sums when every operation of the group is this row's (then its sums are the digests', added in rank order)."""
    durations, counts = folded.of(cells)
    count = int(counts.sum())
    if whole is not None:
        nanos, known = int(whole.in_rank_order("total_ns").sum()), int(whole.in_rank_order("known").sum())
        nbytes = float(np.sum(whole.in_rank_order("bytes")))
    else:  # sums of whole numbers: exact in any order (bytes below 2^53 in all)
        nanos, known, nbytes = 0, 0, 0.0
        for cell in cells:
            values, times = folded.of([cell])
            size, weight = float(folded.cells["size_bytes"][cell]), int(times.sum())
            nanos += int(folded.totals[cell]) if folded.totals is not None else int((values * times).sum())
            if size == size:
                known, nbytes = known + weight, nbytes + size * weight
    speeds, weights = [], []
    for cell in cells:
        size = float(folded.cells["size_bytes"][cell])
        if folded.cells["gpu"][cell] != 1 or size != size:  # a bandwidth needs a known size and the GPU's time
            continue
        values, times = folded.of([cell])
        timed = values > 0
        speeds.append(bandwidths(key[0], n, np.full(int(timed.sum()), size), values[timed], bus=False)[0])
        weights.append(times[timed])
    speeds_all = np.concatenate(speeds) if speeds else np.empty(0)
    weights_all = np.concatenate(weights) if weights else np.empty(0, dtype=np.int64)
    alg = ncclfold.quantiles(speeds_all, weights_all, [q for _name, q in QUANTILES])
    values_of = (*key, n, source, count, nanos, nanos / count, ncclfold.median(durations, counts),
                 nbytes if known else np.nan, int(weights_all.sum()), *alg,
                 *(q * bus_factor(key[0], n) for q in alg))  # fmt: skip
    for column, value in zip(SIZE_COLUMNS, values_of, strict=True):
        rows[column].append(value)


def bucket_durations(total: NcclRollup) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Size bucket -> the distinct durations of its operations (per group and kind) and their counts."""
    folded = total.folded()
    cells: dict[str, list[int]] = {}
    for cell, bucket in enumerate(folded.cells["bucket"].tolist()):
        cells.setdefault(bucket, []).append(cell)
    return {bucket: folded.of(members) for bucket, members in cells.items()}
