"""Torch profiler analysis with Holistic Trace Analysis: on a real H100 trace (checked against a count straight from
its JSON) and on Kineto traces the tests write (GPU and CPU shapes, and each fact the real trace showed)."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest
import torch_fixtures as fixtures
from torch_fixtures import ALLREDUCE, ELEMENTWISE, GEMM, LAUNCHES, MEMCPY, MEMSET, kineto_trace, write_run

from nsyskit.analysis.profilers import torchprof
from nsyskit.errors import AnalysisError

US = 1000
# Two ProfilerSteps (#11, #12) of the example (GPT-2 124M, bf16, batch 8, seq 512) recorded on an H100 by the wrapper.
REAL = Path(__file__).resolve().parents[2] / "data" / "torch" / "h100_node0_rank0_vm.pt.trace.json.xz"
CUTLASS_GEMM = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu-run")
    write_run(folder, world=2, gpu=True, slow_rank=1)
    return torchprof.analyze_traces([folder])


def test_temporal_breakdown_per_rank_from_hta(gpu_run):
    # Rank 0, three 1 ms steps, each: GEMM 100-500 us, all-reduce 300-700 us, memcpy 800-850 us.
    # Kernels span 100 us .. 2850 us; busy 650 us per step; compute = the GEMMs' 3 x 400 us.
    row = next(gpu_run.temporal_breakdown.take(gpu_run.temporal_breakdown["rank"] == 0).rows())
    assert row["window_ns"] == 2750 * US
    assert row["idle_ns"] == (2750 - 3 * 650) * US
    assert row["compute_ns"] == 3 * 400 * US
    assert row["non_compute_ns"] == (2750 - 1200 - 800) * US
    assert row["idle_pct"] + row["compute_pct"] + row["non_compute_pct"] == pytest.approx(100)


def test_overlap_idle_and_kernel_breakdown(gpu_run):
    # Half of each all-reduce (300-500 of 300-700 us) runs under the GEMM.
    assert list(gpu_run.comm_comp_overlap["comm_overlapped_pct"]) == [50.0, 50.0]
    kinds = dict(zip(gpu_run.kernel_types["kind"], gpu_run.kernel_types["total_ns"], strict=True))
    # Over both ranks' 6 steps: 200 us of GEMM alone, 200 us under the all-reduce, 200 us of all-reduce alone, 50 us copy.
    assert kinds == {"COMPUTATION": 6 * 200 * US, "COMPUTATION overlapping COMMUNICATION": 6 * 200 * US,
                     "COMMUNICATION": 6 * 200 * US, "MEMORY": 6 * 50 * US}  # fmt: skip
    top = {row["name"]: row for row in gpu_run.top_kernels.rows()}
    assert set(top) == {GEMM, ALLREDUCE, MEMCPY}
    assert top[GEMM]["kind"] == "COMPUTATION" and top[ALLREDUCE]["kind"] == "COMMUNICATION"
    assert (top[GEMM]["instances"], top[GEMM]["ranks"], top[GEMM]["avg_ns"]) == (6, 2, 400 * US)
    assert set(gpu_run.idle_time["rank"]) == {0, 1} and "host_wait" in set(gpu_run.idle_time["kind"])
    per_rank = [row for row in gpu_run.rank_kernels.rows() if row["rank"] == 1 and row["name"] == GEMM]
    assert [(r["kind"], r["total_ns"], r["avg_ns"]) for r in per_rank] == [("COMPUTATION", 3 * 400 * US, 400 * US)]


def test_steps_and_the_slow_rank(gpu_run):
    steps = gpu_run.steps
    assert list(steps["step"][steps["rank"] == 0]) == [1, 2, 3]
    ranks = {row["rank"]: row for row in gpu_run.ranks.rows()}
    assert ranks[1]["step_mean_ns"] > ranks[0]["step_mean_ns"] and ranks[1]["straggler"]
    assert ranks[0]["host"] == "host"  # from the wrapper's report name
    assert ranks[0]["gpu_busy_pct"] == pytest.approx(1950 * 100 / 2750)  # busy 3 x 650 us of the 2750 us span


def test_json_has_the_tables_by_name(gpu_run):
    data = json.loads(json.dumps(gpu_run.to_json()))
    assert data["profiler"] == "torch" and set(data["sources"]) == {"0", "1"}
    assert set(torchprof.TABLES) <= set(data) and data["notes"] == []


def test_cpu_traces_say_the_gpu_parts_are_empty(tmp_path):
    write_run(tmp_path, world=2, gpu=False)
    analysis = torchprof.analyze_traces([tmp_path])
    assert analysis.notes == [torchprof.NO_GPU] and not analysis.has_gpu
    assert analysis.temporal_breakdown is None and analysis.top_kernels is None
    assert len(analysis.steps) == 6 and len(analysis.ranks) == 2


def test_rank_comes_from_distributed_info_without_the_wrapper_name(tmp_path):
    for rank in (1, 0):
        (tmp_path / f"worker{5 - rank}.pt.trace.json.gz").write_bytes(
            gzip.compress(json.dumps(kineto_trace(rank, 2, gpu=False)).encode())
        )
    found = torchprof.find_traces([tmp_path])
    assert {rank: path.name for rank, path in found.items()} == {0: "worker5.pt.trace.json.gz", 1: "worker4.pt.trace.json.gz"}


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(AnalysisError, match="no torch profiler traces"):
        torchprof.find_traces([tmp_path])
    (tmp_path / "broken.pt.trace.json.gz").write_bytes(b"not gzip")
    with pytest.raises(AnalysisError, match="not a readable torch profiler trace") as error:
        torchprof.find_traces([tmp_path])
    assert "\n" not in str(error.value)


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of (start, end) intervals: the plain loop, independent of the kit's interval code."""
    total, current = 0, None
    for start, end in sorted(intervals):
        if current and start <= current[1]:
            current[1] = max(current[1], end)
            continue
        total += current[1] - current[0] if current else 0
        current = [start, end]
    return total + (current[1] - current[0] if current else 0)


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory) -> Path:
    """The real trace as the wrapper wrote it (gzipped, under its name), decompressed from the committed .xz."""
    path = tmp_path_factory.mktemp("h100") / REAL.name.replace(".json.xz", ".json.gz")
    path.write_bytes(gzip.compress(lzma.decompress(REAL.read_bytes()), compresslevel=1))
    return path


@pytest.fixture(scope="module")
def real_events(real_trace) -> dict:
    """The real trace's events, read with json.load alone."""
    with gzip.open(real_trace, "rt") as handle:
        return json.load(handle)["traceEvents"]


@pytest.fixture(scope="module")
def real_run(real_trace):
    return torchprof.analyze_traces([real_trace.parent])


def test_real_h100_kernel_tables_count_every_launch(real_events, real_run):
    durations = defaultdict(list)  # ns per GPU event, by name, straight from the JSON
    for event in real_events:
        if event.get("cat") in GPU_CATS:
            durations[event["name"]].append(round(event["dur"] * US))
    top = {row["name"]: row for row in real_run.top_kernels.rows()}
    assert set(top) == set(durations)  # every name; no "others" row
    for name, each in durations.items():
        row = top[name]
        assert (row["instances"], row["total_ns"], row["min_ns"], row["max_ns"], row["ranks"]) == (
            len(each), sum(each), min(each), max(each), 1)  # fmt: skip
    gemm = next(row for name, row in top.items() if name.startswith(CUTLASS_GEMM))
    assert gemm["instances"] == 2 and gemm["avg_ns"] == pytest.approx(3.355e6, rel=0.01)  # HTA said: 1 of 53.7 ms
    assert real_run.top_kernels["min_ns"].min() > 0  # HTA said -1 us for sub-microsecond memsets
    assert top["Memset (Device)"]["kind"] == "MEMORY" and gemm["kind"] == "COMPUTATION"
    per_rank = {row["name"]: row for row in real_run.rank_kernels.rows()}
    assert {n: (r["rank"], r["instances"], r["total_ns"]) for n, r in per_rank.items()} == {
        n: (0, len(each), sum(each)) for n, each in durations.items()}  # fmt: skip


def test_real_h100_breakdown_idle_and_steps_match_the_json(real_events, real_run):
    # Integer ns: at 4.6e12 us a float microsecond timestamp keeps only about 1 ns.
    gpu = [(round(e["ts"] * US), round(e["ts"] * US) + round(e["dur"] * US), e) for e in real_events
           if e.get("cat") in GPU_CATS]  # fmt: skip
    assert not any(re.match("nccl", e["name"]) for *_, e in gpu)  # one rank: no communication kernel
    span = max(end for _, end, _ in gpu) - min(start for start, _, _ in gpu)
    busy = union_ns([(start, end) for start, end, _ in gpu])
    compute = union_ns([(start, end) for start, end, e in gpu if e["cat"] == "kernel"])
    (row,) = real_run.temporal_breakdown.rows()
    assert row["window_ns"] == pytest.approx(span, abs=2)
    assert row["idle_ns"] == pytest.approx(span - busy, abs=2)
    assert row["compute_ns"] == pytest.approx(compute, abs=2)
    assert row["non_compute_ns"] == pytest.approx(busy - compute, abs=2)
    kinds = dict(zip(real_run.kernel_types["kind"], real_run.kernel_types["total_ns"], strict=True))
    assert kinds == {"COMPUTATION": compute, "MEMORY": busy - compute}
    assert real_run.idle_time["idle_ns"].sum() == pytest.approx(span - busy, abs=10)  # HTA: 10 ns resolution
    assert {"host_wait", "kernel_wait"} <= set(real_run.idle_time["kind"])
    (rank,) = real_run.ranks.rows()
    assert rank["gpu_busy_pct"] == pytest.approx(busy * 100 / span)
    cpu_steps = {int(e["name"].split("#")[1]): round(e["dur"] * US) for e in real_events
                 if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}  # fmt: skip
    assert dict(zip(real_run.steps["step"], real_run.steps["duration_ns"], strict=True)) == cpu_steps == {
        11: cpu_steps[11], 12: cpu_steps[12]}  # fmt: skip


def test_many_launches_of_many_kernels_and_sub_microsecond_memsets(tmp_path):
    path = tmp_path / "job_node0_rank0_host.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(fixtures.launch_heavy_trace(steps=2)).encode()))
    analysis = torchprof.analyze_traces([tmp_path])
    top = {row["name"]: row for row in analysis.top_kernels.rows()}
    assert set(top) == {*ELEMENTWISE, MEMSET}
    for i, name in enumerate(ELEMENTWISE):
        each = [(i + 1 + j / 8) * US for j in range(LAUNCHES)] * 2
        assert (top[name]["instances"], top[name]["total_ns"], top[name]["min_ns"], top[name]["max_ns"]) == (
            2 * LAUNCHES, sum(each), (i + 1) * US, (i + 1.5) * US)  # fmt: skip
    assert (top[MEMSET]["instances"], top[MEMSET]["total_ns"], top[MEMSET]["min_ns"]) == (8, 8 * 900, 900)
    compute = 2 * sum((i + 1 + j / 8) * US for i in range(12) for j in range(LAUNCHES))
    kinds = dict(zip(analysis.kernel_types["kind"], analysis.kernel_types["total_ns"], strict=True))
    assert kinds == {"COMPUTATION": compute, "MEMORY": 8 * 900}
    (row,) = analysis.temporal_breakdown.rows()
    assert row["compute_ns"] == pytest.approx(compute) and row["non_compute_ns"] == pytest.approx(8 * 900)
    assert row["window_ns"] == pytest.approx((1000 + 100 + 63 * 14 + 0.05 + 0.9 - 100.25) * US)


def test_hta_parser_settings_are_restored_after_loading(monkeypatch):
    from hta.configs.parser_config import ParserConfig

    monkeypatch.delenv("HTA_DISABLE_NS_ROUNDING", raising=False)
    before = [arg.name for arg in ParserConfig.get_default_cfg().get_args()]
    with torchprof.exact_parsing():
        assert os.environ["HTA_DISABLE_NS_ROUNDING"] == "1"
        assert [arg.name for arg in ParserConfig.get_default_cfg().get_args()] == ["stream", "correlation"]
    assert "HTA_DISABLE_NS_ROUNDING" not in os.environ
    assert [arg.name for arg in ParserConfig.get_default_cfg().get_args()] == before
