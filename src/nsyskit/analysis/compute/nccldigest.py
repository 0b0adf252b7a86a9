"""A rank's NCCL operations reduced to what the run's tables need, exactly and small; and the run's roll-up of them.

At 1,024 ranks a run holds ~80M NCCL operations: no table of them fits a merge's memory. Each rank's digest keeps,
per collective, origin and size bucket, the count, the total time, the bytes and the sorted durations (the only
per-operation data: a median over all ranks is exact only from every value), and the sums over the operations that
start inside the profiled window's steps. Beside each duration sits a code into the rank's few distinct kinds of
operation (message size, communicator size, timed on the GPU or not): the bandwidth of every operation is its
size over its duration, so the run's bandwidth quantiles come exactly from what the parts carry. The roll-up adds those up across ranks; the NCCL sizes table, the
metrics, the small-message finding and the durations histogram read it. 'invoke analyze' and the merge of parts
build the same digests, so both give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsyskit.analysis.compute.nccl import NO_NRANKS, SIZE_BUCKETS, UNKNOWN_SIZE, distinct_sizes
from nsyskit.analysis.compute.ncclbandwidth import (
    BANDWIDTH_COLUMNS,
    WorldSize,
    bandwidths,
    bus_factor,
    communicator_sizes,
    quantiles,
)
from nsyskit.analysis.compute.table import Table, rows_by_rank
from nsyskit.analysis.read.records import factorize

GROUP_KEYS = ("op", "origin", "bucket")
SMALL_BUCKET = SIZE_BUCKETS[0][0]  # "<64KB"
DEFAULT_ORIGIN = "nccl-nvtx"  # an ops table without an origin column (hand-made ones)
# Where the sizes come from: the operations sized by NCCL's payloads (scalar or blob), JSON payloads, the NCCL log.
SIZE_ORIGIN_SUMS = {"payload": "payload_sized", "json": "json_sized", "log": "log_sized"}
SUMS = ("count", "small_count", "small_ns", "known_ns",  # every operation
        "window_count", "window_ns", "window_small_ns", "window_known_ns",  # those inside the window's steps
        *SIZE_ORIGIN_SUMS.values())  # fmt: skip


@dataclass
class NcclDigest:
    """One rank's NCCL operations: per group (op, origin, bucket) count, total_ns, bytes, known (sizes known) and the
    sorted durations, one group after another in `durations`; the sums of SUMS; and each duration's kind: its index
    in `kinds` (size_bytes, nranks: NO_NRANKS where the report does not say, gpu: 1 when timed by its kernels)."""

    groups: Table
    durations: np.ndarray
    sums: dict[str, int]
    kinds: Table = field(default_factory=lambda: _kinds([], [], []))
    kind_codes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint8))

    def group_durations(self) -> list[np.ndarray]:
        """Each group's sorted durations."""
        return self._split(self.durations)

    def group_kinds(self) -> list[np.ndarray]:
        """Each group's kind codes, aligned with group_durations."""
        return self._split(self.kind_codes)

    def _split(self, values: np.ndarray) -> list[np.ndarray]:
        ends = np.cumsum(self.groups["count"]) if len(self.groups) else np.empty(0, dtype=np.int64)
        return np.split(values, ends[:-1]) if len(ends) else []


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
        "window_known_ns": int(durations[window & known].sum()), **dict.fromkeys(SIZE_ORIGIN_SUMS.values(), 0),
    }  # fmt: skip
    if count and "size_origin" in ops:  # coded by nccl_operations: a count per code
        names, codes = ops.factorized("size_origin")
        for name, sized in zip(names, np.bincount(codes, minlength=len(names)).tolist(), strict=True):
            if name in SIZE_ORIGIN_SUMS:
                sums[SIZE_ORIGIN_SUMS[name]] += sized
    if not count:
        return NcclDigest(_groups([], [], [], [], [], [], []), np.empty(0, dtype=np.uint32), sums)
    kinds, kind_of_op = _kinds_of(ops)
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
    sorted_durations, kind_codes = _sorted_in_groups(inverse, durations, kind_of_op)
    totals = np.add.reduceat(sorted_durations, firsts)
    if len(sorted_durations) and sorted_durations.min() >= 0 and sorted_durations.max() < 1 << 32:
        sorted_durations = sorted_durations.astype(np.uint32)  # half the memory at 1,024 ranks; exact
    groups = _groups([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], counts, totals, nbytes, nknown)
    return NcclDigest(groups, sorted_durations, sums, kinds, kind_codes.astype(_code_dtype(len(kinds))))


def _kinds_of(ops: Table) -> tuple[Table, np.ndarray]:
    """The distinct (message size, communicator size, timed on the GPU) of a rank's operations, and each one's index
    among them. A table without nranks or source columns (hand-made ones) states no size and is timed on the GPU."""
    count = len(ops)
    sizes = ops["size_bytes"].astype(np.float64)
    nranks = ops["nranks"].astype(np.int64) if "nranks" in ops else np.full(count, NO_NRANKS, dtype=np.int64)
    if "source" in ops:
        sources, source_code = ops.factorized("source")
        gpu = np.asarray([s == "gpu" for s in sources], dtype=np.int64)[source_code]
    else:
        gpu = np.ones(count, dtype=np.int64)
    # nccl_operations hands the sizes coded too (Table.coded); a hand-made table's are coded here
    size_values, size_code = ops.coded["size_bytes"] if "size_bytes" in ops.coded else distinct_sizes(sizes)
    if nranks.min() == nranks.max():  # the usual rank: one communicator size (or none stated)
        n_values, n_code = nranks[:1], np.zeros(count, dtype=np.int64)
    else:
        n_values = np.unique(nranks)
        n_code = np.searchsorted(n_values, nranks)
    combined = (size_code * len(n_values) + n_code) * 2 + gpu
    used = np.flatnonzero(np.bincount(combined))  # the kinds present, in code order; renumbered 0..k-1
    renumber = np.zeros(int(used[-1]) + 1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    kinds = _kinds(size_values[used // 2 // len(n_values)], n_values[used // 2 % len(n_values)], used % 2)
    return kinds, renumber[combined]


def _kinds(size, nranks, gpu) -> Table:
    return Table({"size_bytes": np.asarray(size, dtype=np.float64), "nranks": np.asarray(nranks, dtype=np.int64),
                  "gpu": np.asarray(gpu, dtype=np.int64)})  # fmt: skip


def _code_dtype(count: int) -> type:
    """The least unsigned integer type that holds `count` codes."""
    return np.uint8 if count <= 1 << 8 else np.uint16 if count <= 1 << 16 else np.int64


def _sorted_in_groups(
    group: np.ndarray, durations: np.ndarray, kind: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The durations in group order, each group's sorted, and their kinds in that order: one sort of (group, duration,
    kind) packed into an int64 where they fit, else a lexsort."""
    group = group.astype(np.int64)
    kind = np.zeros(len(durations), dtype=np.int64) if kind is None else kind.astype(np.int64)
    low, high = (int(durations.min()), int(durations.max())) if len(durations) else (0, 0)
    bits, kind_bits = max(1, high.bit_length()), max(1, int(kind.max(initial=0)).bit_length())
    if low >= 0 and bits + kind_bits + max(1, int(group.max(initial=0)).bit_length()) <= 62:
        packed = np.sort((((group << bits) | durations) << kind_bits) | kind)
        return (packed >> kind_bits) & ((1 << bits) - 1), packed & ((1 << kind_bits) - 1)
    order = np.lexsort((kind, durations, group))
    return durations[order], kind[order]


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
    world: WorldSize | None = None  # the communicator size where a report states none (set by the merge)
    logged: dict[tuple[str, float], int] = field(default_factory=dict)  # (op, bytes) -> n the NCCL log states

    def add(self, rank: int, part: NcclDigest) -> None:
        """Add one rank's digest."""
        self.by_rank[rank] = part.sums
        for key in SUMS:
            self.sums[key] += part.sums.get(key, 0)  # (a part written before a key was counted: 0)
        if part.sums["count"]:
            self.digests.append(part)

    def window_ns(self, rank: int) -> int:
        """The rank's NCCL time inside the window's steps (0 for a rank without operations)."""
        return self.by_rank.get(rank, {}).get("window_ns", 0)

    def grouped(self) -> dict[tuple[str, str, str], list[tuple[NcclDigest, int, np.ndarray]]]:
        """(op, origin, bucket) -> [(digest, row, sorted durations)] over every rank, in rank order."""
        return {key: [member[:3] for member in members] for key, members in self.grouped_with_kinds().items()}

    def grouped_with_kinds(self) -> dict[tuple[str, str, str], list[tuple[NcclDigest, int, np.ndarray, np.ndarray]]]:
        """As grouped(), each member with its durations' kind codes too."""
        found: dict[tuple[str, str, str], list] = {}
        for part in self.digests:
            keys = zip(*(part.groups[k] for k in GROUP_KEYS), strict=True)
            for row, (values, codes, key) in enumerate(
                zip(part.group_durations(), part.group_kinds(), keys, strict=True)
            ):
                found.setdefault(key, []).append((part, row, values, codes))
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


def median_of(arrays: list[np.ndarray]) -> float:
    """The median of several sorted arrays' values together (a group's durations over every rank), exactly."""
    count = sum(len(a) for a in arrays)
    return _middle([a for a in arrays if len(a)], count) if count else float("nan")


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


SIZE_COLUMNS = ("op", "origin", "bucket", "nranks", "n_source", "count", "total_ns", "avg_ns", "median_ns", "bytes",
                "bw_count", *BANDWIDTH_COLUMNS)  # fmt: skip
TEXT_KEYS = (*GROUP_KEYS, "n_source")


def size_summary(total: NcclRollup, world: WorldSize | None = None) -> Table:
    """Per collective, origin, message-size bucket and communicator size n (the report's where it states one, else
    `world`'s; by default the number of ranks): count, total/average/median duration, total bytes, and the p10,
    median and p90 of the algbw and busbw of the operations timed on the GPU (bw_count of them), in GB/s."""
    world = world or total.world or WorldSize(max(1, len(total.by_rank)), "rank reports")
    found = total.grouped_with_kinds()
    rows: dict[str, list] = {c: [] for c in SIZE_COLUMNS}
    bucket_rank = {label: i for i, (label, _, _) in enumerate(SIZE_BUCKETS)}
    kinds = _AllKinds(total.digests)
    sizes_of: dict[tuple[int, str], tuple] = {}  # (id(digest), op) -> (n, source) per kind, and the one pair or None
    for key in sorted(found, key=lambda k: (k[0], k[1], bucket_rank.get(k[2], 99))):
        by_n: dict[tuple[int, str], list] = {}
        for part, row, values, codes in found[key]:
            if (id(part), key[0]) not in sizes_of:
                n_kind, source_kind = communicator_sizes(part.kinds, key[0], world, total.logged)
                pairs = set(zip(n_kind.tolist(), source_kind, strict=True))
                sizes_of[id(part), key[0]] = n_kind, source_kind, next(iter(pairs)) if len(pairs) == 1 else None
            n_kind, source_kind, only = sizes_of[id(part), key[0]]
            if only is not None:  # the usual rank: every operation's n from one place
                by_n.setdefault(only, []).append((part, row, values, codes, None))
                continue
            used = np.flatnonzero(np.bincount(codes, minlength=len(part.kinds))) if len(codes) else np.empty(0, int)
            pairs = sorted({(int(n_kind[k]), source_kind[k]) for k in used.tolist()})
            for n, source in pairs:
                kinds_here = [k for k in used.tolist() if (int(n_kind[k]), source_kind[k]) == (n, source)]
                mask = None if len(pairs) == 1 else np.isin(codes, kinds_here)
                by_n.setdefault((n, source), []).append((part, row, values, codes, mask))
        whole = len(by_n) == 1 and all(m[4] is None for m in next(iter(by_n.values())))
        for (n, source), members in sorted(by_n.items()):
            _size_row(rows, key, n, source, members, whole, kinds)
    return Table({
        **{k: np.asarray(rows[k], dtype=object) for k in TEXT_KEYS},
        **{k: np.asarray(rows[k], dtype=np.int64) for k in ("nranks", "count", "total_ns", "bw_count")},
        **{k: np.asarray(rows[k], dtype=np.float64) for k in ("avg_ns", "median_ns", "bytes", *BANDWIDTH_COLUMNS)},
    })  # fmt: skip


class _AllKinds:
    """Every digest's kinds in one table (each digest's codes shifted by its offset): one lookup per batch of ranks
    of a row of the sizes table, not one per rank."""

    BATCH = 64  # ranks whose operations are looked up together (bounds the copies a 1,024-rank row makes)

    def __init__(self, digests: list[NcclDigest]) -> None:
        counts = [len(d.kinds) for d in digests]
        self.offset = dict(zip(map(id, digests), np.cumsum([0, *counts])[:-1].astype(np.int64).tolist(), strict=True))
        self.size = np.concatenate([d.kinds["size_bytes"] for d in digests]) if digests else np.empty(0)
        gpu = np.concatenate([d.kinds["gpu"] for d in digests]) if digests else np.empty(0, dtype=np.int64)
        self.timed = (gpu == 1) & ~np.isnan(self.size)  # a bandwidth needs a known size and the GPU's time

    def batches(self, members: list):
        """(durations, kind codes into this table) of the members (masked where they are), BATCH ranks at a time."""
        for start in range(0, len(members), self.BATCH):
            chunk = [(values, codes) if mask is None else (values[mask], codes[mask])
                     for _p, _r, values, codes, mask in members[start:start + self.BATCH]]  # fmt: skip
            offsets = [self.offset[id(member[0])] for member in members[start : start + self.BATCH]]
            yield (np.concatenate([values for values, _codes in chunk]).astype(np.int64),
                   np.concatenate([codes.astype(np.int64) + at for (_v, codes), at in zip(chunk, offsets, strict=True)]))  # fmt: skip


def _size_row(
    rows: dict[str, list], key: tuple, n: int, source: str, members: list, whole: bool, kinds: _AllKinds
) -> None:
    """Append the row of one (op, origin, bucket) and communicator size: `members` are (digest, row, durations, kind
    codes, mask of those of this n or None for all); `whole`: every operation of the group is this row's."""
    arrays = [values if mask is None else values[mask] for _part, _row, values, _codes, mask in members]
    count = sum(map(len, arrays))
    nanos, known, nbytes, pieces = 0, 0, 0.0, []
    for durations, codes in kinds.batches(members):
        sizes = kinds.size[codes]
        if not whole:
            nanos, known = nanos + int(durations.sum()), known + int((~np.isnan(sizes)).sum())
            nbytes += float(np.nansum(sizes))
        timed = kinds.timed[codes] & (durations > 0)
        pieces.append(bandwidths(key[0], n, sizes[timed], durations[timed], bus=False)[0])
    if whole:  # the group's own sums, as the digests added them in the operations' order
        nanos = sum(int(part.groups["total_ns"][row]) for part, row, *_rest in members)
        known = sum(int(part.groups["known"][row]) for part, row, *_rest in members)
        nbytes = float(np.sum([part.groups["bytes"][row] for part, row, *_rest in members]))
    algbw = np.concatenate(pieces) if pieces else np.empty(0)
    del pieces
    timed_count = len(algbw)
    alg = quantiles([algbw], in_place=True)  # busbw is algbw times one positive factor per row: its quantiles too
    values_of = (*key, n, source, count, nanos, nanos / count, _middle(arrays, count), nbytes if known else np.nan,
                 timed_count, *alg, *(q * bus_factor(key[0], n) for q in alg))  # fmt: skip
    for column, value in zip(SIZE_COLUMNS, values_of, strict=True):
        rows[column].append(value)


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
