"""The NCCL fold's budget of distinct durations per cell: a cell past it holds its durations floored to the least unit
of 2**k ns that fits, the same whatever the split and order of ranks and partial folds (through a partial merge's
file too), its numbers within one unit of the exact ones, its memory bounded by the budget, and one warning says so."""

from __future__ import annotations

import numpy as np
import pytest
from test_ncclfold import expected, random_ops
from test_partial_merge import mapped as mapped  # the real exports' parts: test_partial_merge's fixture
from test_partial_merge import same_merge, tree
from test_parts import real_run as real_run  # the run folder of every real export: test_parts' fixture

from nsyskit.analysis.compute import nccldigest, ncclfold, ncclsizes
from nsyskit.analysis.compute.ncclbandwidth import WorldSize
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.partpack import decode_fold, encode_fold
from nsyskit.analysis.mapreduce.parts import merge_parts
from nsyskit.analysis.trace import analyze_run

BUDGET = 64
NO_STEPS = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})


def jittered_tables(rng, ranks: int, count: int, low: int, high: int) -> list[Table]:
    """Ranks' operations whose durations are drawn from [low, high): nearly every one distinct."""
    tables = [random_ops(rng, count) for _ in range(ranks)]
    return [Table({**table.columns, "duration_ns": rng.integers(low, high, count)}) for table in tables]


def jittered_digests(rng, ranks: int, count: int, low: int, high: int) -> list[nccldigest.NcclDigest]:
    return [nccldigest.digest(table, NO_STEPS) for table in jittered_tables(rng, ranks, count, low, high)]


def least_shift(exact: np.ndarray) -> int:
    """The least k for which the exact durations floored to multiples of 2**k (Python's floor: toward -inf) have at
    most BUDGET distinct values."""
    return next(k for k in range(64) if len({d // (1 << k) for d in exact.tolist()}) <= BUDGET)


def exact_cells(tables: list[Table]) -> dict:
    """(op, origin, bucket, size, nranks, gpu) -> every duration of that cell over the ranks' operations."""
    found: dict = {}
    for table in tables:
        for key, durations in expected(table).items():
            for duration, count in durations.items():
                found.setdefault(key, []).extend([duration] * count)
    return {key: np.asarray(durations, dtype=np.int64) for key, durations in found.items()}


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(ncclfold, "DISTINCT_PER_CELL", BUDGET)
    monkeypatch.setattr(ncclfold, "PENDING_DURATIONS", 97)  # many batches: a cell coarsens, then takes more runs


@pytest.mark.parametrize(("low", "high"), [(0, 3_000_000), (-(1 << 20), 1 << 36)])
def test_a_cell_past_the_budget_holds_the_least_unit_and_its_numbers_are_within_one_unit(small_budget, low, high):
    """uint32 durations, and int64 ones past 2**32 and below zero (floored toward -inf): each cell at the least unit
    that holds its multiset in the budget, every duration floored to its unit, quantiles and median within a unit."""
    rng = np.random.default_rng(11)
    tables = jittered_tables(rng, 12, 600, low, high)
    digests, exact = [nccldigest.digest(table, NO_STEPS) for table in tables], exact_cells(tables)
    fold = ncclfold.DurationFold()
    for digest in digests:
        fold.add_digest(digest)
    cells, cell, durations, counts = fold.cells()
    shifts = fold.shifts()
    assert shifts.max() > 0 and len(shifts) == len(cells)
    for index, key in enumerate(ncclfold.keys_of(cells)):
        values, weights, unit = durations[cell == index], counts[cell == index], 1 << int(shifts[index])
        assert shifts[index] == least_shift(exact[key]) and len(values) <= BUDGET
        assert fold.totals()[index] == int(exact[key].sum())  # the cell's time stays exact, whatever its unit
        floored = {}
        for d in exact[key].tolist():
            floored[d // unit * unit] = floored.get(d // unit * unit, 0) + 1
        assert dict(zip(values.tolist(), weights.tolist(), strict=True)) == floored
        qs = [0.0, 0.1, 0.5, 0.9, 0.99, 1.0]
        got, want = ncclfold.quantiles(values, weights, qs), np.quantile(exact[key], qs)
        assert all(0 <= w - g < unit for g, w in zip(got, want, strict=True))
        assert 0 <= float(np.median(exact[key])) - ncclfold.median(values, weights) < unit


def through_file(fold: ncclfold.DurationFold) -> tuple:
    """A fold's cells() and shifts() as a partial merge's file holds them, read back."""
    members = {name: np.asarray(value) for name, value in encode_fold(*fold.cells(), fold.shifts(), fold.totals()).items()}
    return decode_fold(members)


def test_folds_of_any_split_and_order_give_the_same_cells_and_units(small_budget):
    """Ranks one by one, in another order, and as partial folds (one through the file, one a partial of partials)
    added to a fold: the same cells, durations, counts and units, byte for byte."""
    rng = np.random.default_rng(12)
    digests = jittered_digests(rng, 16, 500, -(1 << 12), 1 << 34)
    digests += jittered_digests(rng, 8, 500, 0, 40)  # alike ranks: their durations meet the coarse cells'
    one = ncclfold.DurationFold()
    for digest in digests:
        one.add_digest(digest)
    order = rng.permutation(len(digests)).tolist()
    other = ncclfold.DurationFold()
    for index in order[:5]:
        other.add_digest(digests[index])
    block, inner, outer = ncclfold.DurationFold(), ncclfold.DurationFold(), ncclfold.DurationFold()
    for index in order[5:9]:
        block.add_digest(digests[index])
    for index in order[9:17]:
        inner.add_digest(digests[index])
    outer.add_cells(*inner.cells(), inner.shifts(), inner.totals())
    for index in order[17:]:
        outer.add_digest(digests[index])
    other.add_cells(*through_file(block))
    other.add_cells(*through_file(outer))
    assert by_key(one) == by_key(other) and one.shifts().max() > 0


@pytest.mark.parametrize("budget", [BUDGET, 1 << 16])
def test_counting_in_bins_and_sorting_fold_the_same(monkeypatch, budget):
    """The fold counts a cell's pending durations in a bin per unit where they span few units, and sorts them where
    they do not: the same cells, durations, counts, units and totals either way, for ranks and for partial folds
    (weighted), uint32 and int64 durations, below zero and past 2**32, coarse cells and exact ones."""
    monkeypatch.setattr(ncclfold, "DISTINCT_PER_CELL", budget)
    monkeypatch.setattr(ncclfold, "PENDING_DURATIONS", 1500)
    rng = np.random.default_rng(15)
    digests = jittered_digests(rng, 10, 900, -(1 << 12), 1 << 34)
    digests += jittered_digests(rng, 10, 900, 0, 5000)  # narrow cells: counted in bins while exact
    digests += jittered_digests(rng, 6, 900, 0, 1 << 31)

    def folded() -> dict:
        partial, whole = ncclfold.DurationFold(), ncclfold.DurationFold()
        for digest in digests[::2]:
            partial.add_digest(digest)
        for digest in digests[1::2]:
            whole.add_digest(digest)
        whole.add_cells(*through_file(partial))
        return by_key(whole)

    counted = folded()
    monkeypatch.setattr(ncclfold, "DENSE_BINS", 0)  # every pending batch sorted
    assert counted == folded()
    assert any(shift for shift, *_rest in counted.values()) == (budget == BUDGET)


def by_key(fold: ncclfold.DurationFold) -> dict:
    """Cell key -> (its shift, its durations, their counts): a fold's cells whatever order they came in."""
    cells, cell, durations, counts = fold.cells()
    return {key: (int(fold.shifts()[index]), durations[cell == index].tolist(), counts[cell == index].tolist(),
                  int(fold.totals()[index])) for index, key in enumerate(ncclfold.keys_of(cells))}  # fmt: skip


def test_the_sizes_table_keeps_the_exact_time_of_a_collective_split_by_communicator_size(small_budget):
    """A group (op, origin, bucket) run on two communicator sizes is two rows whose time comes from the fold's cells:
    their exact totals, not their floored durations summed."""
    rng = np.random.default_rng(14)
    tables = jittered_tables(rng, 12, 600, 0, 3_000_000)
    total = nccldigest.rollup({rank: nccldigest.digest(table, NO_STEPS) for rank, table in enumerate(tables)})
    assert total.fold.shifts().max() > 0
    sizes = ncclsizes.size_summary(total, WorldSize(16, "test"))
    assert len(sizes) > len(set(zip(sizes["op"], sizes["origin"], sizes["bucket"], strict=True)))  # groups split by n
    assert int(sizes["total_ns"].sum()) == sum(int(table["duration_ns"].sum()) for table in tables)


def test_a_fold_of_many_jittered_ranks_holds_at_most_the_budget_per_cell(small_budget):
    rng = np.random.default_rng(13)
    fold = ncclfold.DurationFold()
    for digest in jittered_digests(rng, 60, 800, 0, 1 << 30):
        fold.add_digest(digest)
        assert fold.folded_size <= BUDGET * len(fold.cell_keys)  # after every batch, not just at the end
    cells, _cell, durations, counts = fold.cells()
    assert len(durations) <= BUDGET * len(cells) and int(counts.sum()) == 60 * 800


def coarsening_lines(analysis) -> list[str]:
    return [line for line in analysis.warnings if line.startswith("NCCL durations:")]


def test_the_real_runs_merge_says_once_what_it_coarsened_and_nothing_when_exact(mapped, real_run, tmp_path, monkeypatch):
    """The merge of the real exports' parts, of their partial merges, and 'invoke analyze' (analyze_run) warn once when
    a cell passed the budget, give the same analysis.json either way, and do not warn when every cell is exact."""
    assert coarsening_lines(merge_parts(mapped)[0]) == []
    monkeypatch.setattr(ncclfold, "DISTINCT_PER_CELL", 4)
    direct = merge_parts(mapped)
    lines = coarsening_lines(direct[0])
    assert len(lines) == 1 and "more than 4 distinct durations" in lines[0], direct[0].warnings
    same_merge(direct, merge_parts(tree(mapped, tmp_path / "partials", 3)))
    assert coarsening_lines(analyze_run([real_run], workers=1)) == lines
