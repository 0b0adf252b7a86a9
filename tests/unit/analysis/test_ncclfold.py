"""The NCCL durations folded across ranks: exact (the multiset of every rank's durations per group and kind, whatever
the split, order and number of folds), bounded by the distinct values not the ranks, and read back as numpy reads the
whole array (quantiles bit for bit); a partial merge holds the fold, not its ranks' durations."""

from __future__ import annotations

import numpy as np
import pytest
from part_copies import copy_part
from test_parts import real_run as real_run  # the run folder of every real export: test_parts' fixture

from nsyskit.analysis.compute import nccldigest, ncclfold
from nsyskit.analysis.compute.nccl import size_buckets
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.block import NCCL_SUMS
from nsyskit.analysis.mapreduce.partfile import read_block, read_part
from nsyskit.analysis.mapreduce.partial import merge_block
from nsyskit.analysis.mapreduce.parts import map_reports


def random_ops(rng, count: int) -> Table:
    sizes = rng.choice([1024.0, 3000.0, 1 << 20, 1 << 24, np.nan], count)
    return Table({
        "op": rng.choice(np.asarray(["AllReduce", "AllGather", "Send/Recv"], dtype=object), count),
        "origin": rng.choice(np.asarray(["nccl-nvtx", "pytorch"], dtype=object), count),
        "start_ns": np.arange(count) * 10, "duration_ns": rng.integers(0, 300, count),  # many repeats
        "size_bytes": sizes, "bucket": size_buckets(sizes),
        "source": rng.choice(np.asarray(["gpu", "nvtx"], dtype=object), count), "nranks": rng.choice([0, 8], count),
    })  # fmt: skip


def multiset(cells: Table, cell: np.ndarray, durations: np.ndarray, counts: np.ndarray) -> dict:
    """(op, origin, bucket, size, nranks, gpu) -> {duration: count} of a fold's cells()."""
    keys = ncclfold.keys_of(cells)
    found: dict = {}
    for c, d, n in zip(cell.tolist(), durations.tolist(), counts.tolist(), strict=True):
        found.setdefault(keys[c], {})[d] = found.get(keys[c], {}).get(d, 0) + n
    return found


def expected(table: Table) -> dict:
    found: dict = {}
    for op, origin, bucket, size, n, source, d in zip(*(table[k].tolist() for k in ("op", "origin", "bucket",
            "size_bytes", "nranks", "source", "duration_ns")), strict=True):  # fmt: skip
        key = (op, origin, bucket, None if size != size else size, n, int(source == "gpu"))
        found.setdefault(key, {})[d] = found.get(key, {}).get(d, 0) + 1
    return found


@pytest.mark.parametrize("pending", [1 << 22, 5])
def test_the_fold_of_any_split_in_any_order_is_the_multiset_of_every_duration(pending, monkeypatch):
    monkeypatch.setattr(ncclfold, "PENDING_DURATIONS", pending)
    rng = np.random.default_rng(1)
    table = random_ops(rng, 4000)
    steps = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})
    pieces = np.split(np.arange(len(table)), np.sort(rng.choice(np.arange(1, len(table)), 30, replace=False)))
    digests = [nccldigest.digest(table.take(rows), steps) for rows in pieces]
    one, other = ncclfold.DurationFold(), ncclfold.DurationFold()
    for digest in digests:
        one.add_digest(digest)
    for index in rng.permutation(len(digests)):  # another order, and half of it as a partial merge's fold
        if index % 2:
            other.add_digest(digests[index])
        else:
            block = ncclfold.DurationFold()
            block.add_digest(digests[index])
            other.add_cells(*block.cells())
    assert multiset(*one.cells()) == multiset(*other.cells()) == expected(table)
    _cells, cell, durations, _counts = one.cells()
    assert len(durations) <= 300 * len(_cells) and np.all(np.diff(cell) >= 0)  # bounded by the values, sorted by cell


def test_a_rank_whose_kinds_interleave_inside_a_group_is_one_sorted_run_per_kind_and_folds_each_apart():
    """One collective, origin and bucket whose operations alternate between two message sizes and GPU/CPU timing,
    their durations interleaved (each kind's between the other's): the digest lays out each kind's durations as one
    sorted run, and the fold counts each kind's apart, cells numbered as they came."""
    count = 400
    sizes = np.where(np.arange(count) % 2 == 0, 4096.0, 8192.0)  # both <64KB: one group, two sizes
    table = Table({
        "op": np.full(count, "AllReduce", dtype=object), "origin": np.full(count, "nccl-nvtx", dtype=object),
        "start_ns": np.arange(count) * 10, "duration_ns": (np.arange(count) * 7919) % 1000,  # interleaved kinds
        "size_bytes": sizes, "bucket": size_buckets(sizes),
        "source": np.where(np.arange(count) % 3 == 0, "gpu", "nvtx").astype(object), "nranks": np.full(count, 8),
    })  # fmt: skip
    steps = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})
    digest = nccldigest.digest(table, steps)
    assert len(digest.groups) == 1 and len(digest.kinds) == 4
    codes, durations = digest.kind_codes.astype(np.int64), digest.durations.astype(np.int64)
    assert np.all(np.diff(codes) >= 0)  # one run per kind, in code order
    for code in range(4):
        run = durations[codes == code]
        assert len(run) and np.all(np.diff(run) >= 0)  # each sorted
    fold = ncclfold.DurationFold()
    fold.add_digest(digest)
    cells, cell, folded, counts = fold.cells()
    assert multiset(cells, cell, folded, counts) == expected(table)
    kinds = list(zip(digest.kinds["size_bytes"].tolist(), digest.kinds["gpu"].tolist(), strict=True))
    assert list(zip(cells["size_bytes"].tolist(), cells["gpu"].tolist(), strict=True)) == kinds  # order of arrival
    assert np.all(np.diff(cell) >= 0) and all(np.all(np.diff(folded[cell == c]) > 0) for c in range(4))


@pytest.mark.parametrize("pending", [1 << 22, 3])
def test_int64_durations_past_uint32_and_below_zero_fold_per_cell_with_the_uint32_ones(pending, monkeypatch):
    """Durations of 2**32 ns and more (past the uint32 a digest keeps where it can), past 2**41, and negative ones (a
    clock that stepped back) fold exactly, in the cells where uint32 ranks' durations are, in either order and
    through a partial merge's fold."""
    monkeypatch.setattr(ncclfold, "PENDING_DURATIONS", pending)
    rng = np.random.default_rng(8)
    steps = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})
    small = random_ops(rng, 500)
    wide = random_ops(rng, 500)
    wide = Table({**wide.columns, "duration_ns": rng.choice([-5, -1, 0, 7, 299, 1 << 32, (1 << 41) + 3, 1 << 50], 500)})
    digests = [nccldigest.digest(small, steps), nccldigest.digest(wide, steps)]
    assert digests[0].durations.dtype == np.uint32 and digests[1].durations.dtype == np.int64
    both = Table({k: np.concatenate([small[k], wide[k]]) for k in small.names})
    for order in ([0, 1], [1, 0]):
        fold = ncclfold.DurationFold()
        for index in order:
            fold.add_digest(digests[index])
        cells, cell, durations, counts = fold.cells()
        assert durations.dtype == np.int64 and multiset(cells, cell, durations, counts) == expected(both)
        assert np.all((np.diff(cell) > 0) | ((np.diff(cell) == 0) & (np.diff(durations) > 0)))  # by cell, duration
        again = ncclfold.DurationFold()  # a partial merge's fold, folded into a rank's
        again.add_digest(digests[order[0]])
        block = ncclfold.DurationFold()
        block.add_digest(digests[order[1]])
        again.add_cells(*block.cells())
        assert multiset(*again.cells()) == expected(both)


def test_a_fold_read_then_added_to_keeps_what_it_gave_and_folds_on_exactly():
    """cells() is read by several tables in turn (one result for all); ranks folded in after it change a later
    cells(), never the arrays an earlier one returned."""
    rng = np.random.default_rng(9)
    steps = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})
    first, second = random_ops(rng, 2000), random_ops(rng, 2000)
    fold = ncclfold.DurationFold()
    fold.add_digest(nccldigest.digest(first, steps))
    read = fold.cells()
    kept = [np.array(part, copy=True) for part in read[1:]]
    assert fold.cells() is read  # nothing added: the same result
    fold.add_digest(nccldigest.digest(second, steps))
    both = Table({k: np.concatenate([first[k], second[k]]) for k in first.names})
    assert multiset(*fold.cells()) == expected(both)
    assert all(np.array_equal(a, b) for a, b in zip(read[1:], kept, strict=True))
    assert multiset(*read) == expected(first)


def test_the_folds_quantiles_and_median_are_numpys_of_the_whole_array_bit_for_bit():
    rng = np.random.default_rng(5)
    for _ in range(2000):
        values = rng.choice(
            rng.random(int(rng.integers(1, 9))) * 10.0 ** rng.integers(-3, 12), int(rng.integers(1, 60))
        )
        distinct, counts = np.unique(values, return_counts=True)
        order = rng.permutation(len(distinct))  # the fold's cells come in any order
        got = ncclfold.quantiles(distinct[order], counts[order], [0.1, 0.5, 0.9])
        assert got == [float(q) for q in np.quantile(values, [0.1, 0.5, 0.9])]
        assert ncclfold.median(distinct[order], counts[order]) == float(np.median(values))


def test_a_partial_merge_holds_its_ranks_durations_folded_not_each_ranks(real_run, tmp_path):
    parts = map_reports([real_run], tmp_path / "one")
    with_ops = next(p for p in parts if sum(r["nccl"].sums["count"] for r in read_part(p)[1]) > 0)
    sizes = {}
    for copies in (2, 8):
        copy_part(with_ops, copies, tmp_path / f"copies{copies}")
        block = read_block(merge_block(tmp_path / f"copies{copies}", tmp_path / f"partial{copies}"))
        # per rank its NCCL sums alone (the block holds no rank's durations), the block's fold beside them
        assert all(set(r) - {"warnings"} == {"rank", "source", "nsys_version", "summary", NCCL_SUMS} for r in block.results)
        assert block.results[0][NCCL_SUMS]["count"] > 0
        cells, cell, durations, counts, shifts, _totals = block.fold
        assert not shifts.any()  # a real run's cells stay within the budget: every duration exact
        sizes[copies] = (len(cells), len(durations))
        per_rank = sum(r[NCCL_SUMS]["count"] for r in block.results) // copies
        assert int(counts.sum()) == per_rank * copies  # every operation of every rank, counted
    assert sizes[2] == sizes[8]  # four times the ranks, the same folded values
