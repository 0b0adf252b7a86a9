"""The bandwidth of every collective: algbw = nccl-tests' size / GPU kernel time, busbw = algbw x NCCL's factor for
the operation and communicator size n (nccl-tests' doc/PERFORMANCE.md); per (op, bucket, n) p10, median and p90,
exact through the merge of parts."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from nsys_fixtures import Export, Kernel, Launch, Range, write_export
from real_exports import decompress
from rich.console import Console

from nsyskit.analysis import compose, print_report, run_analysis, summarize
from nsyskit.analysis.compute import ncclcurve, nccldigest, ncclsizes
from nsyskit.analysis.compute.ncclbandwidth import WorldSize, bus_factor
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.partfile import read_part
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.trace import analyze_run, merge
from nsyskit.runrecord import RunRecord

KERNELS = {
    "AllReduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "AllGather": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ReduceScatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "Send/Recv": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
}
API = {"AllReduce": "ncclAllReduce", "AllGather": "ncclAllGather", "ReduceScatter": "ncclReduceScatter",
       "Send/Recv": "ncclSend"}  # fmt: skip
COMM, COMM_RANKS = 7, 4  # the communicator the AllGathers run on, as ncclCommInitRank's payload states it


def planted_rank(seed: int, count: int = 40) -> list[tuple[str, int, int]]:
    """(op, message bytes, kernel ns) of one rank's collectives: sizes in a few buckets, kernel times spread."""
    rng = np.random.default_rng(seed)
    ops = rng.choice(list(KERNELS), count)
    sizes = rng.choice([4096, 1 << 20, 3 << 20, 64 << 20], count)
    durations = rng.integers(5_000, 2_000_000, count)
    return [(str(o), int(s), int(d)) for o, s, d in zip(ops, sizes, durations, strict=True)]


def export_of(planted: list[tuple[str, int, int]]) -> Export:
    """A rank whose NCCL API ranges (NCCL domain) each launch one NCCL kernel of the planted duration. AllGather
    states its size and communicator in a JSON payload (as NCCL's schema names them), the rest a numeric payload;
    the communicator's size is on its ncclCommInitRank range only."""
    init = {"NCCL communicator ID": COMM, "No. of ranks": COMM_RANKS, "Rank": 0, "CUDA device": 0}
    ranges = [Range(10, 20, "ncclCommInitRank", json=json.dumps(init), domain="NCCL")]
    launches, kernels, at = [], [], 1_000
    for corr, (op, size, duration) in enumerate(planted, start=1):
        stated = {"NCCL communicator ID": COMM, "Message size [bytes]": size}
        as_json = op == "AllGather"
        ranges.append(Range(at, at + 500, API[op], payload=None if as_json else size,
                            json=json.dumps(stated) if as_json else None, domain="NCCL"))  # fmt: skip
        launches.append(Launch(at + 100, at + 200, corr))
        kernels.append(Kernel(at + 300, at + 300 + duration, KERNELS[op], correlation=corr))
        at += duration + 10_000
    return Export(kernels=kernels, ranges=ranges, launches=launches)


def expected_rows(per_rank: list[list[tuple[str, int, int]]], world: int) -> dict[tuple[str, str, int], dict]:
    """(op, bucket, n) -> the bandwidths of its operations, computed here from the planted sizes and times."""
    from nsyskit.analysis.compute.nccl import size_bucket

    found: dict[tuple[str, str, int], dict] = {}
    for planted in per_rank:
        for op, size, duration in planted:
            n = COMM_RANKS if op == "AllGather" else world
            nccl_tests_size = size * n if op in ("AllGather", "ReduceScatter") else size  # the whole output / input
            algbw = nccl_tests_size / duration  # bytes per ns = GB/s (10^9 bytes per second)
            factor = {"AllReduce": 2 * (n - 1) / n, "AllGather": (n - 1) / n, "ReduceScatter": (n - 1) / n}.get(op, 1.0)
            entry = found.setdefault((op, size_bucket(size), n), {"algbw": [], "busbw": []})
            entry["algbw"].append(algbw)
            entry["busbw"].append(algbw * factor)
    return found


def check_rows(table: Table, per_rank, world: int, world_source: str) -> None:
    expected = expected_rows(per_rank, world)
    rows = {(r["op"], r["bucket"], r["nranks"]): r for r in table.rows()}
    assert set(rows) == set(expected)
    for key, want in expected.items():
        row = rows[key]
        assert row["n_source"] == ("report" if key[0] == "AllGather" else world_source)
        assert row["count"] == row["bw_count"] == len(want["algbw"])
        for kind in ("algbw", "busbw"):
            got = [row[f"{kind}_{q}_gbps"] for q in ("p10", "median", "p90")]
            assert got == pytest.approx(np.quantile(want[kind], [0.1, 0.5, 0.9]), rel=1e-12)


def test_planted_kernel_times_give_size_over_time_times_nccls_factor(tmp_path):
    """Two ranks, no run.json: n is the report's for the AllGathers (their communicator's init range), else the
    number of rank reports; AllGather and ReduceScatter sizes are n times the per-rank size NCCL states."""
    per_rank = [planted_rank(seed) for seed in (1, 2)]
    for rank, planted in enumerate(per_rank):
        write_export(tmp_path / f"run_rank_{rank}.sqlite", export_of(planted))
    analysis = analyze_run([tmp_path], workers=1)
    check_rows(analysis.nccl_sizes, per_rank, world=2, world_source="rank reports")


def test_the_world_size_comes_from_run_json_where_the_run_recorded_one(tmp_path):
    per_rank = [planted_rank(3)]
    write_export(tmp_path / "run_rank_0.sqlite", export_of(per_rank[0]))
    RunRecord(run_id="r", target="slurm", world_size=16).write(str(tmp_path))
    analysis = analyze_run([tmp_path], workers=1)
    check_rows(analysis.nccl_sizes, per_rank, world=16, world_source="run.json")


def test_cpu_timed_ranges_have_no_bandwidth(tmp_path):
    """A range that launched no NCCL kernel is timed by the CPU: counted, never given a bandwidth."""
    export = export_of([("AllReduce", 1 << 20, 40_000)])
    export.ranges = [*export.ranges, Range(900_000, 950_000, "ncclAllReduce", payload=1 << 20, domain="NCCL")]
    [row] = list(analyze_run([write_export(tmp_path / "r.sqlite", export)], workers=1).nccl_sizes.rows())
    assert (row["count"], row["bw_count"]) == (2, 1)
    assert row["algbw_median_gbps"] == (1 << 20) / 40_000


def test_bandwidths_stay_exact_through_a_merge_of_1024_parts(tmp_path):
    """1,024 parts, each its own rank with its planted times, merge to the bandwidths of every operation: eight
    distinct ranks are mapped and merged as files; their parts, read back, stand for 1,024 ranks in the same reduce
    (trace.merge, which merge_parts calls), each renumbered as a copy mapped under another rank's name is."""
    distinct, ranks = 8, 1024
    planted = [planted_rank(seed, count=6) for seed in range(distinct)]
    run = tmp_path / "run"
    run.mkdir()
    for seed in range(distinct):
        write_export(run / f"run_rank_{seed}.sqlite", export_of(planted[seed]))
    parts = tmp_path / "parts"
    map_reports([run], parts)
    merged, _facts = merge_parts(parts)
    check_rows(merged.nccl_sizes, planted, world=distinct, world_source="rank reports")
    held = [read_part(parts / f"run_rank_{seed}.sqlite.part.npz")[1] for seed in range(distinct)]
    per_file = [[{**held[rank % distinct][0], "rank": rank, "summary": {**held[rank % distinct][0]["summary"], "rank": rank}}]
                for rank in range(ranks)]  # fmt: skip
    big = merge(per_file)
    assert len(big.ranks) == ranks
    check_rows(
        big.nccl_sizes, [planted[rank % distinct] for rank in range(ranks)], world=ranks, world_source="rank reports"
    )


def test_the_digest_split_anyhow_gives_the_bandwidths_of_all_operations_at_once():
    """The roll-up of any split of operations over ranks gives the same quantiles, bit for bit, as one rank holding
    them all (the merge's exactness, without files); several communicator sizes in one group split its row."""
    rng = np.random.default_rng(11)
    count = 5_000
    sizes = rng.choice([1024.0, 2048.0, 1 << 20, np.nan], count)
    table = Table({
        "op": np.full(count, "AllReduce", dtype=object), "origin": np.full(count, "nccl-nvtx", dtype=object),
        "start_ns": np.arange(count) * 10, "duration_ns": rng.integers(1, 10**7, count),
        "size_bytes": sizes, "bucket": nccldigest_buckets(sizes), "source": rng.choice(np.asarray(["gpu", "nvtx"], dtype=object), count),
        "nranks": rng.choice([0, 8], count),
    })  # fmt: skip
    steps = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})
    world = WorldSize(64, "run.json")
    whole = ncclsizes.size_summary(nccldigest.rollup({0: nccldigest.digest(table, steps)}), world)
    cuts = np.sort(rng.choice(np.arange(1, count), 40, replace=False))
    pieces = np.split(np.arange(count), cuts)
    split = nccldigest.rollup({r: nccldigest.digest(table.take(rows), steps) for r, rows in enumerate(pieces)})
    assert repr(ncclsizes.size_summary(split, world).columns) == repr(whole.columns)
    rows = {(r["bucket"], r["nranks"]): r for r in whole.rows()}
    assert {n for _b, n in rows} == {8, 64} and rows["1MB-16MB", 8]["n_source"] == "report"
    gpu = (table["source"] == "gpu") & (table["nranks"] == 8) & (sizes == 1 << 20)
    busbw = sizes[gpu] / table["duration_ns"][gpu] * bus_factor("AllReduce", 8)
    assert rows["1MB-16MB", 8]["busbw_median_gbps"] == pytest.approx(float(np.median(busbw)), rel=1e-12)
    assert rows["1MB-16MB", 8]["count"] == int(((table["nranks"] == 8) & (sizes == 1 << 20)).sum())


def nccldigest_buckets(sizes: np.ndarray) -> np.ndarray:
    from nsyskit.analysis.compute.nccl import size_buckets

    return size_buckets(sizes)


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [("AllReduce", 8, 14 / 8), ("AllReduce", 1, 0.0), ("AllGather", 4, 0.75), ("ReduceScatter", 2, 0.5),
     ("AllToAll", 16, 15 / 16), ("Broadcast", 8, 1.0), ("Reduce", 8, 1.0), ("Send/Recv", 2, 1.0)],
)  # fmt: skip
def test_bus_factors_are_nccl_tests(op, n, factor):
    assert bus_factor(op, n) == factor


def test_the_terminal_json_and_report_show_the_bandwidths(tmp_path):
    """The sizes table shows busbw and algbw and says where n comes from; analysis.json keeps them unrounded;
    report.html plots busbw against message size, whose medians are those of each size's operations."""
    per_rank = [planted_rank(seed) for seed in (4, 5)]
    run = tmp_path / "run"
    run.mkdir()
    for rank, planted in enumerate(per_rank):
        write_export(run / f"run_rank_{rank}.sqlite", export_of(planted))
    analysis, html = run_analysis([run])
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_report(compose(analysis, summarize(analysis, run), run), console, top=15)
    text = " ".join(console.file.getvalue().split("Collective operations by message size")[1].split())  # unwrapped
    assert "busbw median GB/s" in text and "algbw median" in text
    assert "nranks from the number of ranks analyzed (no run.json states the world size) and the report's NCCL" in text
    data = json.loads((run / "analysis.json").read_text())
    assert [row["busbw_median_gbps"] for row in data["nccl_sizes"]] == analysis.nccl_sizes["busbw_median_gbps"].tolist()
    page = html.read_text()
    assert "NCCL bus bandwidth against message size" in page and (run / "nccl_busbw.png").stat().st_size > 1000
    by_size = {(r["op"], r["size_bytes"]): r for r in ncclcurve.busbw_by_size(analysis.nccl).rows()}
    for (op, size), row in by_size.items():
        n = row["nranks"]
        times = [
            d
            for planted in per_rank
            for o, s, d in planted
            if o == op and s * (n if op in ("AllGather", "ReduceScatter") else 1) == size
        ]
        assert row["count"] == len(times)
        assert row["busbw_median_gbps"] == pytest.approx(
            float(np.median([size / t * bus_factor(op, n) for t in times])), rel=1e-12
        )


def test_the_nccl_log_states_n_where_the_report_does_not(tmp_path):
    """A run folder whose NCCL_DEBUG=INFO log lists the AllReduce calls of 1 MB with [nranks=8]: those get n = 8
    from the log (the log's count is in elements: 262,144 float32); sizes the log does not list keep the world's."""
    planted = [("AllReduce", 1 << 20, 40_000), ("AllReduce", 1 << 20, 60_000), ("AllReduce", 64 << 20, 900_000)]
    run = tmp_path / "run"
    run.mkdir()
    write_export(run / "run_rank_0.sqlite", export_of(planted))
    (run / "rank0.log").write_text("".join(
        f"node-a:11:11 [0] NCCL INFO AllReduce: opCount {i} sendbuff 0x7f01 recvbuff 0x7f02 count 262144 datatype 7 "
        f"op 0 root 0 comm 0x55d1 [nranks=8] stream 0x55d2\n" for i in range(2)))  # fmt: skip
    analysis, _html = run_analysis([run])
    rows = {r["bucket"]: r for r in analysis.nccl_sizes.rows()}
    assert (rows["1MB-16MB"]["nranks"], rows["1MB-16MB"]["n_source"]) == (8, "nccl log")
    assert (rows[">16MB"]["nranks"], rows[">16MB"]["n_source"]) == (1, "rank reports")
    busbw = sorted((1 << 20) / d * bus_factor("AllReduce", 8) for d in (40_000, 60_000))
    assert rows["1MB-16MB"]["busbw_median_gbps"] == pytest.approx(float(np.median(busbw)), rel=1e-12)


@pytest.mark.parametrize("name", ["nsysai_mfu_2gpu_after.sqlite", "h100_gpt2_ddp_nsys2025.3.1.sqlite"])
def test_real_collectives_without_a_stated_size_get_no_bandwidth(name, real_exports_dir):
    """Real exports: the 2-rank torchrun capture's ncclSend/ncclRecv and nccl:all_to_all ranges, and the kit's own H100
    capture's ncclAllReduce ranges, carry no payload: their rows are counted and timed, with no bandwidth made up."""
    analysis = analyze_run([decompress(name, real_exports_dir)], workers=1)
    rows = list(analysis.nccl_sizes.rows())
    assert rows and all(
        r["bucket"] == "unknown" and r["bw_count"] == 0 and r["busbw_median_gbps"] is None for r in rows
    )
    assert {r["n_source"] for r in rows} == {"rank reports"} and {r["nranks"] for r in rows} == {len(analysis.sources)}
