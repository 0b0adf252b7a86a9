"""Each fact real exports show (../shared/real-data/README.md), reproduced by a fixture the test makes."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from nsys_fixtures import Export, Kernel, Launch, Memop, Range, gpid, gtid, write_export

from nsyskit.analysis import run_analysis
from nsyskit.analysis.compute.nccl import collective
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.analysis.trace import analyze_run
from nsyskit.errors import NsyskitError

PROTOBUF = b"\x08\x96\x01\x12\x07A100-80\xff\xfe\x80\x81 binary GPU description"


def test_binary_env_blob_is_read(tmp_path):
    # nsys <= 2022.4 store a protobuf blob (not UTF-8) in TARGET_INFO_SYSTEM_ENV.value for GPU runs.
    path = write_export(
        tmp_path / "r.sqlite", Export(kernels=[Kernel(0, 10, "k")], env_blob=PROTOBUF, hostname="dgx02")
    )
    assert sqlite3.connect(path).execute(
        "SELECT typeof(value) FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'GpuInfo'"
    ).fetchone() == ("text",)
    reader = ExportReader(path)
    assert reader.system_env["Hostname"] == "dgx02" and "\ufffd" in reader.system_env["GpuInfo"]
    analysis = analyze_run([path])
    assert analysis.ranks["host"].tolist() == ["dgx02"] and analysis.top_kernels["total_ns"].tolist() == [10]


def test_pruned_string_ids_and_missing_gpu_table(tmp_path):
    # A derived file dropped TARGET_INFO_GPU and pruned StringIds: names it cannot resolve get placeholders.
    kernels = [Kernel(0, 10, "gemm"), Kernel(20, 50, "pruned_kernel")]
    ranges = [Range(0, 100, "forward", registered=True), Range(0, 200, "gone", registered=True)]
    path = write_export(
        tmp_path / "r.sqlite", Export(kernels=kernels, ranges=ranges, gpu_table=None, pruned=["pruned_kernel", "gone"])
    )
    reader = ExportReader(path)
    assert reader.gpus() == {}
    analysis = analyze_run([path])
    names = dict(zip(analysis.top_kernels["name"], analysis.top_kernels["total_ns"], strict=True))
    assert names["gemm"] == 10 and [v for k, v in names.items() if "not in StringIds" in k] == [30]
    assert "forward" in set(analysis.nvtx["name"]) and any(n.startswith("<string ") for n in analysis.nvtx["name"])


def test_null_payloads_are_unknown_sizes(tmp_path):
    ranges = [
        Range(0, 10, "ncclAllReduce", payload=None, domain="NCCL"),
        Range(20, 30, "ncclAllReduce", payload=1 << 20, domain="NCCL"),
    ]
    analysis = analyze_run([write_export(tmp_path / "r.sqlite", Export(ranges=ranges, cpu_only=True))])
    rows = {(r["op"], r["bucket"]): r["count"] for r in analysis.nccl_sizes.rows()}
    assert rows == {("AllReduce", "unknown"): 1, ("AllReduce", "1MB-16MB"): 1}


def two_rank_export(path):
    """Two processes (torchrun ranks) in one file, each on its own GPU with its own NVTX thread and launches."""
    kernels, launches, ranges = [], [], []
    for rank, (pid, slow) in enumerate(((4000, 1), (4001, 2))):
        tid = gtid(pid, pid)
        for step in range(3):
            base = step * 30_000
            ranges.append(Range(base, base + 9_000 * slow, f"step {step}", thread=tid))
            for k in range(4):
                correlation = 100 + step * 10 + k  # the same correlationIds in both processes: ids are per process
                launches.append(Launch(base + 100 * k, base + 100 * k + 50, correlation, thread=tid))
                name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL" if k == 3 else "gemm"
                kernels.append(
                    Kernel(
                        base + 1000 * k,
                        base + 1000 * k + 500 * slow,
                        name,
                        device=rank,
                        correlation=correlation,
                        pid=gpid(pid),
                    )
                )
    memops = [Memop(0, 100, 4096, 1, device=0, pid=gpid(4000)), Memop(0, 300, 4096, 1, device=1, pid=gpid(4001))]
    return write_export(path, Export(kernels=kernels, memops=memops, ranges=ranges, launches=launches))


def test_two_processes_in_one_file_are_two_ranks(tmp_path):
    analysis = analyze_run([two_rank_export(tmp_path / "both.sqlite")], straggler_pct=20)
    assert sorted(analysis.sources) == [0, 1]
    by_rank = {r["rank"]: r for r in analysis.breakdown.rows()}
    assert (by_rank[0]["device"], by_rank[1]["device"]) == (0, 1)
    assert by_rank[0]["compute_ns"] == 3 * 3 * 500 and by_rank[1]["compute_ns"] == 3 * 3 * 1000
    assert by_rank[0]["memory_ns"] == 100 and by_rank[1]["memory_ns"] == 300
    assert analysis.kernel_summaries[0]["instances"].sum() == 12 == analysis.kernel_summaries[1]["instances"].sum()
    assert analysis.ranks["steps"].tolist() == [3, 3]
    steps = analysis.steps
    assert steps["duration_ns"][steps["rank"] == 1].tolist() == [18_000] * 3
    gpu = {(r["rank"], r["name"]): r for r in analysis.nvtx_gpu.rows()}
    # each step launched 4 kernels; rank 1's correlationIds are the same numbers but its own kernels
    assert gpu[(0, "step")]["kernels"] == 12 and gpu[(1, "step")]["kernel_sum_ns"] == 3 * 4 * 1000


def test_nvtx_gpu_projection_equals_a_per_range_sql_join(tmp_path):
    # Runtime rows: every kernel has its launch (same correlationId) on the thread of the ranges around it.
    rng = np.random.default_rng(7)
    kernels, launches, ranges = [], [], []
    for i in range(2000):
        call = int(i * 1000 + rng.integers(0, 300))
        start = call + int(rng.integers(2000, 9000))
        kernels.append(
            Kernel(start, start + int(rng.integers(50, 3000)), f"k{i % 7}", correlation=i + 1, stream=7 + i % 3)
        )
        launches.append(Launch(call, call + 200, i + 1))
    for j in range(300):
        start = int(rng.integers(0, 2_000_000))
        ranges.append(Range(start, start + int(rng.integers(0, 40_000)), f"op{j % 5}, op_id = {j}"))
    path = write_export(tmp_path / "r.sqlite", Export(kernels=kernels, launches=launches, ranges=ranges))
    analysis = analyze_run([path])
    con = sqlite3.connect(path)
    expected: dict[str, list[int]] = {}
    for start, end, text in con.execute("SELECT start, end, text FROM NVTX_EVENTS WHERE eventType = 59"):
        spans = con.execute(
            "SELECT min(k.start), max(k.end), count(*), total(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId WHERE r.start BETWEEN ? AND ?",
            (start, end),
        ).fetchone()
        entry = expected.setdefault(text.split(",")[0], [0, 0, 0])
        if spans[2]:
            entry[0] += spans[1] - spans[0]
            entry[1] += spans[2]
            entry[2] += int(spans[3])
    got = {r["name"]: [r["gpu_proj_total_ns"], r["kernels"], r["kernel_sum_ns"]] for r in analysis.nvtx_gpu.rows()}
    assert got == expected and sum(v[1] for v in got.values()) > 100


def test_op_id_ranges_group_into_one_row_per_collective(tmp_path):
    # PyTorch names each collective's range uniquely: 'nccl:all_reduce, op_id = 17'.
    ops = [
        "nccl:all_reduce",
        "nccl:_allgather_base",
        "nccl:reduce_scatter_tensor",
        "nccl:all_to_all",
        "nccl:send",
        "nccl:recv",
    ]
    ranges = [Range(i * 100, i * 100 + 50, f"{ops[i % len(ops)]}, op_id = {1000 + i}") for i in range(3000)]
    ranges += [Range(0, 5, "ncclGroupStart"), Range(6, 9, "ncclCommInitRank")]
    analysis = analyze_run([write_export(tmp_path / "r.sqlite", Export(ranges=ranges, cpu_only=True))])
    rows = {r["op"]: r["count"] for r in analysis.nccl_sizes.rows()}
    assert rows == {"AllReduce": 500, "AllGather": 500, "ReduceScatter": 500, "AllToAll": 500, "Send/Recv": 1000}
    assert len(analysis.nvtx) == len(ops) + 2  # grouped by name without op_id
    data = analysis.to_json()
    assert len(data["nvtx"]) <= 100 and len(data["nccl_sizes"]) == 5


def test_collective_names_normalize():
    cases = {
        "ncclAllReduce": "AllReduce", "nccl:all_reduce, op_id = 17": "AllReduce", "nccl:_allgather_base": "AllGather",
        "nccl:all_gather_into_tensor_coalesced": "AllGather", "ncclReduceScatter": "ReduceScatter",
        "nccl:all_to_all": "AllToAll", "ncclSend": "Send/Recv", "nccl:recv 1<-0": "Send/Recv", "ncclBroadcast": "Broadcast",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "AllGather",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *)": "AllReduce", "ncclDevKernel_SendRecv(x)": "Send/Recv",
        "ncclGroupStart": None, "ncclCommInitRank": None, "ncclCommCount": None,
    }  # fmt: skip
    assert {name: collective(name) for name in cases} == cases


def test_steps_cover_the_profile_window_only(tmp_path):
    # CPU-only runs: the example opens a profile_window range after warm-up; earlier steps are not profiled steps.
    ranges = [Range(i * 100, i * 100 + 90, f"step {i}") for i in range(10)] + [Range(300, 800, "profile_window")]
    analysis, _ = run_analysis([write_export(tmp_path / "r.sqlite", Export(ranges=ranges, cpu_only=True))], write=False)
    assert analysis.steps["step"].tolist() == [3, 4, 5, 6, 7] and analysis.ranks["steps"].tolist() == [5]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_file_among_ranks_is_left_out_and_named_unless_strict(tmp_path, workers):
    # At 1,024 ranks one report cut short (a rank killed while writing) is likely: the others are analyzed.
    write_export(tmp_path / "a_rank_0.sqlite", Export(kernels=[Kernel(0, 10, "k")]))
    good = write_export(tmp_path / "b_rank_1.sqlite", Export(kernels=[Kernel(0, 10, "k")]))
    (tmp_path / "c_rank_2.sqlite").write_bytes(good.read_bytes()[:3000])
    analysis = analyze_run([tmp_path], workers=workers)
    assert sorted(analysis.sources) == [0, 1]
    assert len(analysis.incomplete) == 2  # the one line naming every report left out, then each one's reason
    assert analysis.incomplete[0] == "1 of 3 reports left out: ranks 2 (1 that could not be analyzed); this analysis covers the others"
    assert analysis.incomplete[1].startswith(f"rank 2 left out: {tmp_path / 'c_rank_2.sqlite'}: truncated")
    with pytest.raises(NsyskitError) as caught:
        analyze_run([tmp_path], workers=workers, strict=True)
    assert caught.value.one_line().startswith(f"{tmp_path / 'c_rank_2.sqlite'}: truncated")
    with pytest.raises(NsyskitError, match="truncated"):  # nothing readable: the first error, as before
        analyze_run([tmp_path / "c_rank_2.sqlite"], workers=workers)


@pytest.mark.parametrize("case_threads", [32, 0, None])
def test_launches_on_many_threads_project_alike(tmp_path, monkeypatch, case_threads):
    # Ranges and launches on 40 threads: read from the file's pages (None), or through SQLite, which sends thread
    # indices (CASE) or raw globalTids beyond a cap.
    if case_threads is not None:
        monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "0")
        monkeypatch.setattr("nsyskit.analysis.read.launchread.MAX_CASE_THREADS", case_threads)
    kernels, launches, ranges = [], [], []
    for t in range(40):
        tid = gtid(7, 100 + t)
        ranges.append(Range(t * 1000, t * 1000 + 900, f"work{t % 3}", thread=tid))
        launches.append(Launch(t * 1000 + 10, t * 1000 + 20, t + 1, thread=tid))
        launches.append(Launch(t * 1000 + 950, t * 1000 + 960, 100 + t, thread=tid))  # after its range: not in it
        kernels.append(Kernel(t * 1000 + 50, t * 1000 + 150 + t, "k", correlation=t + 1))
        kernels.append(Kernel(t * 1000 + 970, t * 1000 + 980, "late", correlation=100 + t))
    analysis = analyze_run(
        [write_export(tmp_path / "r.sqlite", Export(kernels=kernels, launches=launches, ranges=ranges))]
    )
    got = {r["name"]: (r["kernels"], r["kernel_sum_ns"]) for r in analysis.nvtx_gpu.rows()}
    want = {f"work{w}": (len(ts), sum(100 + t for t in ts)) for w in range(3) for ts in [range(w, 40, 3)]}
    assert got == want


def test_kernel_names_with_brackets_are_printed_whole(tmp_path):
    # PyTorch's kernels carry lambdas in brackets (seen in the H100 export of tests/data/real): the terminal prints
    # them as they are (whole with --full-names), never as rich markup (which swallowed "[lambda() (instance 3)]").
    from rich.console import Console

    from nsyskit.analysis.present.terminal import rich_table

    name = "void at::native::copy<[lambda() (instance 3)]::operator ()() const::[/bold]>(int)"
    path = write_export(tmp_path / "r.sqlite", Export(kernels=[Kernel(0, 10, name)]))
    console = Console(record=True, width=400)
    console.print(rich_table("Top kernels", analyze_run([path]).top_kernels, ["name", "total_ns"], full_names=True))
    assert name in console.export_text()
