"""Analyzers on a hand-built export: every expected number below is computed by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from native_built import require_built
from nsys_fixtures import Export, Kernel, Launch, Memop, Range, write_export

from nsyskit.analysis.compute import analyzers, intervals, nvtxnames
from nsyskit.analysis.read import records
from nsyskit.analysis.trace import RankTrace, analyze_run, open_export

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)"

# Device 0: gemm on stream 7 [0,100) [150,250); relu on stream 9 [50,120) (overlaps gemm on another stream);
#           NCCL on stream 20 [80,200); memset [190,210); memcpy HtoD [300,340) 4000 B.
# Device 1: gemm [0,50); NCCL [40,60); memcpy PtoP [100,110) 1000 B.
TWO_DEVICES = Export(
    kernels=[
        Kernel(0, 100, "gemm"), Kernel(150, 250, "gemm"), Kernel(50, 120, "relu", stream=9), Kernel(80, 200, NCCL, stream=20, correlation=77),
        Kernel(0, 50, "gemm", device=1), Kernel(40, 60, NCCL, device=1, stream=20),
    ],
    memops=[Memop(300, 340, 4000, 1), Memop(190, 210, 100, None), Memop(100, 110, 1000, 10, device=1)],
    ranges=[
        Range(0, 300, "step 0"), Range(300, 400, "step 1", registered=True),
        Range(70, 90, "ncclAllReduce", payload=1 << 20, domain="NCCL"),
        Range(95, 96, "ncclAllGather", json='{"Message size [bytes]": 1024}'),
    ],
    launches=[Launch(75, 78, 77)],
)  # fmt: skip


@pytest.fixture
def two_devices(tmp_path):
    return analyze_run([write_export(tmp_path / "job_rank_0.sqlite", TWO_DEVICES)])


def test_kernel_summary_hand_computed(two_devices):
    rows = {row["name"]: row for row in two_devices.kernel_summaries[0].rows()}
    # gemm: 100, 100, 50 -> total 250, mean 83.33, median 100, sample stddev sqrt(((50/3)^2*2 + (100/3)^2)/2) = 28.87
    assert rows["gemm"] == pytest.approx(
        {
            "name": "gemm",
            "short_name": "gemm",
            "time_pct": 250 / 460 * 100,
            "total_ns": 250,
            "instances": 3,
            "avg_ns": 250 / 3,
            "median_ns": 100.0,
            "min_ns": 50,
            "max_ns": 100,
            "stddev_ns": math.sqrt(2500 / 3),
        }
    )
    # NCCL: 120, 20 -> median of an even count is the mean of the middle two: 70; stddev sqrt(2*50^2/1) = 70.71
    assert rows[NCCL]["median_ns"] == 70.0 and rows[NCCL]["stddev_ns"] == pytest.approx(math.sqrt(5000))
    # one instance: stddev 0 (as nsys stats prints)
    assert rows["relu"]["stddev_ns"] == 0.0 and rows["relu"]["time_pct"] == pytest.approx(70 / 460 * 100)
    assert list(two_devices.kernel_summaries[0]["name"]) == ["gemm", NCCL, "relu"]  # by total time, descending


def test_breakdown_two_streams_two_devices(two_devices):
    rows = {row["device"]: row for row in two_devices.breakdown.rows()}
    # window: the rank's GPU span [0, 340)
    # dev0: compute [0,120)+[150,250)=220; comm [80,200)=120; memory [190,210)+[300,340)=60; busy [0,250)+[300,340)=290
    #       compute∩comm [80,120)+[150,200)=90; compute∩mem [190,210)=20; comm∩mem [190,200)=10; exposed comm [120,150)=30
    assert {k: rows[0][k] for k in rows[0] if k.endswith("_ns")} == {
        "window_ns": 340, "busy_ns": 290, "compute_ns": 220, "comm_ns": 120, "memory_ns": 60, "idle_ns": 50,
        "compute_comm_overlap_ns": 90, "compute_memory_overlap_ns": 20, "comm_memory_overlap_ns": 10, "exposed_comm_ns": 30,
    }  # fmt: skip
    # dev1: compute [0,50)=50; comm [40,60)=20; memory [100,110)=10; busy 70; compute∩comm [40,50)=10; exposed [50,60)=10
    assert {k: rows[1][k] for k in ("busy_ns", "compute_ns", "comm_ns", "memory_ns", "idle_ns", "compute_comm_overlap_ns", "compute_memory_overlap_ns", "exposed_comm_ns")} == {
        "busy_ns": 70, "compute_ns": 50, "comm_ns": 20, "memory_ns": 10, "idle_ns": 270, "compute_comm_overlap_ns": 10, "compute_memory_overlap_ns": 0, "exposed_comm_ns": 10,
    }  # fmt: skip
    assert rows[0]["compute_pct"] == pytest.approx(220 / 340 * 100)


def test_memcpy_by_kind(two_devices):
    rows = {row["kind"]: row for row in two_devices.memcpy.rows()}
    assert rows["HtoD"] == {
        "rank": 0,
        "kind": "HtoD",
        "count": 1,
        "bytes": 4000,
        "total_ns": 40,
        "avg_bytes": 4000.0,
        "bandwidth_gbps": 100.0,
        "pageable_count": 0,  # the fixture's copies name no memory kinds
        "pageable_bytes": 0,
        "pageable_ns": 0,
    }
    assert rows["PtoP"]["bytes"] == 1000 and set(rows) == {"HtoD", "PtoP"}


def test_steps_nvtx_and_nccl_sizes(two_devices, tmp_path):
    assert list(two_devices.steps["step"]) == [0, 1] and list(two_devices.steps["duration_ns"]) == [300, 100]
    names = set(two_devices.nvtx["name"])
    assert {"step N", "ncclAllReduce@NCCL", "ncclAllGather"} <= names  # 'step 0' and 'step 1': one row
    step_row = next(row for row in two_devices.nvtx.rows() if row["name"] == "step N")
    assert step_row["instances"] == 2  # 'step 1' was a registered string (textId): read as well as the inline one
    reader = open_export(tmp_path / "job_rank_0.sqlite")  # the rank's operations, before its digest adds them up
    ops = {row["op"]: row for row in RankTrace(0, reader.path, reader).nccl_operations().rows()}
    reader.close()
    sizes = {(row["op"], row["bucket"]): row for row in two_devices.nccl_sizes.rows()}
    assert sizes["AllReduce", "1MB-16MB"]["count"] == 1 and sizes["AllReduce", "1MB-16MB"]["median_ns"] == 120
    # the AllReduce range launched the NCCL kernel [80,200) (correlation 77): its GPU time replaces the CPU time
    assert (
        ops["AllReduce"]["duration_ns"] == 120
        and ops["AllReduce"]["source"] == "gpu"
        and ops["AllReduce"]["bucket"] == "1MB-16MB"
    )
    assert ops["AllGather"]["size_bytes"] == 1024 and ops["AllGather"]["bucket"] == "<64KB"


@pytest.mark.parametrize(
    ("size", "bucket"),
    [
        (0, "<64KB"),
        (65535, "<64KB"),
        (65536, "64KB-1MB"),
        ((1 << 20) - 1, "64KB-1MB"),
        (1 << 20, "1MB-16MB"),
        (16 << 20, ">16MB"),
        (float("nan"), "unknown"),
    ],
)
def test_size_buckets(size, bucket):
    assert analyzers.size_bucket(size) == bucket


def test_nccl_ops_from_kernels_without_nvtx():
    kernels = analyzers.Intervals(np.array([0, 10]), np.array([5, 30]), np.array([0, 0]), {"name": np.array([1, 2])})
    ops = analyzers.nccl_operations(analyzers.NvtxRanges(*(np.empty(0),) * 7), kernels, {1: NCCL, 2: "gemm"})
    assert list(ops["op"]) == ["AllReduce"] and list(ops["bucket"]) == ["unknown"]


def test_stragglers_are_ranks_slower_than_the_others():
    per_rank = [{"rank": r, "step_mean_ns": 100.0 + r, "gpu_busy_pct": 50.0} for r in range(7)] + [
        {"rank": 7, "step_mean_ns": 140.0}
    ]
    table = analyzers.cross_rank(per_rank, straggler_pct=5.0)
    assert list(table["rank"][table["straggler"]]) == [7]
    assert table["deviation_pct"][7] == pytest.approx((140 - 103) / 103 * 100)  # over the median of the 7 others


def steps(*means: float) -> list[dict]:
    return [{"rank": r, "step_mean_ns": m} for r, m in enumerate(means)]


def test_of_two_ranks_12_percent_apart_only_the_slow_one_is_a_straggler():
    table = analyzers.cross_rank(steps(100.0, 112.0), straggler_pct=5.0)
    assert table["straggler"].tolist() == [False, True]
    assert table["deviation_pct"].tolist() == pytest.approx([-100 * 12 / 112, 12.0])


def test_of_three_ranks_the_fast_one_is_never_a_straggler():
    assert analyzers.cross_rank(steps(100.0, 100.0, 112.0))["straggler"].tolist() == [False, False, True]
    assert analyzers.cross_rank(steps(88.0, 100.0, 100.0))["straggler"].tolist() == [False, False, False]
    assert analyzers.cross_rank(steps(100.0))["straggler"].tolist() == [False]  # one rank: no others


def test_at_1024_ranks_the_slow_ones_are_flagged_and_no_fast_one():
    rng = np.random.default_rng(7)
    means = 100.0 + rng.normal(0, 1.0, 1024)
    means[[3, 500, 1000]] = [108.0, 111.0, 120.0]  # slow
    means[[10, 700]] = [80.0, 85.0]  # fast
    table = analyzers.cross_rank(steps(*means), straggler_pct=5.0)
    assert sorted(table["rank"][table["straggler"]].tolist()) == [3, 500, 1000]
    others = np.delete(means, 1000)
    assert table["deviation_pct"][1000] == pytest.approx((120.0 - np.median(others)) / np.median(others) * 100)


def test_interval_union_is_exact():
    start, end = intervals.union(np.array([5, 0, 20, 10, 30]), np.array([12, 4, 25, 11, 30]))
    assert list(start) == [0, 5, 20] and list(end) == [4, 12, 25]  # [10,11) inside [5,12); empty [30,30) dropped
    rng = np.random.default_rng(1)
    s = rng.integers(0, 10_000, 2000)
    e = s + rng.integers(0, 50, 2000)
    covered = np.zeros(10_100, dtype=bool)
    for a, b in zip(s, e, strict=True):
        covered[a:b] = True
    assert intervals.length(*intervals.union(s, e)) == covered.sum()


def test_counting_and_sorting_paths_of_duration_stats_agree():
    # Few names in a small id range: counting sort + selection; many or wide-spread ids: one sort.
    rng = np.random.default_rng(3)
    keys, durations = rng.integers(0, 1 << 40, 5000), rng.integers(-10, 10**6, 5000)
    keys[::2] = keys[1::2]  # groups of two
    for sparse_keys in (keys, keys % 70000):  # wide id range: one sort; small: counting sort
        ids, stats = analyzers.duration_stats(sparse_keys, durations)
        want_ids, want = analyzers._sorted_stats(
            sparse_keys, durations, int(sparse_keys.min()), int(np.ptp(sparse_keys))
        )
        assert list(ids) == list(want_ids) and all(np.allclose(stats[c], want[c]) for c in stats)


@pytest.mark.parametrize("helper", ["texts.c", "regex"])
def test_per_call_suffixes_are_cut_as_a_search_per_text_cuts_them(helper, monkeypatch):
    """The one-pass grouping (texts.c, else the regexes over NUL-joined texts) equals PER_CALL_SUFFIX searched in each
    text then STEP_NUMBER's N, for odd texts too (several suffixes, ASCII and Unicode whitespace around them, non-ASCII
    digits and letters, NULs, step words inside other words and in any case)."""
    import random

    from nsyskit.native import texts as native_texts

    if helper == "regex":
        monkeypatch.setattr(native_texts, "_loaded", [None])
    else:
        require_built(native_texts, native_texts.function, "texts.c")
    pieces = ["nccl:all_reduce", ", seq = ", ", op_id = ", ",seq=", " ", "\n", "\t", "7", "12", "x", "=", ",",
              "op_id", "seq", "\u0663", "\u00a0", "\x00", "step 1", "", "\r\n", "\x1c", "\x1f", "\x0b", "\x7f",
              "op_", "_id", "q", "xseq", "\u2003", "step", "Batch", "ITER", "iteration", "micro", "batch", "epoch", "_",
              ":", "#", "-", "layer_", "\u017f", "\u00e9", "Z", "[", "`", "@"]  # fmt: skip
    rng = random.Random(5)
    for _ in range(8000):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(0, 6))]
        searched = [analyzers.STEP_NUMBER.sub(r"\1N", t[: m.start()] if (m := analyzers.PER_CALL_SUFFIX.search(t)) else t)
                    for t in texts]  # fmt: skip
        assert nvtxnames._without_per_call_suffix(texts) == searched, texts
    cut = nvtxnames._without_per_call_suffix(["nccl:all_reduce, op_id = 17", "fwd, seq = 3, op_id = 4 ", "a, b"])
    assert cut == ["nccl:all_reduce", "fwd", "a, b"]
    numbered = ["step 1", "step 20 ", "Batch 7", "train_step:3", "epoch_12", "microbatch-2", "iteration #5"]
    numbered.append("step 4, seq=9")  # the per-call part first, then the step number
    grouped = ["step N", "step N", "Batch N", "train_step:N", "epoch_N", "microbatch-N", "iteration #N", "step N"]
    kept = ["layer_3", "MPI Rank 3", "TBackward0", "ExecutorDispatch::run2", "substep 3", "stepper 3", "step"]
    assert nvtxnames._without_per_call_suffix(numbered + kept) == grouped + kept


def test_refactorize_equals_factorize_of_the_values_each_code_picks():
    """Codes over a few values (equal ones among them) give what factorizing every picked value gives: the same
    distinct values in first-seen order and the same codes."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        values = [str(v) for v in rng.integers(0, 6, rng.integers(1, 9))]  # repeats: equal values merge
        codes = rng.integers(0, len(values), rng.integers(0, 40))
        assert records.refactorize(values, codes)[0] == records.factorize([values[c] for c in codes])[0]
        assert records.refactorize(values, codes)[1].tolist() == records.factorize([values[c] for c in codes])[1].tolist()


def test_nvtx_labels_are_each_ranges_text_without_per_call_parts_and_with_its_domain():
    """Labels as defined per range (the text's group: per-call suffix cut, step number N; '@domain' outside the
    default domain), factorized;
    a text 'a@NCCL' in the default domain and 'a' in the NCCL domain are one label, as their strings are equal."""
    rng = np.random.default_rng(8)
    texts = ["aten::mm, seq = 1", "aten::mm, seq = 2, op_id = 9", "a@NCCL", "a", "step 3", "ncclAllReduce", "a, b",
             "step 4", "layer_3"]  # fmt: skip
    for domains in (["NCCL", "", "gloo"], [""], ["NCCL"]):
        for _ in range(200):
            count = int(rng.integers(0, 30))
            text = np.asarray([texts[i] for i in rng.integers(0, len(texts), count)], dtype=object)
            domain = np.asarray([domains[i] for i in rng.integers(0, len(domains), count)], dtype=object)
            nothing = np.zeros(count, dtype=np.int64)
            nvtx = records.NvtxRanges(nothing, nothing, text, domain, nothing, np.full(count, np.nan), text)
            cut = [analyzers.group_text(t) for t in text]
            expected = records.factorize([c + (f"@{d}" if d else "") for c, d in zip(cut, domain, strict=True)])
            labels, codes = analyzers.nvtx_labels(nvtx)
            assert (labels, codes.tolist()) == (expected[0], expected[1].tolist())


def test_nccl_operations_from_the_texts_groups_equal_those_from_every_text():
    """NCCL ranges found per group of texts (heads of the texts without per-call parts) are those found per text."""
    rng = np.random.default_rng(11)
    texts = ["nccl:all_reduce, op_id = 17", "nccl:all_reduce, seq = 2", "nccl:broadcast,x, seq=1", "ncclAllGather",
             "nccl:all_gather , op_id = 3", "aten::mm, seq = 4", "glooAllReduce", "nccl, seq = 1", ""]  # fmt: skip
    kernels = records.Intervals.empty("name")
    for _ in range(200):
        count = int(rng.integers(0, 25))
        text = np.asarray([texts[i] for i in rng.integers(0, len(texts), count)], dtype=object)
        start = np.sort(rng.integers(0, 1000, count))
        nvtx = records.NvtxRanges(start, start + 5, text, np.full(count, "", dtype=object), np.zeros(count, dtype=np.int64),
                                  rng.choice([np.nan, 1e3, 1e7], count), np.full(count, None, dtype=object))  # fmt: skip
        whole = analyzers.nccl_operations(nvtx, kernels, {})
        grouped = analyzers.nccl_operations(nvtx, kernels, {}, None, analyzers.group_texts(nvtx.texts[0]))
        assert repr(grouped.columns) == repr(whole.columns)  # repr: NaN sizes compare equal


def test_steps_found_through_the_texts_groups_are_those_found_in_every_text():
    """Only texts whose group (text without per-call parts) is a step name are tried: the same steps, and the same
    names beyond int64 skipped, as trying every text."""
    rng = np.random.default_rng(12)
    texts = ["step 3", "step 3, seq = 1", "Train_Step:7", " step 12 ", "step 99999999999999999999", "profile_window",
             "stepper 3", "aten::mm, op_id = 4", "step 5,seq=2"]  # fmt: skip
    for _ in range(300):
        count = int(rng.integers(0, 25))
        text = np.asarray([texts[i] for i in rng.integers(0, len(texts), count)], dtype=object)
        start = rng.integers(0, 1000, count)
        nvtx = records.NvtxRanges(start, start + rng.integers(1, 500, count), text, np.full(count, "", dtype=object),
                                  np.zeros(count, dtype=np.int64), np.full(count, np.nan), text)  # fmt: skip
        skipped_all, skipped_grouped = [], []
        every = analyzers.step_times(nvtx, skipped=skipped_all)
        grouped = analyzers.step_times(nvtx, skipped=skipped_grouped, grouped=analyzers.group_texts(nvtx.texts[0]))
        assert repr(grouped.columns) == repr(every.columns) and skipped_grouped == skipped_all
