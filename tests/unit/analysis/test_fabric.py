"""--fabric: every collective row beside nccl-tests' busbw measured on the same fabric at its size, the ratio, and
the finding when a bucket that carries the communication time reaches well under it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.realdata import REAL_DATA, need
from nsys_fixtures import Range, write_export
from test_ncclbandwidth import export_of

from nsyskit.analysis.outputs import analyze
from nsyskit.analysis.request import AnalyzeRequest
from nsyskit.clusteranalysis import make_plan
from nsyskit.errors import NsyskitError, UsageError

ROOT = Path(__file__).resolve().parents[3]
REAL_ALL_REDUCE = REAL_DATA / "nccl-tests/thomaslie210_NCCL_Test_Results_External-GDR_ON-all_reduce.log"
# (size B, out-of-place busbw GB/s, in-place busbw GB/s): the in-place column differs so that using it would show.
MEASURED = [(1 << 10, 0.05, 0.04), (1 << 20, 10.0, 9.0), (16 << 20, 40.0, 30.0), (256 << 20, 80.0, 70.0)]


def nccl_tests_output(path: Path, rows=MEASURED, binary: str = "all_reduce_perf") -> Path:
    """An all_reduce_perf output as nccl-tests 2.13+ prints it (redop and root columns, #wrong)."""
    lines = ["# nThread 1 nGpus 1 minBytes 1024 maxBytes 268435456 step: 16(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices",
             "#  Rank  0 Group  0 Pid  11 on     node-a device  0 [0x53] NVIDIA H100 80GB HBM3",
             "#  Rank  1 Group  0 Pid  12 on     node-b device  0 [0x53] NVIDIA H100 80GB HBM3", "#",
             "#                                                              out-of-place                       in-place",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]  # fmt: skip
    for size, out, inplace in rows:
        lines.append(f"{size:>12} {size // 4:>13}     float     sum      -1    100.0  {out:6.2f}  {out:6.2f}      0"
                     f"    100.0  {inplace:6.2f}  {inplace:6.2f}      0")  # fmt: skip
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(r[1] for r in rows) / len(rows):.4f}",
        "#",
    ]
    path.write_text(f"$ mpirun -np 2 ./build/{binary} -b 1K -e 256M -f 16 -g 1\n" + "\n".join(lines) + "\n")
    return path


def log_interpolated(size: float, rows=MEASURED) -> float:
    """The out-of-place busbw at `size`, linear in log(size) between the nearest measured sizes (ends held)."""
    if size <= rows[0][0]:
        return rows[0][1]
    for (s0, b0, _i0), (s1, b1, _i1) in zip(rows, rows[1:], strict=False):
        if s0 <= size <= s1:
            return b0 + (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0)) * (b1 - b0)
    return rows[-1][1]


def run_of(folder: Path, planted) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, ops in enumerate(planted):
        write_export(folder / f"run_rank_{rank}.sqlite", export_of(ops))
    return folder


# AllReduce in two buckets: 3 MB at 1 ms (busbw 3.15 GB/s: ~8% of the ceiling there) carrying most of the time,
# 64 MB at 1 ms (67 GB/s busbw on 2 ranks); a Send/Recv the measurement has no test for.
SLOW = [
    [("AllReduce", 3 << 20, 1_000_000)] * 6 + [("AllReduce", 64 << 20, 1_000_000)] + [("Send/Recv", 1 << 20, 50_000)]
] * 2


def analyzed(run: Path, fabric: list[str]):
    request = AnalyzeRequest([str(run)], fabric=fabric).check()
    return analyze([run], inputs=request.judge_inputs())


def test_each_row_carries_the_ceiling_at_its_size_and_the_ratio(tmp_path):
    result = analyzed(run_of(tmp_path / "run", SLOW), [str(nccl_tests_output(tmp_path / "nccl.out"))])
    rows = {(r["op"], r["bucket"]): r for r in result.analysis.nccl_sizes.rows()}
    for bucket, size in (("1MB-16MB", 3 << 20), (">16MB", 64 << 20)):
        row = rows["AllReduce", bucket]
        assert row["fabric_busbw_gbps"] == pytest.approx(log_interpolated(size), rel=1e-12)  # out-of-place, log size
        assert row["fabric_ratio"] == pytest.approx(row["busbw_median_gbps"] / log_interpolated(size), rel=1e-12)
    assert rows["Send/Recv", "1MB-16MB"]["fabric_busbw_gbps"] is None  # no sendrecv_perf in the output: no ceiling


def test_a_bucket_with_the_time_far_under_the_ceiling_is_a_finding_naming_op_bucket_and_both_numbers(tmp_path):
    result = analyzed(run_of(tmp_path / "run", SLOW), [str(nccl_tests_output(tmp_path / "nccl.out"))])
    [finding] = [f for f in result.summary.findings if f.rule == "below_fabric"]
    busbw = (3 << 20) / 1_000_000 * 2 * (2 - 1) / 2  # bytes / kernel ns x AllReduce's 2(n-1)/n at n = 2
    assert "AllReduce 1MB-16MB" in finding.title and f"{busbw:.2f} GB/s" in finding.title
    assert f"{log_interpolated(3 << 20):.2f} GB/s" in finding.title
    assert finding.evidence["fabric_ratio_pct"] == pytest.approx(busbw / log_interpolated(3 << 20) * 100, rel=1e-12)
    assert "NET/Socket" in finding.advice and math.isnan(finding.at_stake_ns)  # no steps in this run: no estimate
    # the ops the output has no test for: named once, in one line
    named = [w for w in result.analysis.warnings if w.startswith("--fabric")]
    assert len(named) == 1 and "Send/Recv" in named[0] and "sendrecv_perf" in named[0]


def test_no_finding_where_the_buckets_reach_half_the_ceiling_or_carry_little_time(tmp_path):
    low = [(size, out / 10, inplace) for size, out, inplace in MEASURED]  # a fabric 10x slower: the run is at 80%
    result = analyzed(run_of(tmp_path / "run", SLOW), [str(nccl_tests_output(tmp_path / "nccl.out", low))])
    assert not [f for f in result.summary.findings if f.rule == "below_fabric"]
    without = analyze([tmp_path / "run"])  # no --fabric: no columns, no finding
    assert "fabric_ratio" not in without.analysis.nccl_sizes and not [
        f for f in without.summary.findings if f.rule == "below_fabric"
    ]


def _lasting(op: str, size: int, ratio: float) -> tuple[str, int, int]:
    """An operation of SIZE whose kernel time gives RATIO of the ceiling (AllReduce on 2 ranks: busbw = B/ns)."""
    return op, size, round(size / (ratio * log_interpolated(size)))


def _small_slow_buckets(healthy: int) -> list[list[tuple[str, int, int]]]:
    """The issue's run: AllReduces of 512 KB at 24% and 4 MB at 32% of the ceiling (each under 10% of the NCCL
    time), and HEALTHY 64 MB ones at 90%, on 2 ranks."""
    ops = [_lasting("AllReduce", 512 << 10, 0.24)] * 2 + [_lasting("AllReduce", 4 << 20, 0.32)]
    return [ops + [_lasting("AllReduce", 64 << 20, 0.90)] * healthy] * 2


STEPS = 2


def run_with_steps(folder: Path, planted) -> Path:
    """run_of, each rank's operations spread over STEPS NVTX step ranges (so a time at stake per step is estimated)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank, ops in enumerate(planted):
        export = export_of(ops)
        end = max(kernel.end for kernel in export.kernels) + 1
        export.ranges += [Range(step * end // STEPS, (step + 1) * end // STEPS, f"step {step}") for step in range(STEPS)]
        write_export(folder / f"run_rank_{rank}.sqlite", export)
    return folder


def test_small_slow_buckets_fire_together_naming_the_worst_and_summing_what_is_at_stake(tmp_path):
    result = analyzed(run_with_steps(tmp_path / "run", _small_slow_buckets(5)), [str(nccl_tests_output(tmp_path / "o"))])
    rows = {r["bucket"]: r for r in result.analysis.nccl_sizes.rows()}
    total = sum(r["total_ns"] for r in rows.values())
    shares = {bucket: rows[bucket]["total_ns"] * 100 / total for bucket in ("64KB-1MB", "1MB-16MB")}
    assert all(share < 10 for share in shares.values()) and sum(shares.values()) >= 10  # neither alone would fire
    [finding] = [f for f in result.summary.findings if f.rule == "below_fabric"]
    lost = {b: rows[b]["total_ns"] * (1 - rows[b]["fabric_ratio"]) for b in shares}
    worst = max(lost, key=lost.get)
    assert finding.title.startswith(f"AllReduce {worst} messages")
    assert finding.evidence["fabric_ratio_pct"] == pytest.approx(rows[worst]["fabric_ratio"] * 100, rel=1e-12)
    assert finding.evidence["buckets_below"] == 2
    assert finding.evidence["buckets_below_time_share_pct"] == pytest.approx(sum(shares.values()), rel=1e-9)
    assert f"2 buckets under 50% of the ceiling hold {sum(shares.values()):.0f}% of NCCL time together" in finding.title
    # the time at stake per step and rank: the slow buckets' time less their time at the ceiling, summed over both
    assert finding.at_stake_ns == pytest.approx(sum(lost.values()) / STEPS / 2, rel=1e-9)


def test_slow_buckets_under_a_tenth_of_the_nccl_time_together_are_no_finding(tmp_path):
    result = analyzed(run_of(tmp_path / "run", _small_slow_buckets(40)), [str(nccl_tests_output(tmp_path / "o"))])
    rows = {r["bucket"]: r for r in result.analysis.nccl_sizes.rows()}
    slow = [r for r in rows.values() if r["fabric_ratio"] < 0.5]
    assert len(slow) == 2 and sum(r["total_ns"] for r in slow) * 100 / sum(r["total_ns"] for r in rows.values()) < 10
    assert not [f for f in result.summary.findings if f.rule == "below_fabric"]


def test_a_real_all_reduce_perf_output_is_a_ceiling(tmp_path):
    result = analyzed(run_of(tmp_path / "run", SLOW), [str(need(REAL_ALL_REDUCE))])
    row = next(r for r in result.analysis.nccl_sizes.rows() if r["op"] == "AllReduce" and r["bucket"] == ">16MB")
    assert row["fabric_busbw_gbps"] > 0 and row["fabric_ratio"] == row["busbw_median_gbps"] / row["fabric_busbw_gbps"]


def test_bad_fabric_inputs_are_one_line_and_lose_nothing(tmp_path):
    run = run_of(tmp_path / "run", SLOW)
    empty = tmp_path / "notes.txt"
    empty.write_text("NCCL INFO Bootstrap : Using eth0\nno table here\n")
    with pytest.raises(NsyskitError) as raised:
        AnalyzeRequest([str(run)], fabric=[str(empty)]).judge_inputs()
    assert str(empty) in raised.value.one_line() and "\n" not in raised.value.one_line()
    with pytest.raises(UsageError):
        AnalyzeRequest([str(run)], fabric=[str(empty)], diff=[str(run)]).check()
    other = nccl_tests_output(tmp_path / "alltoall.out", binary="alltoall_perf")  # none of the run's operations
    result = analyzed(run, [str(other)])
    [line] = [w for w in result.analysis.warnings if w.startswith("--fabric")]
    assert "none of this run's collectives (AllReduce, Send/Recv; it measures alltoall)" in line
    assert result.analysis.nccl_sizes["count"].sum() == sum(map(len, SLOW))  # every operation still there


def test_the_commands_take_fabric_on_analyze_and_on_the_merge(tmp_path):
    run = run_of(tmp_path / "run", SLOW)
    fabric = nccl_tests_output(tmp_path / "nccl.out")
    here = _nsyskit("analyze", str(run), "--json", "--no-html", "--fabric", str(fabric))
    assert here.returncode == 0, here.stderr
    parts = tmp_path / "parts"
    assert _nsyskit("analyze-part", str(run), "--out", str(parts)).returncode == 0
    merged = _nsyskit("analyze-merge", str(parts), "--json", "--no-html", "--fabric", str(fabric))
    assert merged.returncode == 0, merged.stderr
    mine, theirs = json.loads(here.stdout), json.loads(merged.stdout)
    assert mine["nccl_sizes"] == theirs["nccl_sizes"] and any(r["fabric_ratio"] for r in mine["nccl_sizes"])
    assert [f["rule"] for f in mine["findings"]] == [f["rule"] for f in theirs["findings"]]
    missing = _nsyskit("analyze", str(run), "--no-html", "--fabric", str(tmp_path / "nowhere.out"))
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1 and "nowhere.out" in missing.stderr
    # on a cluster the merge job gets --fabric with the paths made absolute (it runs elsewhere)
    words = AnalyzeRequest([str(run)], fabric=[str(fabric)]).judge_words()
    plan = replace(make_plan(run), merge_options=words)
    assert plan.merge_arguments()[-2:] == ["--fabric", str(fabric.resolve())]


def _nsyskit(*words: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nsyskit", *words], capture_output=True, text=True, cwd=ROOT, check=False
    )
