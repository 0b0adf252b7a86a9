"""report.html (self-contained, findings first, run header, links, adaptive units, charts at any rank count), terminal, JSON."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from nsys_fixtures import Export, Kernel, Memop, Range, write_export
from rich.console import Console

from nsyskit.analysis import run_analysis
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge.summary import summarize
from nsyskit.analysis.present import plots, report, terminal

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)"


def make_run(folder, ranks=2, step_ns=1000, slow_rank=None, kernel_ns=400, kernel_name="gemm", range_name=None):
    """A run folder with per-rank GPU-shaped exports: 4 steps per rank, a GEMM and an NCCL kernel per step
    (and a range_name NVTX range per step when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        step = step_ns * (2 if rank == slow_rank else 1)
        kernels, ranges = [], []
        for i in range(4):
            t = i * step
            kernels += [Kernel(t, t + kernel_ns, kernel_name), Kernel(t + kernel_ns // 2, t + kernel_ns, NCCL, stream=20)]
            ranges += [
                Range(t, t + step, f"step {i}"),
                Range(t + 10, t + 20, "ncclAllReduce", payload=(1 << 20) * (i + 1)),
            ] + ([Range(t + 30, t + 60, range_name)] if range_name else [])
        write_export(
            folder / f"run_rank_{rank}.sqlite",
            Export(kernels=kernels, memops=[Memop(5, 50, 1 << 20, 1)], ranges=ranges),
        )
    return folder


EXTERNAL = re.compile(
    r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|<script[^>]*\bsrc=|@import|url\(\s*["']?https?:""", re.I
)


def external_resources(html: str) -> list[str]:
    """What the page would fetch from the network (a plain link to ui.perfetto.dev is a link, not a resource)."""
    return [
        m.group(0)
        for m in EXTERNAL.finditer(html)
        if not html[m.start() :].startswith('href="https://ui.perfetto.dev"')
    ]


def test_report_html_is_self_contained_with_plots(tmp_path):
    run = make_run(tmp_path / "run", ranks=3, slow_rank=2)
    analysis, page = run_analysis([run])
    html = page.read_text()
    assert page == run / "report.html"
    assert html.count("data:image/png;base64,") == 4
    assert external_resources(html) == []
    for png in ("breakdown.png", "nccl_sizes.png", "top_kernels.png", "step_times.png"):
        assert (run / png).read_bytes().startswith(b"\x89PNG")
    assert 'class="straggler"' in html  # rank 2 runs its steps at half speed
    data = json.loads((run / "analysis.json").read_text())
    assert [r["straggler"] for r in data["ranks"]] == [False, False, True]
    assert {row["bucket"] for row in data["nccl_sizes"]} == {"1MB-16MB"}


def test_findings_come_first_in_html_json_and_terminal(tmp_path):
    run = make_run(tmp_path / "run", ranks=3, slow_rank=2)
    analysis, page = run_analysis([run])
    html = page.read_text()
    assert html.index("<h2>Findings</h2>") < html.index("<h2>Kernels</h2>") < html.index("<h2>Ranks</h2>")
    assert "rank 2 is a straggler" in html and "<code>straggler</code>" in html
    data = json.loads((run / "analysis.json").read_text())
    assert list(data)[:4] == ["schema", "run", "findings", "metrics"]
    straggler = next(f for f in data["findings"] if f["rule"] == "straggler")
    assert straggler["value"] > straggler["threshold"] == 5.0
    console = Console(record=True, width=200)
    report.print_report(report.compose(analysis, summarize(analysis, run), run), console)
    text = console.export_text()
    assert text.index("Findings") < text.index("rank 2 is a straggler") < text.index("Top kernels")


def test_run_header_and_links_to_each_ranks_report_and_the_timeline(tmp_path):
    run = make_run(tmp_path / "run", ranks=2)
    for rank in range(2):
        (run / f"run_rank_{rank}.nsys-rep").write_bytes(b"report")  # what 'invoke run' leaves beside the exports
    record = {"run_id": "20260101-abc", "image": "nsyskit:latest", "nodes": 1, "procs_per_node": 2, "started": 0}
    (run / "run.json").write_text(json.dumps(record))
    (run / "timeline.json.gz").write_bytes(b"")
    html = run_analysis([run])[1].read_text()
    assert "nsyskit analysis: 20260101-abc" in html
    assert "1 node(s) x 2 rank(s) = 2 ranks" in html and "nsyskit:latest" in html and "2022.4.2.1" in html
    assert '<a href="run_rank_0.nsys-rep">' in html and '<a href="run_rank_1.nsys-rep">' in html
    assert "nsys-ui run_rank_0.nsys-rep, then File &gt; Add Report (beta)… with run_rank_1.nsys-rep" in html
    assert '<a href="timeline.json.gz">' in html and '<a href="analysis.json">' in html


def test_units_adapt_to_the_value(tmp_path):
    run = make_run(tmp_path / "run", ranks=1, step_ns=4000, kernel_ns=1500)  # microsecond kernels
    html = run_analysis([run])[1].read_text()
    assert "0.000" not in html
    assert ">6.00 us<" in html  # the GEMM's total: 4 kernels of 1.5 us
    assert terminal.fmt(2_500_000_000, "total_ns") == "2.50 s" and terminal.fmt(812, "avg_ns") == "812 ns"
    assert terminal.fmt(3 << 20, "bytes") == "3.00 MB"


@pytest.mark.parametrize("ranks", [2, 16, 17, 1024])
def test_per_rank_charts_keep_their_size_from_2_to_1024_ranks(ranks):
    rng = np.random.default_rng(ranks)
    step_index = np.tile(np.arange(10), ranks)
    steps = Table(
        {
            "rank": np.repeat(np.arange(ranks), 10),
            "step": step_index,
            "start_ns": step_index * 10**7,
            "duration_ns": np.where(step_index == 0, 10**9, 10**7 + rng.integers(0, 10**6, 10 * ranks)),
        }
    )
    busy = rng.integers(50, 100, ranks) * 10**6
    breakdown = Table(
        {
            "rank": np.arange(ranks), "device": np.zeros(ranks, dtype=np.int64), "window_ns": np.full(ranks, 10**8),
            "busy_ns": busy, "compute_ns": busy // 2, "exposed_comm_ns": busy // 4, "idle_ns": 10**8 - busy,
            "compute_comm_overlap_ns": busy // 8,
        }
    )  # fmt: skip
    for png in (plots.step_times_per_rank(steps, steps.take(step_index > 0)), plots.breakdown_per_rank(breakdown)):
        width, height = struct.unpack(">II", png[16:24])
        assert 400 <= width <= 1100 and height <= 420  # fits a 1400 px window at any rank count


def test_terminal_tables(tmp_path):
    run = make_run(tmp_path / "run")
    analysis, _ = run_analysis([run], write=False)
    console = Console(record=True, width=200)
    report.print_report(report.compose(analysis, summarize(analysis, run), run), console)
    text = console.export_text()
    for title in (
        "Top kernels",
        "Kernel summary, rank 0",
        "GPU time breakdown",
        "Memcpy by kind",
        "NVTX ranges",
        "Collective operations by message size (NCCL, gloo)",
        "Ranks",
    ):
        assert title in text


def test_report_html_of_a_run_with_nccl_logs_carries_the_nccl_log_section(tmp_path):
    run = make_run(tmp_path / "run", ranks=2)
    plain = run_analysis([run])[1].read_text()
    assert "NCCL log analysis" not in plain  # no logs in the folder: no section
    (run / "rank0.log").write_bytes((DATA / "nemo_4gpu.log").read_bytes())
    html = run_analysis([run])[1].read_text()
    assert "<h2>NCCL log analysis (NCCL_DEBUG=INFO)</h2>" in html
    assert "AllReduce" in html.split("NCCL log analysis (NCCL_DEBUG=INFO)</h2>", 1)[1]
