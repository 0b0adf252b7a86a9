"""report.html (self-contained, plots, extra-section hook), terminal tables, JSON, and the diff / regression gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nsys_fixtures import Export, Kernel, Memop, Range, write_export
from rich.console import Console

from nsyskit.analysis import diff_runs, report, run_analysis

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)"


def make_run(folder, ranks=2, step_ns=1000, slow_rank=None, kernel_ns=400):
    """A run folder with per-rank GPU-shaped exports: 4 steps per rank, a GEMM and an NCCL kernel per step."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        step = step_ns * (2 if rank == slow_rank else 1)
        kernels, ranges = [], []
        for i in range(4):
            t = i * step
            kernels += [Kernel(t, t + kernel_ns, "gemm"), Kernel(t + kernel_ns // 2, t + kernel_ns, NCCL, stream=20)]
            ranges += [
                Range(t, t + step, f"step {i}"),
                Range(t + 10, t + 20, "ncclAllReduce", payload=(1 << 20) * (i + 1)),
            ]
        write_export(
            folder / f"run_rank_{rank}.sqlite",
            Export(kernels=kernels, memops=[Memop(5, 50, 1 << 20, 1)], ranges=ranges),
        )
    return folder


def test_report_html_is_self_contained_with_plots_and_extra_sections(tmp_path):
    run = make_run(tmp_path / "run", ranks=3, slow_rank=2)

    @report.register_section
    def nccl_logs(analysis, folder):
        return report.Section("NCCL logs", f"<p>{len(analysis.sources)} ranks in {folder.name}</p>")

    try:
        analysis, page = run_analysis([run])
    finally:
        report.EXTRA_SECTIONS.remove(nccl_logs)
    html = page.read_text()
    assert page == run / "report.html"
    assert html.count("data:image/png;base64,") == 4 and "<script" not in html and "http" not in html
    assert "<h2>NCCL logs</h2><p>3 ranks in run</p>" in html
    for png in ("breakdown.png", "nccl_sizes.png", "top_kernels.png", "step_times.png"):
        assert (run / png).read_bytes().startswith(b"\x89PNG")
    assert "class='straggler'" in html  # rank 2 runs its steps at half speed
    data = json.loads((run / "analysis.json").read_text())
    assert [r["straggler"] for r in data["ranks"]] == [False, False, True]
    assert {row["bucket"] for row in data["nccl_sizes"]} == {"1MB-16MB"}


def test_terminal_tables(tmp_path):
    analysis, _ = run_analysis([make_run(tmp_path / "run")], write=False)
    console = Console(record=True, width=200)
    report.print_analysis(analysis, console)
    text = console.export_text()
    for title in (
        "Top kernels",
        "Kernel summary, rank 0",
        "GPU time breakdown",
        "Memcpy by kind",
        "NVTX ranges",
        "NCCL operations by message size",
        "Ranks",
    ):
        assert title in text


def test_diff_flags_regressions_beyond_the_threshold(tmp_path):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b", step_ns=1200, kernel_ns=500)  # steps 20% slower, GPU busy 25% more
    table = {row["metric"]: row for row in diff_runs([a], [b], threshold_pct=10).rows()}
    assert table["step_time_mean_ns"]["change_pct"] == pytest.approx(20.0)
    assert table["step_time_mean_ns"]["regression"] and table["gpu_busy_per_step_ns"]["regression"]
    assert not any(row["regression"] for row in diff_runs([a], [b], threshold_pct=30).rows())
    assert not any(
        row["regression"] for row in diff_runs([b], [a], threshold_pct=10).rows()
    )  # faster is never a regression


def test_report_html_of_a_run_with_nccl_logs_carries_the_nccl_log_section(tmp_path):
    run = make_run(tmp_path / "run", ranks=2)
    plain = run_analysis([run])[1].read_text()
    assert "NCCL log analysis" not in plain  # no logs in the folder: no section
    (run / "rank0.log").write_bytes((DATA / "nemo_4gpu.log").read_bytes())
    html = run_analysis([run])[1].read_text()
    assert "<h2>NCCL log analysis (NCCL_DEBUG=INFO)</h2>" in html
    assert "AllReduce" in html.split("NCCL log analysis (NCCL_DEBUG=INFO)</h2>", 1)[1]
