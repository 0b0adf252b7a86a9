"""The report of 'invoke analyze': the sections it names, in one order for the terminal, analysis.json and
report.html; the NCCL log section when the run's logs hold NCCL lines; text from reports escaped in the HTML."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from real_exports import decompress
from rich.console import Console
from test_report import make_run

from nsyskit.analysis import run_analysis
from nsyskit.analysis.judge.summary import summarize
from nsyskit.analysis.outputs import analyze, write
from nsyskit.analysis.present import report
from nsyskit.analysis.present.sections import NCCL_LOG_TITLE
from nsyskit.analysis.trace import Analysis

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl"
SECTIONS = ["findings", "kernels", "gpu", "nvtx", "communication", "ranks", "counters"]


def composed(run: Path) -> report.Report:
    return analyze([run]).report


def test_the_report_names_its_sections_and_adds_the_nccl_log_one_for_nccl_logs(tmp_path):
    run = make_run(tmp_path / "run", ranks=2)
    assert [s.id for s in composed(run).sections] == SECTIONS
    shutil.copy(DATA / "kit_mpirun.log", run / "rank0.log")
    assert [s.id for s in composed(run).sections] == [*SECTIONS, "nccl-log"]


def test_the_three_forms_follow_the_same_sections(tmp_path):
    run = make_run(tmp_path / "run", ranks=3, slow_rank=2)
    shutil.copy(DATA / "srun_megatron.log", run / "slurm-42.out")
    result = write(analyze([run]))
    console = Console(record=True, width=200)
    report.print_report(result.report, console)
    text = console.export_text()
    order = ["Findings", "Top kernels", "GPU time breakdown", "NVTX ranges", "Collective operations by message size (NCCL, gloo)",
             "Ranks (stragglers in red)", NCCL_LOG_TITLE]  # fmt: skip
    assert [text.index(title) for title in order] == sorted(text.index(title) for title in order)
    assert "Per-op message sizes" in text and "2.18.5+cuda12.2" not in text  # the terminal shows the NCCL summary
    data = json.loads((run / "analysis.json").read_text())
    assert list(data)[:4] == ["schema", "run", "findings", "metrics"]
    assert data["nccl_log"]["init"]["nccl_version"] == "2.18.5+cuda12.2"
    assert {"kernel_summary", "top_kernels", "breakdown", "memcpy", "nvtx", "nvtx_gpu", "steps", "nccl_sizes", "ranks",
            "sources", "nsys_versions", "more_rows", "warnings"} <= data.keys()  # fmt: skip
    html = result.report_html.read_text()
    headings = [f"<h2>{s.title}</h2>" for s in result.report.sections]
    assert [html.index(h) for h in headings] == sorted(html.index(h) for h in headings)
    assert html.count('<section id="nccl-log">') == 1 and "2.18.5+cuda12.2" in html
    write(analyze([run]))  # written again: still one section, the page is rendered whole
    assert result.report_html.read_text().count(f"<h2>{NCCL_LOG_TITLE}</h2>") == 1


def test_logs_beside_the_analyzed_reports_count_as_the_runs(tmp_path):
    run, output = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    output.mkdir()
    shutil.copy(DATA / "nemo_4gpu.log", run / "stdout.log")
    analysis = Analysis(sources={0: str(run / "profile_rank_0.sqlite")}, nsys_versions={})
    assert report.run_logs(analysis, output) == [run / "stdout.log"]
    assert report.nccl_logs(analysis, output).init["nccl_version"] == "2.28.9+cuda13.0"


def test_no_nccl_log_section_without_nccl_lines(tmp_path):
    empty = Analysis(sources={}, nsys_versions={})
    assert report.nccl_logs(empty, tmp_path) is None
    (tmp_path / "rank0.log").write_text("[rank 0] step 1/2 loss=1.0 step_ms=5.0 tokens_per_s=10\n")
    assert report.nccl_logs(empty, tmp_path) is None


def test_names_from_reports_and_logs_are_escaped_in_report_html(tmp_path):
    kernel = "void at::native::foo<float, 4>(at::Tensor<float> const&)"
    run = make_run(tmp_path / "run <a&b>", ranks=2, kernel_name=kernel, range_name="<script>alert(1)</script> fwd")
    log = (DATA / "nemo_4gpu.log").read_text().replace("nodeA", "node<b>A</b>")
    (run / "rank0.log").write_text(log)
    raw = run_analysis([run])[1].read_text()
    assert "<script" not in raw and "<b>" not in raw and "<a&b>" not in raw
    html = re.sub(r'<span class="w">|</span>|<wbr>', "", raw)  # a table cell's own markup: where a name may wrap
    assert "void at::native::foo&lt;float, 4&gt;(at::Tensor&lt;float&gt; const&amp;)" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; fwd" in html and "<script" not in html
    assert "node&lt;b&gt;A&lt;/b&gt;[0]" in html and "<b>" not in html
    assert "nsyskit analysis: run &lt;a&amp;b&gt;</h1>" in html  # the run id (the folder's name) and its path
    assert f"invoke analyze {tmp_path}/run &lt;a&amp;b&gt; --timeline" in html and "<a&b>" not in html


def test_report_links_are_url_quoted(tmp_path):
    # A report named with '#', '%' or a blank must still open from report.html (a raw '#' starts a fragment).
    run = make_run(tmp_path / "run", ranks=1)
    (run / "run_rank_0.sqlite").rename(run / "job#7 50%_rank_0.sqlite")
    html = run_analysis([run])[1].read_text()
    assert 'href="job%237%2050%25_rank_0.sqlite"' in html


def test_real_template_kernel_names_are_escaped(tmp_path, real_exports_dir):
    export = decompress("pipit_a100_cloverleaf_cuda.sqlite", real_exports_dir)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(export, run / "cloverleaf_rank_0.sqlite")
    result = analyze([run])
    names = [str(n) for n in result.analysis.top_kernels["name"][:15] if "<" in str(n)]
    assert names, "the export has C++ template kernels among its top kernels"
    html = write(result).report_html.read_text()
    shown = names[0].split("(")[0] if len(names[0]) > 60 else names[0]
    escaped = shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in html and shown not in html
    assert summarize(result.analysis, run).header.run_id in html


def test_nccllog_renders_without_the_nsys_analysis():
    """The NCCL log side knows nothing of nsyskit.analysis (the report composes it, one way): no import cycle."""
    code = (
        "import sys, nsyskit.nccllog.render.outputs, nsyskit.nccllog.render.render\n"
        "assert not [m for m in sys.modules if m.startswith('nsyskit.analysis')], sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_logs_below_a_folder_count_only_in_a_run_folder(tmp_path):
    # A report saved in a big folder (~/Downloads, /tmp) must not make the analysis walk and parse every log below
    # it; the kit's own run folders (run.json) keep their logs/ subfolders.
    folder = tmp_path / "downloads"
    (folder / "old-job" / "logs").mkdir(parents=True)
    shutil.copy(DATA / "nemo_4gpu.log", folder / "old-job" / "logs" / "rank0.log")
    analysis = Analysis(sources={0: str(folder / "profile_rank_0.sqlite")}, nsys_versions={})
    assert report.run_logs(analysis, folder) == []
    shutil.copy(DATA / "nemo_4gpu.log", folder / "beside.log")
    assert report.run_logs(analysis, folder) == [folder / "beside.log"]
    (folder / "run.json").write_text("{}")
    assert report.run_logs(analysis, folder) == [folder / "beside.log", folder / "old-job" / "logs" / "rank0.log"]


def test_table_names_break_only_at_spaces_and_after_underscores_angle_brackets_and_commas():
    from nsyskit.pages import breakable

    shown = str(breakable("void at::native::foo<float, 4>(x_y) 1MB-16MB <script>"))
    assert "<script" not in shown and "<float" not in shown  # escaped, then split
    pieces = re.findall(r'<span class="w">(.*?)</span>', shown)  # each piece is one unbreakable box
    assert pieces == ["void", "at::native::foo&lt;", "float,", "4&gt;(x_", "y)", "1MB-16MB", "&lt;", "script&gt;"]
