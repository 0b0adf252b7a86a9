"""Analysis of nsys reports: read per-rank exports, compute the tables, judge them, present them (docs/analysis.md).

The stages are subpackages, in the order data flows, and import only the stages before them:
read (exports, runs) -> compute (tables, metrics) -> judge (findings, diff) -> present (terminal, report.html,
timeline); profilers/ holds the other profilers' readers. The modules at this level are the facade the CLI uses:
trace.py (a run's per-rank exports analyzed), outputs.py (one analysis and the files made from it), dispatch.py
(which profiler a run used), process.py (the process's malloc and BLAS settings); mapreduce/ holds the map of
reports into part files and their merge (analyze-part, analyze-merge).
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from nsyskit.analysis.process import load_numpy_single_threaded

if TYPE_CHECKING:
    from nsyskit.analysis.trace import Analysis

# The public names by module, imported when first used: `invoke analyze --json` should not pay for the diff's,
# the report's or the timeline's start-up.
_WHERE = {
    "analyze_run": "trace", "Analysis": "trace", "produce": "outputs", "report_folder": "outputs",
    "profiler_of": "dispatch", "run_profiler_analysis": "dispatch", "print_profiler_analysis": "dispatch",
    "Table": "compute.table", "summarize": "judge.summary", "run_diff": "rundiff", "diff_table": "present.difftable",
    "compose": "present.report", "print_report": "present.report", "render_json": "present.report",
    "DEFAULT_MAX_EVENTS": "present.timeline", "run_recipes": "profilers.recipes",
    "map_reports": "mapreduce.parts", "merge_parts": "mapreduce.parts", "merged_timelines": "mapreduce.timelines",
    "merge_block": "mapreduce.partial", "merged_parts": "mapreduce.sidebyside", "default_workers": "mapreduce.sidebyside",
    "grouped": "present.grouping",
}  # fmt: skip


def __getattr__(name: str):
    if name in _WHERE:
        load_numpy_single_threaded()  # before the stage imports numpy (process.py says why); 'invoke --list' loads none
        return getattr(import_module(f"nsyskit.analysis.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'nsyskit.analysis' has no attribute {name!r}")


def run_analysis(
    paths: list[str | Path], output: Path | None = None, write: bool = True, straggler_pct: float = 5.0
) -> tuple[Analysis, Path | None]:
    """Analyze a run (folders and/or report files) and, when `write`, write report.html, PNGs and analysis.json."""
    load_numpy_single_threaded()
    from nsyskit.analysis.outputs import produce

    result = produce(paths, output, html=write, straggler_pct=straggler_pct)
    return result.analysis, result.report_html


# (discover() is nsyskit.analysis.read.discover.discover: the package's attribute of that name is the module)
__all__ = ["run_analysis", *_WHERE]
