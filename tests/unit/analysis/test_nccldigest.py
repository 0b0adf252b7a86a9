"""The NCCL digest: a rank's operations reduced exactly (sums, sorted durations), and the run's roll-up of them."""

from __future__ import annotations

import numpy as np
import pytest

from nsyskit.analysis.compute import nccldigest, ncclfold, ncclsizes
from nsyskit.analysis.compute.nccl import size_buckets
from nsyskit.analysis.compute.table import Table


def ops(rank: int, durations, sizes, starts=None, op="AllReduce") -> Table:
    durations = np.asarray(durations, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.float64)
    return Table({
        "rank": np.full(len(durations), rank, dtype=np.int64), "op": np.full(len(durations), op, dtype=object),
        "origin": np.full(len(durations), "nccl-nvtx", dtype=object),
        "start_ns": np.asarray(starts if starts is not None else np.arange(len(durations)) * 10, dtype=np.int64),
        "duration_ns": durations, "size_bytes": sizes, "bucket": size_buckets(sizes),
    })  # fmt: skip


def no_steps() -> Table:
    return Table({n: np.empty(0, dtype=np.int64) for n in ("rank", "step", "start_ns", "duration_ns")})


@pytest.mark.parametrize("pending", [1 << 22, 7], ids=["one-fold", "many-folds"])
def test_run_medians_are_those_of_every_duration_whichever_way_they_are_folded(pending, monkeypatch):
    monkeypatch.setattr(ncclfold, "PENDING_DURATIONS", pending)  # 7: a fold every rank or two, as at 16,384 ranks
    rng = np.random.default_rng(7)
    per_rank = [rng.integers(1_000, 5_000_000, size=n) for n in (1, 2, 999, 1000, 4096)]
    # one rank's durations beyond uint32 (kept as int64) and beyond 2**40
    per_rank.append(np.asarray([1 << 33, 5, 5, 7, (1 << 41) + 3, (1 << 41) + 3]))
    total = nccldigest.rollup_of_ops(
        Table({k: np.concatenate([ops(r, d, np.full(len(d), 4096.0))[k] for r, d in enumerate(per_rank)])
               for k in ops(0, [1], [1.0]).names}), no_steps())  # fmt: skip
    [row] = list(ncclsizes.size_summary(total).rows())
    every = np.concatenate(per_rank)
    assert row["count"] == len(every) and row["total_ns"] == int(every.sum())
    assert row["median_ns"] == float(np.median(every.astype(np.float64)))
    even = np.concatenate(per_rank[:-1])
    total_even = nccldigest.rollup({r: nccldigest.digest(ops(r, d, np.full(len(d), 4096.0)), no_steps())
                                    for r, d in enumerate(per_rank[:-1])})  # fmt: skip
    assert len(even) % 2 == 0 and next(ncclsizes.size_summary(total_even).rows())["median_ns"] == float(
        np.median(even)
    )
    kept = [nccldigest.digest(ops(r, d, np.full(len(d), 4096.0)), no_steps()).durations.dtype
            for r, d in enumerate(per_rank)]  # fmt: skip
    assert kept[:-1] == [np.dtype(np.uint32)] * 5 and kept[-1] == np.dtype(np.int64)


def test_groups_bytes_and_unknown_sizes():
    one = nccldigest.digest(ops(0, [10, 20, 30, 40], [100.0, np.nan, 2e6, 3e6]), no_steps())
    table = ncclsizes.size_summary(nccldigest.rollup({0: one}))
    rows = {(r["op"], r["bucket"]): r for r in table.rows()}
    assert rows["AllReduce", "<64KB"]["bytes"] == 100.0
    assert np.isnan(table["bytes"][list(table["bucket"]).index("unknown")])  # no size known: no bytes, not 0
    row = rows["AllReduce", "1MB-16MB"]
    assert {k: row[k] for k in ("op", "origin", "bucket", "count", "total_ns", "avg_ns", "median_ns", "bytes")} == {"op": "AllReduce", "origin": "nccl-nvtx", "bucket": "1MB-16MB",
                                                  "count": 2, "total_ns": 70, "avg_ns": 35.0, "median_ns": 35.0,
                                                  "bytes": 5e6}  # fmt: skip
    assert one.sums["small_count"] == 1 and one.sums["known_ns"] == 80 and one.sums["small_ns"] == 10


def test_window_sums_count_the_operations_that_start_inside_a_step():
    steps = Table({"rank": np.zeros(2, dtype=np.int64), "step": np.arange(2), "start_ns": np.asarray([0, 100]),
                   "duration_ns": np.asarray([50, 50])})  # fmt: skip
    one = nccldigest.digest(ops(0, [5, 6, 7, 8], [10.0, 10.0, 1e6, np.nan], starts=[10, 60, 120, 149]), steps)
    assert (one.sums["window_count"], one.sums["window_ns"]) == (3, 5 + 7 + 8)  # 60 falls between the steps
    assert (one.sums["window_known_ns"], one.sums["window_small_ns"]) == (12, 5)


def test_the_histogram_of_folded_durations_counts_as_numpy_does_over_every_value():
    rng = np.random.default_rng(3)
    arrays = [np.sort(rng.integers(100, 10_000, size=n)) for n in (10, 500, 3333)]  # repeats: counts above 1
    every = np.concatenate(arrays) / 1e3
    values, times = np.unique(np.concatenate(arrays), return_counts=True)
    counts, edges = ncclfold.histogram(values, times, 1e3, 17)
    expected, expected_edges = np.histogram(every, bins=17)
    assert counts.tolist() == expected.tolist() and np.array_equal(edges, expected_edges)


def test_a_digest_of_coded_columns_is_that_of_the_text_columns():
    """nccl_operations hands op, origin and bucket also as codes into few values (Table.coded): the digest built
    from the codes is the one built from the text, whatever the values' order and repeats among them."""
    rng = np.random.default_rng(4)
    values = {"op": ["AllReduce", None, "AllGather", "AllReduce", "Send/Recv"], "origin": ["nccl-nvtx", "pytorch", "nccl-nvtx"],
              "bucket": ["<64KB", "64KB-1MB", "unknown", ">16MB", "<64KB"]}  # fmt: skip
    for _ in range(100):
        count = int(rng.integers(1, 300))
        codes = {
            name: rng.choice([i for i, v in enumerate(levels) if v is not None], count)
            for name, levels in values.items()
        }
        columns = {name: np.asarray(values[name], dtype=object)[code] for name, code in codes.items()}
        columns.update(start_ns=np.sort(rng.integers(0, 10_000, count)), duration_ns=rng.integers(1, 50, count),
                       size_bytes=rng.choice([np.nan, 10.0, 1e6], count))  # fmt: skip
        coded = Table(columns, coded={name: (values[name], code) for name, code in codes.items()})
        steps = Table({"start_ns": np.asarray([0, 5_000]), "duration_ns": np.asarray([2_000, 3_000])})
        for table in (coded, coded.take(np.arange(count)[::-1])):
            plain = Table(table.columns)
            for name in values:
                assert table.factorized(name)[0] == plain.factorized(name)[0]
                assert table.factorized(name)[1].tolist() == plain.factorized(name)[1].tolist()
            mine, theirs = nccldigest.digest(table, steps), nccldigest.digest(plain, steps)
            assert repr(mine.groups.columns) == repr(theirs.groups.columns)
            assert mine.durations.tolist() == theirs.durations.tolist() and mine.sums == theirs.sums


def test_durations_sorted_within_groups_as_a_lexsort_sorts_them():
    """The packed sort and the lexsort it falls back to (negative or huge durations) give a lexsort's order: by
    group, then kind, then duration (each group and kind one sorted run: what the fold takes as it is)."""
    rng = np.random.default_rng(5)
    for low, high in [(0, 1 << 20), (-1000, 1000), (0, 1 << 62), (1 << 40, (1 << 40) + 9)]:
        for _ in range(50):
            group = rng.integers(0, 20, rng.integers(1, 200)).astype(np.uint16)
            durations = rng.integers(low, high, len(group))
            expected = durations[np.lexsort((durations, group))]
            kind = rng.integers(0, 300, len(group))
            assert nccldigest._sorted_in_groups(group, durations)[0].tolist() == expected.tolist()
            order = np.lexsort((durations, kind, group))  # each kind travels with its duration
            got_durations, got_kinds = nccldigest._sorted_in_groups(group, durations, kind)
            assert got_durations.tolist() == durations[order].tolist() and got_kinds.tolist() == kind[order].tolist()
