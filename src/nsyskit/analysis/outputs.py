"""One analysis of a run and everything made from it: its report (nsyskit.analysis.present.report), timeline.json.gz,
report.html and analysis.json."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsyskit.analysis.compute.ncclbandwidth import logged_sizes, with_fabric
from nsyskit.analysis.compute.ncclsizes import size_summary
from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.judge.summary import Summary, summarize
from nsyskit.analysis.present.report import TIMELINE_NAME, Report, compose, nccl_logs, write_report
from nsyskit.analysis.present.timeline import DEFAULT_MAX_EVENTS, RankTimeline, write_timeline, write_trace
from nsyskit.analysis.trace import analyze_run
from nsyskit.errors import AnalysisError


@dataclass
class Outputs:
    """What 'invoke analyze' made: the analysis, its summary and report, where files go and the files written."""

    paths: list[str | Path]
    folder: Path
    analysis: Analysis
    summary: Summary
    report: Report
    report_html: Path | None = None
    timeline: Path | None = None
    timeline_notes: list[str] = field(default_factory=list)
    timelines: list[RankTimeline] | None = None  # the ranks' timelines already made (by the map), else read at write


def report_folder(paths: list[str | Path]) -> Path:
    """Where report.html goes by default: the run folder given, else the folder of the first report."""
    first = Path(paths[0])
    return first if first.is_dir() else first.parent


def analyze(
    paths: list[str | Path], output: Path | None = None, straggler_pct: float = 5.0,
    progress: Callable[[int, int], None] | None = None, full_names: bool = False, strict: bool = False,
    inputs: Mapping[str, Any] | None = None,
) -> Outputs:  # fmt: skip
    """Analyze the run, summarize it (findings, window metrics, header) and compose its report for the folder its
    files go to (`full_names`: whole kernel names in the terminal; `inputs`: what the rules get beyond the reports)."""
    folder = Path(output) if output else report_folder(paths)
    analysis = analyze_run(paths, straggler_pct=straggler_pct, progress=progress, strict=strict)
    return of_analysis(paths, folder, analysis, full_names, inputs)


def of_analysis(
    paths: list[str | Path], folder: Path, analysis: Analysis, full_names: bool = False,
    inputs: Mapping[str, Any] | None = None,
) -> Outputs:  # fmt: skip
    """The summary and report of an analysis already made (by analyze_run, or merged from parts) for `folder`."""
    logs = nccl_logs(analysis, folder)  # read once: the NCCL log section, and n where the trace states none
    if logs is not None and logs.communicators and analysis.nccl is not None:
        analysis.nccl.logged = logged_sizes(logs.communicators)
        analysis.nccl_sizes = size_summary(analysis.nccl) if analysis.nccl.logged else analysis.nccl_sizes
    if (inputs or {}).get("fabric") is not None and analysis.nccl_sizes is not None:  # --fabric: the ceiling per row
        analysis.nccl_sizes, notes = with_fabric(analysis.nccl_sizes, inputs["fabric"])
        analysis.warnings.extend(notes)
    summary = summarize(analysis, folder, inputs)
    return Outputs(list(paths), folder, analysis, summary, compose(analysis, summary, folder, full_names, logs))


def write(
    result: Outputs, html: bool = True, timeline: bool = False, max_events: int = DEFAULT_MAX_EVENTS,
    progress: Callable[[int, int], None] | None = None,
) -> Outputs:  # fmt: skip
    """Write the timeline first (report.html links it) when asked, then report.html, the PNGs and analysis.json.

    A folder that cannot be written is one AnalysisError saying the analysis itself is complete.
    """
    if timeline:
        result.timeline = result.folder / TIMELINE_NAME
        with _unwritable(result.folder, TIMELINE_NAME):
            result.timeline_notes = (
                write_timeline(result.paths, result.timeline, max_events, progress) if result.timelines is None
                else write_trace(iter(result.timelines), result.timeline)
            )  # fmt: skip
    if html:
        with _unwritable(result.folder, "report.html"):
            result.report_html = write_report(result.report, timeline_notes=result.timeline_notes)
    return result


@contextlib.contextmanager
def _unwritable(folder: Path, name: str) -> Iterator[None]:
    """An OSError while writing `name` as one AnalysisError: the analysis (printed by then) is complete."""
    try:
        yield
    except OSError as exc:
        raise AnalysisError(
            folder, f"{name} could not be written ({exc.strerror or exc}); the analysis above is complete",
            "pass --output with a writable folder, or --no-html",
        ) from None  # fmt: skip


def produce(
    paths: list[str | Path], output: Path | None = None, html: bool = True, straggler_pct: float = 5.0,
    timeline: bool = False, max_events: int = DEFAULT_MAX_EVENTS, progress: Callable[[int, int], None] | None = None,
) -> Outputs:  # fmt: skip
    """analyze() then write(), for callers that print nothing in between (the demo, run_analysis)."""
    return write(analyze(paths, output, straggler_pct), html, timeline, max_events, progress)
