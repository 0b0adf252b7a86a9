"""The NCCL log section of report.html: found from the run folder's logs, absent when no log holds NCCL lines."""

from __future__ import annotations

import shutil
from pathlib import Path

from nsyskit.analysis import report as analysis_report
from nsyskit.analysis.trace import Analysis
from nsyskit.nccllog.section import TITLE, nccl_log_section, with_section

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"


def test_section_from_the_run_folder_logs(tmp_path):
    shutil.copy(DATA / "kit_mpirun.log", tmp_path / "rank0.log")
    section = nccl_log_section(Analysis(sources={}, nsys_versions={}), tmp_path)
    assert section.title == TITLE
    assert section.html.startswith('<section class="nsyskit-nccl-log"') and "<h2>" not in section.html
    assert "<td>NVLS</td>" in section.html and "<td>AllReduce</td>" in section.html


def test_section_finds_logs_beside_the_analyzed_reports(tmp_path):
    run, output = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    output.mkdir()
    shutil.copy(DATA / "nemo_4gpu.log", run / "stdout.log")
    analysis = Analysis(sources={0: str(run / "profile_rank_0.sqlite")}, nsys_versions={})
    assert nccl_log_section(analysis, output).title == TITLE


def test_no_section_without_nccl_lines(tmp_path):
    assert nccl_log_section(Analysis(sources={}, nsys_versions={}), tmp_path) is None
    (tmp_path / "rank0.log").write_text("[rank 0] step 1/2 loss=1.0 step_ms=5.0 tokens_per_s=10\n")
    assert nccl_log_section(Analysis(sources={}, nsys_versions={}), tmp_path) is None


def test_report_html_gets_the_section_through_the_hook(tmp_path, monkeypatch):
    monkeypatch.setattr(analysis_report, "EXTRA_SECTIONS", [])
    analysis_report.register_section(nccl_log_section)
    analysis_report.register_section(nccl_log_section)  # once only
    assert [nccl_log_section] == analysis_report.EXTRA_SECTIONS
    shutil.copy(DATA / "srun_megatron.log", tmp_path / "slurm-42.out")
    page = analysis_report.write_report(Analysis(sources={}, nsys_versions={}), tmp_path).read_text()
    assert f"<h2>{TITLE}</h2>" in page and "2.18.5+cuda12.2" in page and page.count('id="nccl-log"') == 1


def test_with_section_inserts_once_and_replaces():
    page = "<html><body><h1>nsyskit analysis</h1><h2>Ranks</h2><table></table></body></html>"
    first = with_section(page, '<section class="nsyskit-nccl-log" id="nccl-log"><p>one</p></section>')
    assert first.endswith("</section>\n</body></html>") and first.count(f"<h2>{TITLE}</h2>") == 1
    second = with_section(first, '<section class="nsyskit-nccl-log" id="nccl-log"><p>two</p></section>')
    assert "<p>two</p>" in second and "<p>one</p>" not in second and second.count(f"<h2>{TITLE}</h2>") == 1
    assert second.startswith("<html><body><h1>nsyskit analysis</h1><h2>Ranks</h2><table></table>")
