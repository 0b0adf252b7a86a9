"""Analysis of nsys reports: read per-rank exports, compute the tables, write report.html (see README 'Analyze')."""

from __future__ import annotations

from pathlib import Path

from nsyskit.analysis.diff import compare
from nsyskit.analysis.table import Table
from nsyskit.analysis.trace import Analysis, analyze_run, discover


def report_folder(paths: list[str | Path]) -> Path:
    """Where report.html goes by default: the run folder given, else the folder of the first report."""
    first = Path(paths[0])
    return first if first.is_dir() else first.parent


def run_analysis(
    paths: list[str | Path], output: Path | None = None, write: bool = True, straggler_pct: float = 5.0
) -> tuple[Analysis, Path | None]:
    """Analyze a run (folders and/or report files) and, when `write`, write report.html, PNGs and analysis.json."""
    from nsyskit.analysis.report import write_report  # matplotlib only when a report is written

    analysis = analyze_run(paths, straggler_pct=straggler_pct)
    target = write_report(analysis, output or report_folder(paths)) if write else None
    return analysis, target


def diff_runs(baseline: list[str | Path], candidate: list[str | Path], threshold_pct: float | None = None) -> Table:
    """Metric-by-metric comparison of two runs (baseline A, candidate B), regressions flagged past threshold_pct."""
    return compare(analyze_run(baseline), analyze_run(candidate), threshold_pct)


__all__ = ["Analysis", "Table", "analyze_run", "compare", "diff_runs", "discover", "report_folder", "run_analysis"]
