"""Torch profiler analysis with Holistic Trace Analysis, on Kineto traces the tests write (GPU and CPU shapes)."""

from __future__ import annotations

import gzip
import json

import pytest
from torch_fixtures import ALLREDUCE, GEMM, MEMCPY, kineto_trace, write_run

from nsyskit.analysis import torchprof
from nsyskit.errors import AnalysisError

US = 1000


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
