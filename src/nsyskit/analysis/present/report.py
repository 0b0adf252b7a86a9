"""The report of 'invoke analyze': the sections it shows, named in one list (compose), and its JSON and HTML forms.

Words used the same way in nsyskit.analysis and nsyskit.nccllog:
- analysis: the data computed from the inputs, JSON-ready (`Analysis` of the nsys reports, `NcclLogAnalysis` of
  the NCCL logs);
- section: one titled part of a report, made from an analysis (nsyskit.analysis.present.sections);
- report: the sections an output shows, in order (`Report`; report.html is its HTML form, analysis.json its JSON);
- render: turning an analysis, a section or a report into text: terminal tables (rich), HTML (Jinja2 templates,
  autoescaped, nsyskit.pages) or JSON.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.judge.summary import Summary
from nsyskit.analysis.present import counterview, sections
from nsyskit.analysis.present.grouping import grouped
from nsyskit.analysis.present.pernode import PER_NODE_FROM, Nodes, nodes_of
from nsyskit.analysis.present.sections import Section
from nsyskit.errors import NsyskitError

if TYPE_CHECKING:
    from rich.console import Console

    from nsyskit.nccllog.tables.analysis import NcclLogAnalysis

SCHEMA_VERSION = 2  # analysis.json: 2 = run, findings and metrics first (what --diff reads)
TIMELINE_NAME = "timeline.json.gz"


@dataclass
class Report:
    """The sections of one run's report, in the order every output shows them, and where its files go."""

    analysis: Analysis
    summary: Summary
    folder: Path
    sections: list[Section]
    data: Callable[[], dict[str, Any]]  # the analysis' JSON tables, computed once when first asked for


def run_logs(analysis: Analysis, folder: Path) -> list[Path]:
    """The run's log files: anywhere under a run folder (one with run.json: the kit wrote it, logs/ and all), else
    beside the analyzed reports and in the report's folder, not below (a report saved in ~/Downloads or /tmp must not
    make the analysis walk and parse every log under it)."""
    from nsyskit.nccllog.scan.inputs import logs_in_folder
    from nsyskit.runrecord import RUN_JSON

    folders = {Path(folder)} | {Path(source).parent for source in analysis.sources.values()}
    found: dict[Path, None] = {}
    for each in sorted(folders):
        if each.is_dir():
            found.update(dict.fromkeys(logs_in_folder(each, recursive=(each / RUN_JSON).is_file())))
    return list(found)


def nccl_logs(analysis: Analysis, folder: Path) -> NcclLogAnalysis | None:
    """The analysis of the run's NCCL logs, or None when no log holds an NCCL INFO line (CPU runs, NCCL_DEBUG off).

    Logs that cannot be read leave the section out with a warning: the nsys analysis is still shown whole.
    """
    logs = run_logs(analysis, folder)
    if not logs:
        return None
    from nsyskit.nccllog.tables.analysis import analyze

    try:
        result = analyze(logs)
    except (NsyskitError, OSError) as exc:
        why = exc.one_line() if isinstance(exc, NsyskitError) else f"{exc.filename}: {exc.strerror or exc}"
        analysis.warnings.append(
            f"the NCCL log section was left out ({why}); fix: make the logs readable, or run 'invoke nccl-log' on them"
        )
        return None
    return result if result.lines["nccl_info"] else None


UNREAD = object()  # compose's logs when the caller has not read them


def compose(analysis: Analysis, summary: Summary, folder: Path, full_names: bool = False, logs=UNREAD) -> Report:
    """The report's sections: findings, kernels, GPU breakdown and overlap, NVTX, NCCL message sizes, ranks, the
    sampled counters, and the NCCL logs' section when the run folder holds NCCL logs (`logs`: nccl_logs' result,
    when already read)."""
    data = functools.cache(analysis.to_json)  # computed once, and only when JSON is written
    nodes = run_nodes(analysis, summary)
    shown = [
        sections.findings(summary),
        sections.kernels(analysis, data, full_names),
        sections.breakdown(analysis, data, nodes),
        sections.nvtx(analysis, data),
        sections.communication(analysis, data, summary.view.inputs.get("fabric")),
        sections.ranks(analysis, summary, data, nodes),
        counterview.section(analysis, data, nodes),
    ]
    logs = nccl_logs(analysis, folder) if logs is UNREAD else logs
    if logs is not None:
        shown.append(sections.nccl_log(logs))
    return Report(analysis, summary, Path(folder), shown, data)


def run_nodes(analysis: Analysis, summary: Summary) -> Nodes | None:
    """The run's nodes when it has more than PER_NODE_FROM ranks (its heat maps then draw nodes), else None."""
    if analysis.ranks is None or len(analysis.ranks) <= PER_NODE_FROM:
        return None
    return nodes_of(analysis.ranks, summary.header.ranks_per_node)


def print_report(report: Report, console: Console, top: int = 15) -> None:
    """The report on the terminal: each section's tables, at most `top` rows each."""
    for section in report.sections:
        section.terminal(console, top)


def render_json(report: Report) -> dict[str, Any]:
    """The report as JSON data (analysis.json, --json): schema, then each section's keys, then the run's sources,
    nsys versions, the count of rows left out per table and the warnings."""
    document: dict[str, Any] = {"schema": SCHEMA_VERSION}
    for section in report.sections:
        document.update(section.json())
    whole = report.data()
    for key in ("sources", "nsys_versions", "more_rows", "warnings"):
        document[key] = whole[key]
    return document


def window_description(view) -> str:
    """'steps 2-4 of 0-4 on each of 3 ranks (warm-up dropped)': which steps the window's numbers come from."""
    steps, every = view.steps, view.all_steps
    if not len(steps):
        return "no 'step N' NVTX ranges: the whole capture"
    ranks = len(np.unique(steps["rank"]))
    shown = f"steps {steps['step'].min()}-{steps['step'].max()}"
    if len(every) != len(steps):
        shown += f" of {every['step'].min()}-{every['step'].max()}"
    return f"{shown} on {ranks:,} rank(s) ({view.window_source})"


def render_html(report: Report, top: int = 20, timeline_notes: list[str] | None = None) -> str:
    """report.html's text: run header and links, then every section (its figures written into the folder)."""
    from nsyskit import pages

    folder = report.folder
    shown = [
        {"id": s.id, "title": s.title, "template": s.template, "data": s.html(folder, top)} for s in report.sections
    ]
    return pages.render(
        "report.html.j2", header=report.summary.header, folder=str(folder), sections=shown,
        window_text=window_description(report.summary.view),
        timeline_notes=grouped(timeline_notes or [], len(report.analysis.sources)),
        timeline=TIMELINE_NAME if (folder / TIMELINE_NAME).exists() else None,
    )  # fmt: skip


def write_report(report: Report, top: int = 20, timeline_notes: list[str] | None = None) -> Path:
    """Write analysis.json, then report.html (self-contained) and its PNGs into the report's folder; report.html's path."""
    report.folder.mkdir(parents=True, exist_ok=True)
    (report.folder / "analysis.json").write_text(json.dumps(render_json(report), indent=1))
    target = report.folder / "report.html"
    target.write_text(render_html(report, top, timeline_notes))
    return target
