"""One analysis of a run and everything written from it: summary, timeline.json.gz, report.html, analysis.json."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.analysis.summary import Summary, summarize
from nsyskit.analysis.timeline import DEFAULT_MAX_EVENTS, write_timeline
from nsyskit.analysis.trace import Analysis, analyze_run

TIMELINE_NAME = "timeline.json.gz"


@dataclass
class Outputs:
    """What 'invoke analyze' made: the analysis, its summary and the files written (None when not asked)."""

    analysis: Analysis
    summary: Summary
    report: Path | None = None
    timeline: Path | None = None
    timeline_notes: list[str] = field(default_factory=list)


def report_folder(paths: list[str | Path]) -> Path:
    """Where report.html goes by default: the run folder given, else the folder of the first report."""
    first = Path(paths[0])
    return first if first.is_dir() else first.parent


def produce(
    paths: list[str | Path], output: Path | None = None, html: bool = True, straggler_pct: float = 5.0,
    timeline: bool = False, max_events: int = DEFAULT_MAX_EVENTS, progress: Callable[[int, int], None] | None = None,
) -> Outputs:  # fmt: skip
    """Analyze the run, write the timeline first (report.html links it) when asked, then report.html and analysis.json."""
    folder = Path(output) if output else report_folder(paths)
    analysis = analyze_run(paths, straggler_pct=straggler_pct)
    result = Outputs(analysis, summarize(analysis, folder))
    if timeline:
        result.timeline = folder / TIMELINE_NAME
        result.timeline_notes = write_timeline(paths, result.timeline, max_events, progress)
    if html:
        from nsyskit.analysis.report import write_report  # matplotlib and Jinja2 only when a report is written

        result.report = write_report(analysis, folder, summary=result.summary, timeline_notes=result.timeline_notes)
    return result
