"""--diff A B: run folders or analysis.json on either side, the profiled window only, per-metric gates, Markdown."""

from __future__ import annotations

import json

import pytest
from nsys_fixtures import Export, Kernel, Range, write_export
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
