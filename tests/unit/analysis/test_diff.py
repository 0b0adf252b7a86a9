"""--diff A B: run folders or analysis.json on either side, the profiled window only, per-metric gates, Markdown."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from nsys_fixtures import Export, Kernel, Range, write_export
from real_exports import decompress
from test_report import make_run

from nsyskit.analysis import run_analysis, rundiff
from nsyskit.analysis.judge import diff
from nsyskit.errors import AnalysisError


def warm_run(folder, step_ns=1000, warmup_ns=50_000, **kwargs):
    """make_run's run with a long first step (warm-up) on every rank."""
    run = make_run(folder, step_ns=step_ns, **kwargs)
    for rank in range(kwargs.get("ranks", 2)):
        kernels, ranges = [], [Range(0, warmup_ns, "step 0")]
        for i in range(1, 5):
            t = warmup_ns + (i - 1) * step_ns
            kernels.append(Kernel(t, t + step_ns // 2, "gemm"))
            ranges.append(Range(t, t + step_ns, f"step {i}"))
        write_export(run / f"run_rank_{rank}.sqlite", Export(kernels=kernels, ranges=ranges))
    return run


def test_compares_the_window_not_the_warm_up(tmp_path):
    a = rundiff.load_side([str(warm_run(tmp_path / "a", warmup_ns=50_000))])
    b = rundiff.load_side([str(warm_run(tmp_path / "b", warmup_ns=900_000))])  # only the warm-up got slower
    table = diff.compare(a, b, {"step_time": 5})
    rows = {row["metric"]: row for row in table.rows()}
    assert rows["step_time"]["a"] == rows["step_time"]["b"] == 1000
    assert diff.regressions(table) == []


def test_either_side_may_be_a_run_folder_or_its_analysis_json(tmp_path):
    a = warm_run(tmp_path / "a")
    b = warm_run(tmp_path / "b", step_ns=1200)  # 20% slower steps
    run_analysis([a])  # writes a/analysis.json
    for left in ([str(a)], [str(a / "analysis.json")]):
        table = diff.compare(rundiff.load_side(left), rundiff.load_side([str(b)]), {"step_time": 10})
        rows = {row["metric"]: row for row in table.rows()}
        assert rows["step_time"]["change"] == pytest.approx(20.0)
        assert diff.regressions(table) == ["step_time"]


def test_reports_are_not_needed_once_analysis_json_exists(tmp_path):
    a, b = warm_run(tmp_path / "a"), warm_run(tmp_path / "b", step_ns=1100)
    for run in (a, b):
        run_analysis([run])
        for export in run.glob("*.sqlite"):
            export.unlink()  # a CI artifact keeps analysis.json, not the raw reports
    table = diff.compare(rundiff.load_side([str(a)]), rundiff.load_side([str(b)]), {"step_time": 5})
    assert diff.regressions(table) == ["step_time"]


def test_thresholds_per_metric_durations_in_percent_shares_in_points(tmp_path):
    a = diff.Side("a", {**dict.fromkeys(diff.METRICS, float("nan")), "step_time": 100.0, "exposed_comm": 10.0})
    b = diff.Side("b", {**dict.fromkeys(diff.METRICS, float("nan")), "step_time": 104.0, "exposed_comm": 16.0})
    gates = diff.parse_thresholds("step_time=5, exposed_comm=5")
    assert gates == {"step_time": 5.0, "exposed_comm": 5.0}
    assert diff.regressions(diff.compare(a, b, gates)) == ["exposed_comm"]  # +6 points; step time only +4%
    assert diff.regressions(diff.compare(b, a, gates)) == []  # better is never a regression
    assert diff.regressions(diff.compare(a, b, {})) == []  # no gate, no failure


def test_bad_thresholds_name_the_key_and_the_fix():
    with pytest.raises(AnalysisError, match="unknown metric 'step'.*step_time"):
        diff.parse_thresholds("step=5")
    with pytest.raises(AnalysisError, match="'five' is not a number"):
        diff.parse_thresholds("step_time=five")


def test_old_or_unreadable_analysis_json_is_a_one_line_error(tmp_path):
    old = tmp_path / "analysis.json"
    old.write_text(json.dumps({"sources": {}, "ranks": []}))  # written before the window metrics existed
    with pytest.raises(AnalysisError, match="older nsyskit.*invoke analyze"):
        rundiff.load_side([str(old)])
    old.write_text("{not json")
    with pytest.raises(AnalysisError, match="not readable as JSON"):
        rundiff.load_side([str(old)])


def test_markdown_summary_goes_to_the_github_step_summary(tmp_path, monkeypatch):
    a = rundiff.load_side([str(warm_run(tmp_path / "a"))])
    b = rundiff.load_side([str(warm_run(tmp_path / "b", step_ns=1300))])
    table = diff.compare(a, b, {"step_time": 10})
    text = diff.markdown(table, a, b)
    assert "**regression**: step_time" in text
    assert "| step_time | 1.00 us | 1.30 us | +30.0% | 10.0% | REGRESSION |" in text
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert diff.write_step_summary(text) == summary
    assert summary.read_text() == "earlier step\n" + text  # appended, as GitHub expects
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert diff.write_step_summary(text) is None


def test_the_summary_is_built_only_when_it_is_written(tmp_path, monkeypatch):
    a, b = warm_run(tmp_path / "a"), warm_run(tmp_path / "b", step_ns=1300)
    built = []
    summary_of = diff.DiffResult.markdown
    monkeypatch.setattr(diff.DiffResult, "markdown", lambda self: built.append(1) or summary_of(self))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    rundiff.run_diff([str(a)], [str(b)])
    assert built == []  # nothing reads it: not built
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    rundiff.run_diff([str(a)], [str(b)])
    assert built == [1] and "| step_time |" in (tmp_path / "summary.md").read_text()


AIPROFILER = ("aiprofiler_a100_baseline", "aiprofiler_a100_baseline_nvtx", "aiprofiler_a100_firstOptimization",
              "aiprofiler_a100_secondOptimization", "aiprofiler_a100_thirdOptimization")  # fmt: skip
# Runs of one model (the AI-Profiler series, nsys-ai's before/after), then the same report or model exported by
# different nsys versions, then runs of different models and schemas (the diff must hold on any two real exports).
REAL_PAIRS = [
    *itertools.combinations(AIPROFILER, 2),
    ("nsysai_mfu_2gpu_before", "nsysai_mfu_2gpu_after"),
    ("dlprof_rtx2070_nsys_profile", "dlprof_rtx2070_nsys_profile.export2022_4"),  # nsys 2022.1 vs 2022.4
    ("fuser_h200_64ee035dc_report1", "fuser_h200_ee4fcf305_report1"),  # nsys 2024.6 vs 2025.1
    ("h100_gpt2_ddp_nsys2025.3.1", "nsysai_mfu_2gpu_after"),  # nsys 2025.3 vs 2026.2, this project's own
    ("aiprofiler_a100_baseline", "nsysai_h100_2gpu_1s"),  # schema 3.0.0 vs 3.25.0
    ("pipit_a100_saxpy_mpi_cuda_rank0", "flameox_rtx3060_nsight_2025_5_2"),  # schema 2.9.1 vs 3.24.0
]


@pytest.mark.parametrize(("baseline", "candidate"), REAL_PAIRS, ids=[f"{a}-vs-{b}" for a, b in REAL_PAIRS])
def test_the_cli_diff_holds_on_real_pairs_kernels_of_one_run_only_included(
    baseline, candidate, real_exports_dir, tmp_path
):
    a, b = (str(decompress(f"{name}.sqlite", real_exports_dir)) for name in (baseline, candidate))
    summary = tmp_path / "summary.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")}
    shown = subprocess.run([sys.executable, "-m", "nsyskit", "analyze", "--diff", a, b], cwd=tmp_path,
                           env=env | {"GITHUB_STEP_SUMMARY": str(summary)}, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "Kernels whose time changed most" in shown.stdout
    as_json = subprocess.run([sys.executable, "-m", "nsyskit", "analyze", "--diff", a, b, "--json"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    kernels = json.loads(as_json.stdout)["kernels"]
    assert kernels
    markdown = summary.read_text().splitlines()
    for index, row in enumerate(kernels):
        assert row["change_ns"] == row["total_b_ns"] - row["total_a_ns"]
        if row["count_a"] == 0:  # a kernel only B ran: no share of A, the summary says 'new'
            assert row["change_pct"] is None and row["avg_a_ns"] is None
        if row["count_a"] == 0 and index < diff.CHANGES_TOP:  # the summary shows the top rows of the JSON's list
            cell = row["short_name"].replace("|", "\\|")  # as the Markdown escapes it
            cells = [line for line in markdown if line.startswith(f"| {cell} |")]
            assert any(line.endswith("(new) |") for line in cells)
    if (baseline, candidate) == ("aiprofiler_a100_baseline", "aiprofiler_a100_thirdOptimization"):
        assert any(row["count_a"] == 0 for row in kernels)  # the pair of issue 35: kernels only the third run has


def _kernel_names(export: str) -> set[str]:
    """The distinct kernel names of an export, read by SQLite itself (not through the analysis)."""
    with sqlite3.connect(export) as db:
        query = "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
        return {name for (name,) in db.execute(query)}


def test_the_json_diff_holds_every_kernels_change_the_terminal_its_top_rows(real_exports_dir):
    """A CI gate reads the JSON: the A100 series' baseline and third optimization have 76 kernels between them."""
    a, b = (str(decompress(f"{name}.sqlite", real_exports_dir)) for name in (AIPROFILER[0], AIPROFILER[-1]))
    result = rundiff.run_diff([a], [b])
    every = _kernel_names(a) | _kernel_names(b)
    listed = result.to_json()["kernels"]
    assert len(every) == 76 and sorted(row["name"] for row in listed) == sorted(every)
    changes = [abs(row["change_ns"]) for row in listed]
    assert changes == sorted(changes, reverse=True)  # largest change first, as the terminal's top rows
    assert [row["name"] for row in result.kernels.rows()] == [row["name"] for row in listed[: diff.CHANGES_TOP]]
