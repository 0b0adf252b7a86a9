"""Render an Analysis: rich terminal tables, a self-contained report.html with embedded plots, the PNGs beside it.

Other features add sections to report.html through `register_section` (e.g. the NCCL log analysis):
a callable (analysis, run_folder) -> Section | None, called when the report is written.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from nsyskit.analysis import plots
from nsyskit.analysis.table import Table
from nsyskit.analysis.trace import Analysis


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


# ---- terminal ---------------------------------------------------------------------------------------------


def _fmt(value, name: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        if name.endswith("_pct"):
            return f"{value:.1f}"
        if name.endswith("_ns"):
            return f"{value / 1e6:,.3f}"
        return f"{value:,.2f}"
    if isinstance(value, int) and name.endswith("_ns"):
        return f"{value / 1e6:,.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _header(name: str) -> str:
    return name.replace("_ns", " (ms)").replace("_pct", " %").replace("_gbps", " GB/s").replace("_", " ")


def rich_table(title: str, table: Table, columns: list[str] | None = None, limit: int | None = None) -> RichTable:
    """A rich table of some columns of a Table (ns shown as ms)."""
    columns = [c for c in (columns or table.names) if c in table]
    out = RichTable(title=title, title_justify="left")
    for name in columns:
        out.add_column(
            _header(name),
            justify="left" if name in ("name", "kind", "op", "bucket", "host") else "right",
            overflow="fold",
        )
    for i, row in enumerate(table.rows()):
        if limit is not None and i >= limit:
            break
        out.add_row(*(_fmt(row[c], c) for c in columns), style="bold red" if row.get("straggler") else "")
    return out


def print_analysis(analysis: Analysis, console: Console, top: int = 15) -> None:
    """The analysis as terminal tables."""
    if analysis.has_gpu:
        console.print(
            rich_table(
                f"Top kernels, all ranks (top {top})",
                analysis.top_kernels,
                ["name", "time_pct", "total_ns", "instances", "avg_ns", "min_ns", "max_ns", "ranks"],
                top,
            )
        )
        first = min(analysis.kernel_summaries)
        console.print(
            rich_table(f"Kernel summary, rank {first} (as nsys stats)", analysis.kernel_summaries[first], limit=top)
        )
        console.print(
            rich_table(
                "GPU time breakdown per rank/GPU (% of the profiled window)",
                analysis.breakdown,
                [
                    "rank",
                    "device",
                    "window_ns",
                    "busy_pct",
                    "compute_pct",
                    "comm_pct",
                    "memory_pct",
                    "idle_pct",
                    "compute_comm_overlap_pct",
                    "compute_memory_overlap_pct",
                    "comm_memory_overlap_pct",
                    "exposed_comm_pct",
                ],
            )
        )
        if analysis.memcpy is not None and len(analysis.memcpy):
            console.print(rich_table("Memcpy by kind", analysis.memcpy))
    else:
        console.print(
            "no GPU activity in these reports (CPU-only capture): kernel, breakdown and memcpy tables are empty"
        )
    if analysis.nvtx is not None and len(analysis.nvtx):
        console.print(
            rich_table(
                f"NVTX ranges (top {top})",
                analysis.nvtx.sorted_by("total_ns"),
                ["rank", "name", "instances", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns"],
                top,
            )
        )
    if analysis.nccl_sizes is not None and len(analysis.nccl_sizes):
        console.print(rich_table("NCCL operations by message size", analysis.nccl_sizes))
    console.print(rich_table("Ranks (stragglers in red)", analysis.ranks))


# ---- files ------------------------------------------------------------------------------------------------

FIGURES = (
    ("breakdown.png", "GPU time breakdown per rank", lambda a: plots.breakdown_per_rank(a.breakdown)),
    ("nccl_sizes.png", "NCCL durations per message size", lambda a: plots.nccl_size_histograms(a.nccl_ops)),
    ("top_kernels.png", "Top kernels", lambda a: plots.top_kernels(a.top_kernels)),
    ("step_times.png", "Step time per rank", lambda a: plots.step_times_per_rank(a.steps)),
)


def write_report(analysis: Analysis, folder: Path, top: int = 20) -> Path:
    """Write report.html (self-contained), the PNGs and analysis.json into `folder`; returns report.html's path."""
    folder.mkdir(parents=True, exist_ok=True)
    figures: list[tuple[str, str]] = []
    for filename, title, render in FIGURES:
        png = render(analysis)
        if png:
            (folder / filename).write_bytes(png)
            figures.append((title, base64.b64encode(png).decode()))
    (folder / "analysis.json").write_text(json.dumps(analysis.to_json(), indent=1))
    sections = [s for s in (provider(analysis, folder) for provider in EXTRA_SECTIONS) if s is not None]
    page = _html_page(analysis, figures, sections, top)
    target = folder / "report.html"
    target.write_text(page)
    return target


def html_table(table: Table | None, columns: list[str] | None = None, limit: int | None = None) -> str:
    """A Table as an HTML table (escaped)."""
    if table is None or not len(table):
        return "<p class='empty'>none</p>"
    columns = [c for c in (columns or table.names) if c in table]
    head = "".join(f"<th>{html.escape(_header(c))}</th>" for c in columns)
    body = []
    for i, row in enumerate(table.rows()):
        if limit is not None and i >= limit:
            break
        cls = " class='straggler'" if row.get("straggler") else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_fmt(row[c], c))}</td>" for c in columns) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}tr.straggler{background:#fdd;font-weight:bold}img{max-width:100%}.empty{color:#888}"""


def _html_page(analysis: Analysis, figures: list[tuple[str, str]], sections: list[Section], top: int) -> str:
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>nsyskit analysis</title><style>{STYLE}</style></head><body>"
    ]
    parts.append("<h1>nsyskit analysis</h1>")
    sources = "".join(
        f"<li>rank {r}: {html.escape(s)} (nsys {html.escape(analysis.nsys_versions.get(r, '') or '?')})</li>"
        for r, s in analysis.sources.items()
    )
    parts.append(f"<ul>{sources}</ul>")
    parts.append("<h2>Ranks</h2>" + html_table(analysis.ranks))
    for title, data in figures:
        parts.append(
            f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
        )
    if analysis.has_gpu:
        parts.append("<h2>GPU time breakdown</h2>" + html_table(analysis.breakdown))
        parts.append(f"<h2>Top kernels (all ranks, top {top})</h2>" + html_table(analysis.top_kernels, limit=top))
        for rank, table in analysis.kernel_summaries.items():
            parts.append(f"<h2>Kernel summary, rank {rank}</h2>" + html_table(table, limit=top))
        parts.append("<h2>Memcpy by kind</h2>" + html_table(analysis.memcpy))
    parts.append("<h2>NCCL operations by message size</h2>" + html_table(analysis.nccl_sizes))
    parts.append(
        "<h2>NVTX ranges</h2>"
        + html_table(
            analysis.nvtx,
            ["rank", "name", "instances", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns", "stddev_ns"],
        )
    )
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>{section.html}")
    parts.append("</body></html>")
    return "\n".join(parts)


# Sections of other features, registered here so that every report.html gets them.
from nsyskit.nccllog.section import nccl_log_section  # noqa: E402  (needs register_section defined above)

register_section(nccl_log_section)
