"""A rank's NCCL operations reduced to what the run's tables need, exactly and small; and the run's roll-up of them.

At 1,024 ranks a run holds ~80M NCCL operations: no table of them fits a merge's memory. Each rank's digest keeps,
per collective, origin and size bucket, the count, the total time, the bytes and the sorted durations (the only
per-operation data: a median over all ranks is exact only from every value), and the sums over the operations that
start inside the profiled window's steps. The roll-up adds those up across ranks; the NCCL sizes table, the
metrics, the small-message finding and the durations histogram read it. 'invoke analyze' and the merge of parts
build the same digests, so both give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsyskit.analysis.compute.nccl import SIZE_BUCKETS, UNKNOWN_SIZE
from nsyskit.analysis.compute.table import Table, rows_by_rank
from nsyskit.analysis.read.records import factorize

GROUP_KEYS = ("op", "origin", "bucket")
SMALL_BUCKET = SIZE_BUCKETS[0][0]  # "<64KB"
DEFAULT_ORIGIN = "nccl-nvtx"  # an ops table without an origin column (hand-made ones)
SUMS = ("count", "small_count", "small_ns", "known_ns",  # every operation
        "window_count", "window_ns", "window_small_ns", "window_known_ns")  # those inside the window's steps  # fmt: skip


@dataclass
class NcclDigest:
    """One rank's NCCL operations: per group (op, origin, bucket) count, total_ns, bytes, known (sizes known) and the
    sorted durations, one group after another in `durations`; and the sums of SUMS."""

    groups: Table
    durations: np.ndarray
    sums: dict[str, int]

    def group_durations(self) -> list[np.ndarray]:
        """Each group's sorted durations."""
        ends = np.cumsum(self.groups["count"]) if len(self.groups) else np.empty(0, dtype=np.int64)
        return np.split(self.durations, ends[:-1]) if len(ends) else []


def _inside(starts: np.ndarray, steps: Table) -> np.ndarray:
    """Which operation starts lie inside one of the (one rank's) steps."""
    if not len(steps):
        return np.zeros(len(starts), dtype=bool)
    order = np.argsort(steps["start_ns"])
    begins = steps["start_ns"][order]
    ends = (steps["start_ns"] + steps["duration_ns"])[order]
    slot = np.searchsorted(begins, starts, side="right") - 1
    inside = np.zeros(len(starts), dtype=bool)
    valid = slot >= 0
    inside[valid] = starts[valid] < ends[slot[valid]]
    return inside


def digest(ops: Table, window_steps: Table) -> NcclDigest:
    """The digest of one rank's operations (op, origin, start_ns, duration_ns, size_bytes, bucket), with the
    rank's window steps (start_ns, duration_ns)."""
    count = len(ops)
    durations = ops["duration_ns"].astype(np.int64) if count else np.empty(0, dtype=np.int64)
    origin = ops["origin"] if "origin" in ops else np.full(count, DEFAULT_ORIGIN, dtype=object)
    buckets_seen, bucket_code = ops.factorized("bucket") if count else ([], np.empty(0, dtype=np.int64))
    known = np.asarray([b != UNKNOWN_SIZE for b in buckets_seen], dtype=bool)[bucket_code]
    small = np.asarray([b == SMALL_BUCKET for b in buckets_seen], dtype=bool)[bucket_code]
    window = _inside(ops["start_ns"], window_steps) if count else np.zeros(0, dtype=bool)
    sums = {
        "count": count, "small_count": int(small.sum()), "small_ns": int(durations[known & small].sum()),
        "known_ns": int(durations[known].sum()), "window_count": int(window.sum()),
        "window_ns": int(durations[window].sum()), "window_small_ns": int(durations[window & known & small].sum()),
        "window_known_ns": int(durations[window & known].sum()),
    }  # fmt: skip
    if not count:
        return NcclDigest(_groups([], [], [], [], [], [], []), np.empty(0, dtype=np.uint32), sums)
    ops_seen, op_code = ops.factorized("op")
    origins_seen, origin_code = ops.factorized("origin") if "origin" in ops else factorize(origin)
    combined = (op_code * len(origins_seen) + origin_code) * len(buckets_seen) + bucket_code
    # The groups in code order (as np.unique orders them): a count per code, codes are few (ops x origins x buckets).
    unique = np.flatnonzero(np.bincount(combined))
    renumber = np.zeros(int(unique[-1]) + 1, dtype=np.uint16 if len(unique) <= 1 << 16 else np.int64)
    renumber[unique] = np.arange(len(unique))
    inverse = renumber[combined]
    # Bytes in the operations' own order within each group (a float sum's order is part of its value); a stable
    # sort of 16-bit groups is numpy's radix sort.
    by_group = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(unique))
    firsts = np.r_[0, np.cumsum(counts)[:-1]]
    sizes = ops["size_bytes"].astype(np.float64)
    known_sizes = ~np.isnan(sizes)
    nbytes = np.add.reduceat(np.where(known_sizes, sizes, 0.0)[by_group], firsts)
    nknown = np.add.reduceat(known_sizes[by_group].astype(np.int64), firsts)
    keys = [(ops_seen[c // (len(origins_seen) * len(buckets_seen))], origins_seen[c // len(buckets_seen) % len(origins_seen)],
             buckets_seen[c % len(buckets_seen)]) for c in unique.tolist()]  # fmt: skip
    sorted_durations = _sorted_in_groups(inverse, durations)
    totals = np.add.reduceat(sorted_durations, firsts)
    if len(sorted_durations) and sorted_durations.min() >= 0 and sorted_durations.max() < 1 << 32:
        sorted_durations = sorted_durations.astype(np.uint32)  # half the memory at 1,024 ranks; exact
    groups = _groups([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], counts, totals, nbytes, nknown)
    return NcclDigest(groups, sorted_durations, sums)


def _sorted_in_groups(group: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """The durations in group order, each group's sorted: one sort of (group, duration) packed into an int64 where
    they fit, else a lexsort."""
    group = group.astype(np.int64)
    low, high = (int(durations.min()), int(durations.max())) if len(durations) else (0, 0)
    bits = max(1, high.bit_length())
    if low >= 0 and bits + max(1, int(group.max(initial=0)).bit_length()) <= 62:
        return np.sort((group << bits) | durations) & ((1 << bits) - 1)
    return durations[np.lexsort((durations, group))]


def _groups(op, origin, bucket, count, total, nbytes, known) -> Table:
    return Table({
        "op": np.asarray(op, dtype=object), "origin": np.asarray(origin, dtype=object),
        "bucket": np.asarray(bucket, dtype=object), "count": np.asarray(count, dtype=np.int64),
        "total_ns": np.asarray(total, dtype=np.int64), "bytes": np.asarray(nbytes, dtype=np.float64),
        "known": np.asarray(known, dtype=np.int64),
    })  # fmt: skip


@dataclass
class NcclRollup:
    """A run's NCCL digests added up: the sums of SUMS over all ranks and per rank, and the digests' groups."""

    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMS, 0))
    by_rank: dict[int, dict[str, int]] = field(default_factory=dict)
    digests: list[NcclDigest] = field(default_factory=list)

    def add(self, rank: int, part: NcclDigest) -> None:
        """Add one rank's digest."""
        self.by_rank[rank] = part.sums
        for key in SUMS:
            self.sums[key] += part.sums[key]
        if part.sums["count"]:
            self.digests.append(part)

    def window_ns(self, rank: int) -> int:
        """The rank's NCCL time inside the window's steps (0 for a rank without operations)."""
        return self.by_rank.get(rank, {}).get("window_ns", 0)

    def grouped(self) -> dict[tuple[str, str, str], list[tuple[NcclDigest, int, np.ndarray]]]:
        """(op, origin, bucket) -> [(digest, row, sorted durations)] over every rank, in rank order."""
        found: dict[tuple[str, str, str], list] = {}
        for part in self.digests:
            for row, (values, key) in enumerate(zip(part.group_durations(), zip(*(part.groups[k] for k in GROUP_KEYS),
                                                                            strict=True), strict=True)):  # fmt: skip
                found.setdefault(key, []).append((part, row, values))
        return found


def rollup(digests: dict[int, NcclDigest]) -> NcclRollup:
    """The roll-up of the ranks' digests (rank -> digest)."""
    total = NcclRollup()
    for rank in sorted(digests):
        total.add(rank, digests[rank])
    return total


def rollup_of_ops(ops: Table | None, window_steps: Table) -> NcclRollup:
    """The roll-up of a run's operations held in one table (with a rank column) and its window steps."""
    if ops is None or not len(ops):
        return NcclRollup()
    step_rows = rows_by_rank(window_steps["rank"]) if len(window_steps) else {}
    return rollup({rank: digest(ops.take(rows), window_steps.take(step_rows.get(rank, np.empty(0, dtype=np.int64))))
                   for rank, rows in rows_by_rank(ops["rank"]).items()})  # fmt: skip


CONCAT_BYTES = 256 << 20  # a group's durations up to this size are joined for the median; larger ones are searched


def _middle(arrays: list[np.ndarray], count: int) -> float:
    """The median of the values of several sorted arrays (count in all), exactly as of one sorted array of them."""
    low, high = (count - 1) // 2, count // 2
    if sum(a.nbytes for a in arrays) <= CONCAT_BYTES:
        values = np.partition(np.concatenate(arrays), [low, high])  # uint32 and int64 arrays join as int64
        first, second = int(values[low]), int(values[high])
    else:  # at 1,024 ranks: no copy of tens of millions of values
        first = _kth(arrays, low)
        second = first if high == low else _kth(arrays, high)
    return (float(first) + float(second)) / 2.0


def _kth(arrays: list[np.ndarray], k: int) -> int:
    """The k-th smallest (0-based) value of several sorted arrays: a binary search on the value, counting with
    searchsorted in each (no array of all the values is made)."""
    low = min(int(a[0]) for a in arrays)
    high = max(int(a[-1]) for a in arrays)
    while low < high:
        middle = (low + high) // 2
        if sum(int(np.searchsorted(a, middle, side="right")) for a in arrays) > k:
            high = middle
        else:
            low = middle + 1
    return low


def size_summary(total: NcclRollup) -> Table:
    """Per collective, origin and message-size bucket: count, total/average/median duration, total bytes."""
    columns = ("op", "origin", "bucket", "count", "total_ns", "avg_ns", "median_ns", "bytes")
    found = total.grouped()
    if not found:
        return Table({c: np.empty(0, dtype=object if c in GROUP_KEYS else np.float64) for c in columns})
    bucket_rank = {label: i for i, (label, _, _) in enumerate(SIZE_BUCKETS)}
    keys = sorted(found, key=lambda k: (k[0], k[1], bucket_rank.get(k[2], 99)))
    rows: dict[str, list] = {c: [] for c in columns}
    for key in keys:
        members = found[key]
        count = sum(int(part.groups["count"][row]) for part, row, _v in members)
        nanos = sum(int(part.groups["total_ns"][row]) for part, row, _v in members)
        known = sum(int(part.groups["known"][row]) for part, row, _v in members)
        nbytes = float(np.sum([part.groups["bytes"][row] for part, row, _v in members]))
        median = _middle([values for _part, _row, values in members], count)
        for column, value in zip(columns, (*key, count, nanos, nanos / count, median, nbytes if known else np.nan),
                                 strict=True):  # fmt: skip
            rows[column].append(value)
    return Table({
        **{k: np.asarray(rows[k], dtype=object) for k in GROUP_KEYS}, "count": np.asarray(rows["count"], dtype=np.int64),
        "total_ns": np.asarray(rows["total_ns"], dtype=np.int64), "avg_ns": np.asarray(rows["avg_ns"], dtype=np.float64),
        "median_ns": np.asarray(rows["median_ns"], dtype=np.float64), "bytes": np.asarray(rows["bytes"], dtype=np.float64),
    })  # fmt: skip


def bucket_durations(total: NcclRollup) -> dict[str, list[np.ndarray]]:
    """Size bucket -> the sorted durations of its operations, one array per rank and group (never joined)."""
    found: dict[str, list[np.ndarray]] = {}
    for key, members in total.grouped().items():
        found.setdefault(key[2], []).extend(values for _part, _row, values in members)
    return found


def histogram(arrays: list[np.ndarray], scale: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of the values of sorted `arrays` divided by `scale`, in `bins` equal bins from the least to the
    greatest, as numpy's histogram of all of them at once gives; one array at a time."""
    least = min(float(a[0]) for a in arrays) / scale
    greatest = max(float(a[-1]) for a in arrays) / scale
    edges = np.histogram_bin_edges(np.asarray([least, greatest]), bins=bins)
    counts = sum(np.histogram(a / scale, bins=edges)[0] for a in arrays)
    return counts, edges
