"""nccl_outlier on planted runs written in the nsys export schema: a healthy 2-rank run fires no rule of this
module, one slow collective fires it with its rank and step, exactly through the map and merge."""

from __future__ import annotations

from nsys_fixtures import Export, Kernel, Launch, Range, gtid, write_export

from nsyskit.analysis.judge.findings import find
from nsyskit.analysis.judge.summary import summarize
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.trace import analyze_run

MS = 1_000_000
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel"


def training_rank(rank: int, steps: int = 12, slow: dict[int, int] | None = None, serial: bool = False) -> Export:
    """A rank of a healthy DDP run: each 10 ms step computes 7 ms and all-reduces 4 MB in 1 ms on its own stream
    beside the last millisecond of compute (launched inside the NCCL range, as PyTorch does); `slow`: step -> the
    all-reduce's duration instead; `serial`: the all-reduce runs after the compute on the compute's stream."""
    kernels, ranges, launches = [], [], []
    thread = gtid(1000 + rank, 1)
    for step in range(steps):
        t0 = step * 10 * MS
        nccl_ms = (slow or {}).get(step, 1 * MS)
        ranges.append(Range(t0, t0 + 9 * MS + nccl_ms, f"step {step}", thread=thread))
        launches.append(Launch(t0 + 10_000, t0 + 20_000, 2 * step + 1, thread=thread))
        kernels.append(Kernel(t0 + 100_000, t0 + 7 * MS, GEMM, correlation=2 * step + 1, pid=1000 + rank))
        at = t0 + (7 * MS + 30_000 if serial else 6 * MS)
        ranges.append(Range(at - 30_000, at - 30_000 + 50_000, "ncclAllReduce", payload=4 << 20, domain="NCCL",
                            thread=thread))  # fmt: skip
        launches.append(Launch(at - 20_000, at - 10_000, 2 * step + 2, thread=thread))
        kernels.append(Kernel(at, at + nccl_ms, NCCL, stream=7 if serial else 20, correlation=2 * step + 2,
                              pid=1000 + rank))  # fmt: skip
    return Export(kernels=kernels, ranges=ranges, launches=launches, hostname=f"node-{rank}")


def run(tmp_path, slow_rank: int | None = None, slow: dict[int, int] | None = None, serial: bool = False):
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    for rank in range(2):
        planted = training_rank(rank, slow=slow if rank == slow_rank else None, serial=serial)
        write_export(folder / f"job_rank_{rank}.sqlite", planted)
    return folder


def rules_fired(folder, tmp_path) -> dict:
    return {f.rule: f for f in summarize(analyze_run([folder]), tmp_path).findings}


def test_a_healthy_run_fires_no_communication_cause(tmp_path):
    fired = rules_fired(run(tmp_path), tmp_path)
    assert "nccl_outlier" not in fired and "serialized_streams" not in fired


def test_one_slow_collective_is_named_with_its_rank_step_and_cost(tmp_path):
    folder = run(tmp_path, slow_rank=1, slow={7: 40 * MS})
    finding = rules_fired(folder, tmp_path)["nccl_outlier"]
    assert finding.ranks == (1,) and finding.steps == (7,)
    assert finding.title.startswith("1 AllReduce of 1MB-16MB took over 5x their median (1.00 ms): worst 40.0 ms")
    assert "on rank 1 in step 7" in finding.title and finding.evidence["worst_ns"] == 40 * MS
    assert finding.evidence["median_ns"] == 1 * MS and finding.evidence["excess_ns"] == 39 * MS
    # The merge of the parts tells the same
    map_reports([folder], tmp_path / "parts")
    merged, _facts = merge_parts(tmp_path / "parts")
    again = {f.rule: f for f in find(summarize(merged, tmp_path).view)}["nccl_outlier"]
    assert again == finding


def test_communication_on_the_compute_stream_is_serialized_and_says_so(tmp_path):
    finding = rules_fired(run(tmp_path, serial=True), tmp_path)["serialized_streams"]
    assert finding.ranks == (0, 1) and finding.evidence["gpus_serialized"] == 2
    assert finding.evidence["gpus_sharing_a_stream"] == 2 and "share a stream with compute kernels" in finding.title
    assert finding.at_stake_ns == 1 * MS  # each step's all-reduce, which a side stream would hide behind compute


def test_at_512_ranks_each_rule_is_one_line_and_the_merge_tells_the_same(tmp_path):
    folder = tmp_path / "wide"
    folder.mkdir()
    for rank in range(512):  # every rank runs its all-reduce on the compute stream; rank 300's last one is slow
        planted = training_rank(rank, steps=6, slow={5: 40 * MS} if rank == 300 else None, serial=True)
        write_export(folder / f"job_rank_{rank}.sqlite", planted)
    here = summarize(analyze_run([folder]), tmp_path)
    rules = [f.rule for f in here.findings]
    assert len(rules) == len(set(rules)) and {"nccl_outlier", "serialized_streams"} <= set(rules)
    fired = {f.rule: f for f in here.findings}
    assert fired["nccl_outlier"].ranks == (300,) and fired["nccl_outlier"].steps == (5,)
    assert len(fired["serialized_streams"].ranks) == 512 and "on 512 of 512 GPUs" in fired["serialized_streams"].title
    assert all("\n" not in f.title and len(f.title) < 300 for f in here.findings)
    map_reports([folder], tmp_path / "parts")
    merged, _facts = merge_parts(tmp_path / "parts")
    assert find(summarize(merged, tmp_path).view) == here.findings
