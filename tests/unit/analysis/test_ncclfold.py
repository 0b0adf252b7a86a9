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
from nsyskit.analysis.mapreduce.partial import merge_block
from nsyskit.analysis.mapreduce.parts import map_reports, read_block, read_part


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
    monkeypatch.setattr(ncclfold, "PENDING_KEYS", pending)
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
        cells, cell, durations, counts = block.fold
        sizes[copies] = (len(cells), len(durations))
        per_rank = sum(r[NCCL_SUMS]["count"] for r in block.results) // copies
        assert int(counts.sum()) == per_rank * copies  # every operation of every rank, counted
    assert sizes[2] == sizes[8]  # four times the ranks, the same folded values
