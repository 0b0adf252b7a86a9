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

from array import array
from dataclasses import dataclass, field

import numpy as np

from nsyskit.analysis.compute.nccl import NO_NRANKS, SIZE_BUCKETS, UNKNOWN_SIZE, distinct_sizes
from nsyskit.analysis.compute.ncclbandwidth import (
    WorldSize,
    communicator_sizes,
)
from nsyskit.analysis.compute.ncclfold import DurationFold
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
    durations, one group after another in `durations`, within a group one kind after another, each kind's sorted;
    the sums of SUMS; and each duration's kind: its index in `kinds` (size_bytes, nranks: NO_NRANKS where the
    report does not say, gpu: 1 when timed by its kernels)."""

    groups: Table
    durations: np.ndarray
    sums: dict[str, int]
    kinds: Table = field(default_factory=lambda: _kinds([], [], []))
    kind_codes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint8))

    def without_durations(self) -> NcclDigest:
        """The digest once its durations are folded (compute.ncclfold): its groups, sums and kinds."""
        return NcclDigest(self.groups, self.durations[:0], self.sums, self.kinds, self.kind_codes[:0])


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
    """The durations in group order, within a group by kind, each (group, kind)'s sorted, and their kinds in that
    order: one sort of (group, kind, duration) packed into an int64 where they fit, else a lexsort. Each (group,
    kind) is then one sorted run, which the fold (compute.ncclfold) takes as it is."""
    group = group.astype(np.int64)
    kind = np.zeros(len(durations), dtype=np.int64) if kind is None else kind.astype(np.int64)
    low, high = (int(durations.min()), int(durations.max())) if len(durations) else (0, 0)
    bits, kind_bits = max(1, high.bit_length()), max(1, int(kind.max(initial=0)).bit_length())
    if low >= 0 and bits + kind_bits + max(1, int(group.max(initial=0)).bit_length()) <= 62:
        packed = np.sort((((group << kind_bits) | kind) << bits) | durations)
        return packed & ((1 << bits) - 1), (packed >> bits) & ((1 << kind_bits) - 1)
    order = np.lexsort((durations, kind, group))
    return durations[order], kind[order]


def _groups(op, origin, bucket, count, total, nbytes, known) -> Table:
    return Table({
        "op": np.asarray(op, dtype=object), "origin": np.asarray(origin, dtype=object),
        "bucket": np.asarray(bucket, dtype=object), "count": np.asarray(count, dtype=np.int64),
        "total_ns": np.asarray(total, dtype=np.int64), "bytes": np.asarray(nbytes, dtype=np.float64),
        "known": np.asarray(known, dtype=np.int64),
    })  # fmt: skip


@dataclass
class GroupSums:
    """A group's (op, origin, bucket) sums over the ranks: each rank's total, operations of known size and bytes,
    in the ranks' order (a float sum's order is part of its value), with the rank each came from."""

    ranks: array = field(default_factory=lambda: array("q"))
    total_ns: array = field(default_factory=lambda: array("q"))
    known: array = field(default_factory=lambda: array("q"))
    bytes: array = field(default_factory=lambda: array("d"))

    def in_rank_order(self, name: str) -> np.ndarray:
        values = np.frombuffer(getattr(self, name), dtype=np.int64 if name != "bytes" else np.float64)
        return values[np.argsort(np.frombuffer(self.ranks, dtype=np.int64), kind="stable")]


@dataclass
class NcclRollup:
    """A run's NCCL digests added up: the sums of SUMS over all ranks and per rank, each group's per-rank sums, and
    every rank's durations folded (compute.ncclfold: per group and kind, the distinct durations with counts)."""

    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMS, 0))
    by_rank: dict[int, dict[str, int]] = field(default_factory=dict)
    groups: dict[tuple[str, str, str], GroupSums] = field(default_factory=dict)
    fold: DurationFold = field(default_factory=DurationFold)
    world: WorldSize | None = None  # the communicator size where a report states none (set by the merge)
    logged: dict[tuple[str, float], int] = field(default_factory=dict)  # (op, bytes) -> n the NCCL log states

    def add(self, rank: int, part: NcclDigest) -> None:
        """Add one rank's digest (its durations folded in; a digest whose durations were folded already adds its
        sums and groups)."""
        self.by_rank[rank] = part.sums
        for key in SUMS:
            self.sums[key] += part.sums.get(key, 0)  # (a part written before a key was counted: 0)
        if not part.sums["count"]:
            return
        groups = part.groups
        for row, key in enumerate(zip(*(groups[k].tolist() for k in GROUP_KEYS), strict=True)):
            found = self.groups.get(key)
            if found is None:
                found = self.groups[key] = GroupSums()
            found.ranks.append(rank)
            found.total_ns.append(int(groups["total_ns"][row]))
            found.known.append(int(groups["known"][row]))
            found.bytes.append(float(groups["bytes"][row]))
        self.fold.add_digest(part)

    def add_joined(
        self, first: int, sums: list[dict[str, int]], groups: Table | None, rows: np.ndarray, fold: tuple | None
    ) -> None:  # fmt: skip
        """Add ranks first, first+1, ... at once, as add does rank by rank: their sums, their groups joined (`rows`:
        each rank's rows of `groups`; each group's per-rank sums appended in rank order) and their durations folded
        already (DurationFold.add_cells' arguments: a partial merge's fold, with its cells' units), or None."""
        for offset, rank_sums in enumerate(sums):
            self.by_rank[first + offset] = rank_sums
        for key in SUMS:
            self.sums[key] += sum(rank_sums.get(key, 0) for rank_sums in sums)  # (a part written before a key: 0)
        if fold is not None:
            self.fold.add_cells(*fold)
        if groups is None or not len(groups):
            return
        counted = np.fromiter((bool(rank_sums["count"]) for rank_sums in sums), dtype=bool, count=len(sums))
        kept = np.repeat(counted, rows)  # a rank without operations adds no groups, as add
        positions = np.repeat(np.arange(first, first + len(sums), dtype=np.int64), rows)[kept]
        seen: dict[tuple, int] = {}  # each group's code, in the order the ranks first have it (add's order)
        keys = zip(*(groups[name][kept].tolist() for name in GROUP_KEYS), strict=True)
        codes = np.fromiter((seen.setdefault(key, len(seen)) for key in keys), dtype=np.int64, count=int(kept.sum()))
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(seen) + 1))
        columns = {name: groups[name][kept][order] for name in ("total_ns", "known", "bytes")}
        positions = positions[order]
        for code, key in enumerate(seen):
            found = self.groups.get(key)
            if found is None:
                found = self.groups[key] = GroupSums()
            rows_of = slice(bounds[code], bounds[code + 1])
            found.ranks.extend(array("q", positions[rows_of].tobytes()))
            found.total_ns.extend(array("q", columns["total_ns"][rows_of].astype(np.int64).tobytes()))
            found.known.extend(array("q", columns["known"][rows_of].astype(np.int64).tobytes()))
            found.bytes.extend(array("d", columns["bytes"][rows_of].astype(np.float64).tobytes()))

    def renumbered(self, ranks: dict[int, int]) -> NcclRollup:
        """The roll-up with each rank r given as ranks[r] (the merge numbers ranks once every part is in)."""
        self.by_rank = {ranks[rank]: sums for rank, sums in sorted(self.by_rank.items(), key=lambda i: ranks[i[0]])}
        for found in self.groups.values():
            found.ranks = array("q", (ranks[rank] for rank in found.ranks))
        return self

    def window_ns(self, rank: int) -> int:
        """The rank's NCCL time inside the window's steps (0 for a rank without operations)."""
        return self.by_rank.get(rank, {}).get("window_ns", 0)

    def folded(self) -> Folded:
        """The folded durations, cell by cell (read once every rank is in)."""
        return Folded(*self.fold.cells(), totals=self.fold.totals())


@dataclass
class Folded:
    """The run's folded durations: `cells` (ncclfold.CELL_COLUMNS) and, per cell, its distinct durations and their
    counts: durations[firsts[c] : firsts[c + 1]] (ascending) for cell c; `totals`: each cell's exact time in ns
    (a cell held in units coarser than a ns has floored values: its time is not theirs summed)."""

    cells: Table
    cell: np.ndarray
    durations: np.ndarray
    counts: np.ndarray
    totals: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.firsts = np.searchsorted(self.cell, np.arange(len(self.cells) + 1))

    def of(self, cells: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(durations, counts) of these cells together (not sorted across cells)."""
        pieces = [slice(self.firsts[c], self.firsts[c + 1]) for c in cells]
        if len(pieces) == 1:
            return self.durations[pieces[0]], self.counts[pieces[0]]
        if not pieces:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.concatenate([self.durations[p] for p in pieces]), np.concatenate([self.counts[p] for p in pieces])

    def by_group(self) -> dict[tuple[str, str, str], list[int]]:
        """(op, origin, bucket) -> its cells, in the order the groups first came."""
        found: dict[tuple[str, str, str], list[int]] = {}
        for cell, key in enumerate(zip(*(self.cells[k].tolist() for k in GROUP_KEYS), strict=True)):
            found.setdefault(key, []).append(cell)
        return found

    def sizes(self, op: str, world: WorldSize, logged: dict) -> tuple[np.ndarray, list[str]]:
        """(n, where n comes from) of every cell, as for an operation `op` (ncclbandwidth.communicator_sizes)."""
        return communicator_sizes(self.cells, op, world, logged)


def rollup(digests: dict[int, NcclDigest], fold: DurationFold | None = None) -> NcclRollup:
    """The roll-up of the ranks' digests (rank -> digest); `fold`: their durations, folded already as they came."""
    total = NcclRollup() if fold is None else NcclRollup(fold=fold)
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
