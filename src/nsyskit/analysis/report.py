"""Render an Analysis as a self-contained report.html (Jinja2, findings first), the PNGs beside it and analysis.json.

Other features add sections to report.html through `register_section`: a callable (analysis, run_folder) ->
Section | None, called when the report is written (the NCCL log section is one, composed below).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from jinja2 import Environment, PackageLoader, select_autoescape

from nsyskit.analysis import plots, units
from nsyskit.analysis.metrics import METRICS
from nsyskit.analysis.outputs import TIMELINE_NAME
from nsyskit.analysis.result import Analysis
from nsyskit.analysis.summary import Summary, document, summarize
from nsyskit.analysis.table import Table
from nsyskit.analysis.terminal import TEXT_COLUMNS, fmt, header

HTML_ROWS = 40  # rows of a table in report.html; the rest is in analysis.json
STYLE = (Path(__file__).parent / "templates" / "report.css").read_text()  # report.html's CSS, for the other pages


@dataclass(frozen=True)
class Section:
    """An extra report.html section: a title and trusted HTML (escape your own text)."""

    title: str
    html: str


SectionProvider = Callable[[Analysis, Path], "Section | None"]
EXTRA_SECTIONS: list[SectionProvider] = []


def register_section(provider: SectionProvider) -> SectionProvider:
    """Add a section provider to every report.html (usable as a decorator); providers returning None are skipped."""
    if provider not in EXTRA_SECTIONS:
        EXTRA_SECTIONS.append(provider)
    return provider


# ---- cells ------------------------------------------------------------------------------------------------


BREAKDOWN_COLUMNS = [
    "rank", "device", "window_ns", "busy_pct", "compute_pct", "comm_pct", "memory_pct", "idle_pct",
    "compute_comm_overlap_pct", "exposed_comm_pct",
]  # fmt: skip
NVTX_COLUMNS = ["rank", "name", "instances", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns"]
KERNEL_COLUMNS = ["name", "time_pct", "total_ns", "instances", "avg_ns", "min_ns", "max_ns", "ranks"]


# ---- report.html ------------------------------------------------------------------------------------------


def table_data(table: Table | None, columns: list[str] | None = None, limit: int = HTML_ROWS, title: str = "") -> dict:
    """A Table as template data: headers, formatted rows (at most `limit`) and a note on the rows left out."""
    if table is None or not len(table):
        return {"title": title, "headers": [], "rows": [], "more": ""}
    columns = [c for c in (columns or table.names) if c in table]
    heads = [{"label": header(c), "cls": "text" if c in TEXT_COLUMNS else ""} for c in columns]
    rows = [
        {"cells": [fmt(row[c], c) for c in columns], "flag": bool(row.get("straggler"))}
        for _, row in zip(range(limit), table.rows(), strict=False)
    ]
    more = f"{len(table) - limit:,} more rows in analysis.json" if len(table) > limit else ""
    return {"title": title, "headers": heads, "rows": rows, "more": more}


def html_table(table: Table | None, columns: list[str] | None = None, limit: int = HTML_ROWS) -> str:
    """A Table as an HTML table (escaped, report.html's markup and units) for pages other than report.html."""
    return _environment().get_template("table.html.j2").render(t=table_data(table, columns, limit))


def _figure(title: str, png: bytes | None, folder: Path, filename: str) -> list[dict]:
    if not png:
        return []
    (folder / filename).write_bytes(png)
    return [{"title": title, "data": base64.b64encode(png).decode()}]


def _ranks_for_html(ranks: Table | None) -> Table | None:
    """Up to HTML_ROWS ranks: all of a small run, else the ranks furthest from the median step time."""
    if ranks is None or len(ranks) <= HTML_ROWS or "deviation_pct" not in ranks:
        return ranks
    order = np.argsort(-np.abs(np.nan_to_num(ranks["deviation_pct"])), kind="stable")[:HTML_ROWS]
    return ranks.take(np.sort(order))


def page_sections(analysis: Analysis, summary: Summary, folder: Path, top: int) -> list[dict]:
    """The data sections of report.html (figures written beside it as PNGs too)."""
    view = summary.view
    ranks_note = (
        f"{len(analysis.ranks):,} ranks: the {HTML_ROWS} furthest from the median step time are listed"
        if analysis.ranks is not None and len(analysis.ranks) > HTML_ROWS
        else ""
    )
    sections = [
        {
            "id": "ranks", "title": "Ranks", "note": ranks_note,
            "figures": _figure("Step time per rank", plots.step_times_per_rank(analysis.steps, view.steps), folder, "step_times.png")
            + _figure("GPU time breakdown per rank", plots.breakdown_per_rank(analysis.breakdown), folder, "breakdown.png"),
            "tables": [table_data(_ranks_for_html(analysis.ranks))],
        },
        {
            "id": "communication", "title": "Communication (NCCL operations by message size)", "note": "",
            "figures": _figure("NCCL durations per message size", plots.nccl_size_histograms(analysis.nccl_ops), folder, "nccl_sizes.png"),
            "tables": [table_data(analysis.nccl_sizes)],
        },
    ]  # fmt: skip
    if analysis.has_gpu:
        first = min(analysis.kernel_summaries)
        sections.append({
            "id": "gpu", "title": "GPU", "note": "",
            "figures": _figure("Top kernels", plots.top_kernels(analysis.top_kernels), folder, "top_kernels.png"),
            "tables": [
                table_data(analysis.breakdown, BREAKDOWN_COLUMNS, title="Time breakdown per GPU (% of its window)"),
                table_data(analysis.top_kernels, KERNEL_COLUMNS, top, title=f"Top kernels, all ranks (top {top})"),
                table_data(analysis.kernel_summaries[first], limit=top, title=f"Kernel summary, rank {first} (as nsys stats)"),
                table_data(analysis.memcpy, title="Memcpy by kind"),
                table_data(analysis.nvtx_gpu, limit=top, title="NVTX ranges projected onto the GPU (kernels each launched)"),
            ],
        })  # fmt: skip
    nvtx = analysis.nvtx.sorted_by("total_ns") if analysis.nvtx is not None and len(analysis.nvtx) else None
    sections.append(
        {
            "id": "nvtx",
            "title": "NVTX ranges",
            "note": "",
            "figures": [],
            "tables": [table_data(nvtx, NVTX_COLUMNS, top)],
        }
    )
    return sections


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("nsyskit.analysis", "templates"), autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True, lstrip_blocks=True,
    )  # fmt: skip


def window_description(view) -> str:
    """'steps 2-4 of 0-4 on each of 3 ranks (warm-up dropped)': which steps the window's numbers come from."""
    steps, every = view.steps, view.all_steps
    if not len(steps):
        return "no 'step N' NVTX ranges: the whole capture"
    ranks = len(np.unique(steps["rank"]))
    shown = f"steps {steps['step'].min()}-{steps['step'].max()}"
    if len(every) != len(steps):
        shown += f" of {every['step'].min()}-{every['step'].max()}"
    return f"{shown} on {ranks} rank(s) ({view.window_source})"


def render_html(
    analysis: Analysis, summary: Summary, folder: Path, top: int = 20, timeline_notes: list[str] | None = None
) -> str:
    """report.html's text: header, findings, window metrics, links, sections with their figures, extra sections."""
    findings = [
        {
            **f.to_json(),
            "threshold_text": units.percent(f.threshold) if f.rule != "pageable_memcpy" else f"{f.threshold:.0f}",
        }
        for f in summary.findings
    ]
    metrics = [
        {"name": METRICS[name][0], "value": units.metric(name, value)}
        for name, value in summary.metrics.items()
        if not np.isnan(value)
    ]
    window_text = window_description(summary.view)
    extras = [s for s in (provider(analysis, folder) for provider in EXTRA_SECTIONS) if s is not None]
    timeline = TIMELINE_NAME if (folder / TIMELINE_NAME).exists() else None
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            header=summary.header, folder=str(folder), findings=findings, metrics=metrics, window_text=window_text, timeline=timeline,
            timeline_notes=timeline_notes or [], sections=page_sections(analysis, summary, folder, top),
            extra_sections=extras,
        )
    )  # fmt: skip


def write_report(
    analysis: Analysis,
    folder: Path,
    top: int = 20,
    summary: Summary | None = None,
    timeline_notes: list[str] | None = None,
) -> Path:
    """Write report.html (self-contained), the PNGs and analysis.json into `folder`; returns report.html's path."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = summary or summarize(analysis, folder)
    (folder / "analysis.json").write_text(json.dumps(document(analysis, summary), indent=1))
    target = folder / "report.html"
    target.write_text(render_html(analysis, summary, folder, top, timeline_notes))
    return target


# Sections of other features, composed here so that every report.html gets them.
from nsyskit.nccllog.section import nccl_log_section  # noqa: E402  (needs register_section defined above)

register_section(nccl_log_section)
