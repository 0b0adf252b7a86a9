"""Analysis of nsys reports: read per-rank exports, compute the tables, write report.html (see README 'Analyze')."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsyskit.analysis.trace import Analysis

# The public names by module, imported when first used: `invoke analyze --json` should not pay for the diff's,
# the report's or the timeline's start-up.
_WHERE = {
    "run_diff": "diff", "produce": "outputs", "report_folder": "outputs", "Table": "table", "Analysis": "trace",
    "analyze_run": "trace",
}  # fmt: skip


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"nsyskit.analysis.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'nsyskit.analysis' has no attribute {name!r}")


def run_analysis(
    paths: list[str | Path], output: Path | None = None, write: bool = True, straggler_pct: float = 5.0
) -> tuple[Analysis, Path | None]:
    """Analyze a run (folders and/or report files) and, when `write`, write report.html, PNGs and analysis.json."""
    from nsyskit.analysis.outputs import produce

    result = produce(paths, output, html=write, straggler_pct=straggler_pct)
    return result.analysis, result.report_html


# (discover() is nsyskit.analysis.discover.discover: the package's attribute of that name is the module)
__all__ = ["Analysis", "Table", "analyze_run", "produce", "report_folder", "run_analysis", "run_diff"]
