"""Analysis of nsys reports: read per-rank exports, compute the tables, write report.html (see README 'Analyze')."""

from __future__ import annotations

from pathlib import Path

from nsyskit.analysis.diff import run_diff
from nsyskit.analysis.outputs import produce, report_folder
from nsyskit.analysis.table import Table
from nsyskit.analysis.trace import Analysis, analyze_run, discover


def run_analysis(
    paths: list[str | Path], output: Path | None = None, write: bool = True, straggler_pct: float = 5.0
) -> tuple[Analysis, Path | None]:
    """Analyze a run (folders and/or report files) and, when `write`, write report.html, PNGs and analysis.json."""
    result = produce(paths, output, html=write, straggler_pct=straggler_pct)
    return result.analysis, result.report_html


__all__ = ["Analysis", "Table", "analyze_run", "discover", "produce", "report_folder", "run_analysis", "run_diff"]
