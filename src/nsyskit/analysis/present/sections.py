"""The sections of 'invoke analyze''s report, one builder each: a Section holds its terminal, HTML and JSON forms.

Each form is a function called only when that output is made, so the terminal needs neither matplotlib nor Jinja2
and --json needs neither rich. The report (nsyskit.analysis.present.report) names which sections it shows, in which order.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.metrics import METRICS
from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge.finding import ranks_text
from nsyskit.analysis.judge.summary import Summary, print_findings, stake_text
from nsyskit.analysis.present.pernode import Nodes, node_table
from nsyskit.analysis.present.perrank import more_note, ranks_that_matter, spread_line
from nsyskit.analysis.present.terminal import BREAKDOWN_SHOWN, TEXT_COLUMNS, displayed, fmt, header, rich_table

if TYPE_CHECKING:
    from rich.console import Console

    from nsyskit.nccllog.tables.analysis import NcclLogAnalysis

FULL_ROWS = 5000  # a longer table is in analysis.json only (report.html stays a page, not a database)
HTML_ROWS = 40  # rows of a table in report.html; the rest is in analysis.json
BREAKDOWN_COLUMNS = [
    "rank", "device", "window_ns", "busy_pct", "compute_pct", "comm_pct", "memory_pct", "idle_pct",
    "compute_comm_overlap_pct", "exposed_comm_pct",
]  # fmt: skip
NVTX_COLUMNS = ["rank", "name", "instances", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns"]
KERNEL_COLUMNS = ["name", "time_pct", "total_ns", "instances", "avg_ns", "min_ns", "max_ns", "ranks"]
NO_NVTX = ("none in these reports; the kit's example marks its steps and phases: annotate your code with "
           "torch.cuda.nvtx.range or the nvtx package, and record with nsys -t nvtx")
NO_COLLECTIVES = ("none in these reports: one rank, or no NCCL kernels and no NCCL/gloo NVTX ranges were recorded "
                  "(record with nsys -t cuda,nvtx; NCCL marks its calls with NVTX from 2.x)")
NO_GPU = "no GPU activity in these reports (CPU-only capture): kernel, breakdown and memcpy tables are empty"
NCCL_LOG_TITLE = "NCCL log analysis (NCCL_DEBUG=INFO)"
NODES_TITLE = "Nodes (each node's slowest and most idle rank)"
NODE_COLUMNS = ["node", "rank_range", "slowest_rank", "step_mean_max_ns", "step_mean_median_ns", "most_idle_rank",
                "idle_max_pct"]  # fmt: skip


@dataclass(frozen=True)
class Section:
    """One titled part of the report: how it prints (console, top rows), its report.html data (template context,
    figures written into the folder) and its analysis.json keys."""

    id: str
    title: str
    terminal: Callable[[Console, int], None]
    html: Callable[[Path, int], dict[str, Any]]
    json: Callable[[], dict[str, Any]]
    template: str = "section.html.j2"


def table_data(
    table: Table | None, columns: list[str] | None = None, limit: int = HTML_ROWS, title: str = "", empty: str = "",
    per_rank: str = "", caption: str = "", cells: Callable[[Table], Table] | None = None,
) -> dict:
    """A Table as template data: headers, formatted rows (at most `limit`: for a `per_rank` kind, the ranks that
    matter and the spread) and, when rows were left out, the whole table one click away (up to FULL_ROWS rows;
    beyond, analysis.json); an empty table says `empty` (why, and what to do) instead. `caption`: how to read the
    table (units, formulas), in small text under it. `cells`: the rows as a person reads them (counters in their
    units), applied to the rows shown only (147,456 counter rows at 16,384 ranks: formatting them all took ~15 s)."""
    if table is None or not len(table):
        return {"title": title, "headers": [], "rows": [], "more": "", "empty": empty, "caption": ""}
    shown = displayed(table, columns)  # kernel names short, the full one as the cell's title (shown on hover)
    heads = [{"label": header(c), "cls": _html_class(c)} for c, _ in shown]

    def rows_of(part: Table, count: int) -> list[dict]:
        part = part.take(slice(0, count)) if cells is None else cells(part.take(slice(0, count)))
        return [
            {
                "cells": [fmt(row[values], c) for c, values in shown],
                "titles": [row["name"] if values == "short_name" else "" for _, values in shown],
                "flag": bool(row.get("straggler")),
            }
            for _, row in zip(range(count), part.rows(), strict=False)
        ]

    first, why = ranks_that_matter(table, per_rank, limit) if per_rank else (table, "")
    data = {"title": title, "headers": heads, "rows": rows_of(first, limit), "more": "", "all_rows": [], "caption": caption}
    if len(table) > limit:
        data["more"] = f"{len(table):,} rows" + (f" (shown: {why}; {spread_line(table, per_rank)})" if why else "")
        if len(table) <= FULL_ROWS:
            data["all_rows"] = rows_of(table, len(table))
        else:
            data["more"] += "; every row is in analysis.json"
    return data


# report.html's text columns: left-aligned, wrapping at spaces and name boundaries only; names get room first.
HTML_TEXT_COLUMNS = (*TEXT_COLUMNS, "device", "lowest", "highest", "unit")
NAME_COLUMNS = ("name", "metric")


def _html_class(column: str) -> str:
    """The CSS class of a report.html column: 'text name' for names, 'text' for other words, '' for numbers."""
    if column in NAME_COLUMNS:
        return "text name"
    return "text" if column in HTML_TEXT_COLUMNS else ""


def figure(title: str, png: bytes | None, folder: Path, filename: str) -> list[dict]:
    """A chart as template data (inline PNG), written beside report.html as `filename` too; none without a PNG."""
    if not png:
        return []
    (folder / filename).write_bytes(png)
    return [{"title": title, "data": base64.b64encode(png).decode()}]


def _print(
    console: Console, title: str, table: Table | None, columns: list[str] | None, limit: int | None,
    full_names: bool = False, empty: str = "",
) -> None:  # fmt: skip
    """A table; an empty one is one line saying why and what to do (`empty`), or nothing when there is no reason."""
    if table is not None and len(table):
        console.print(rich_table(title, table, columns, limit, full_names))
    elif empty:
        console.print(f"{title}: {empty}", markup=False)


def _print_per_rank(console: Console, title: str, table: Table | None, columns: list[str] | None, kind: str,
                    top: int) -> None:  # fmt: skip
    """A per-rank table: all rows of a small run; at scale the ranks that matter, the spread and the rows left."""
    if table is None or not len(table):
        return
    shown, why = ranks_that_matter(table, kind, top)
    console.print(rich_table(title, shown, columns))
    if why:
        console.print(f"  {spread_line(table, kind)}", markup=False)
        console.print(f"  {more_note(table, shown, why)} (--top N shows more)", markup=False)


def _tables(data: Callable[[], dict], *names: str) -> Callable[[], dict]:
    """The JSON form of a section: the analysis' tables it shows, by their analysis.json keys."""
    return lambda: {name: data()[name] for name in names if name in data()}


def _finite(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def findings(summary: Summary) -> Section:
    """The findings and the profiled window's metrics: what every output opens with."""

    def html(folder: Path, top: int) -> dict:
        rows = [
            {**f.to_json(), "threshold_text": f.threshold_text or units.percent(f.threshold),
             "stake_text": stake_text(f), "where": ranks_text(f.ranks, len(summary.view.ranks)) if f.ranks else ""}
            for f in summary.findings
        ]  # fmt: skip
        metrics = [
            {"name": METRICS[name][0], "value": units.metric(name, value)}
            for name, value in summary.metrics.items()
            if not np.isnan(value)
        ]
        return {"findings": rows, "metrics": metrics}

    def json() -> dict:
        metrics = {name: _finite(value) for name, value in summary.metrics.items()}
        return {
            "run": summary.header.to_json(),
            "findings": [f.to_json() for f in summary.findings],
            "metrics": metrics,
        }

    return Section("findings", "Findings", lambda console, top: print_findings(summary, console), html, json,
                   "findings.html.j2")  # fmt: skip


def kernels(analysis: Analysis, data: Callable[[], dict], full_names: bool = False) -> Section:
    """The kernels with the most GPU time over all ranks, and the first rank's kernel summary (as nsys stats); the
    terminal shows short kernel names unless `full_names`."""
    first = min(analysis.kernel_summaries) if analysis.kernel_summaries else None

    def terminal(console: Console, top: int) -> None:
        if not analysis.has_gpu:
            console.print(NO_GPU)
            return
        _print(console, f"Top kernels, all ranks (top {top})", analysis.top_kernels, KERNEL_COLUMNS, top, full_names)
        summary = analysis.kernel_summaries[first]
        _print(console, f"Kernel summary, rank {first} (as nsys stats)", summary, None, top, full_names)

    def html(folder: Path, top: int) -> dict:
        if not analysis.has_gpu:
            return {"note": NO_GPU}
        from nsyskit.analysis.present import plots

        return {
            "figures": figure("Top kernels", plots.top_kernels(analysis.top_kernels), folder, "top_kernels.png"),
            "tables": [
                table_data(analysis.top_kernels, KERNEL_COLUMNS, top, title=f"Top kernels, all ranks (top {top})"),
                table_data(analysis.kernel_summaries[first], limit=top, title=f"Kernel summary, rank {first} (as nsys stats)"),
            ],
        }  # fmt: skip

    return Section("kernels", "Kernels", terminal, html, _tables(data, "kernel_summary", "top_kernels"))


def breakdown(analysis: Analysis, data: Callable[[], dict], nodes: Nodes | None = None) -> Section:
    """Compute, communication, memory and idle time per GPU, their overlaps, and the memcpy kinds (with `nodes`, the
    heatmap draws a column per node)."""

    def terminal(console: Console, top: int) -> None:
        if analysis.has_gpu:
            title = "GPU time breakdown per rank/GPU (% of the profiled window)"
            _print_per_rank(console, title, analysis.breakdown, BREAKDOWN_SHOWN, "breakdown", top)
            _print_per_rank(console, "Memcpy by kind", analysis.memcpy, None, "memcpy", top)

    def html(folder: Path, top: int) -> dict:
        if not analysis.has_gpu:
            return {"note": NO_GPU}
        from nsyskit.analysis.present import plots

        png = plots.breakdown_per_rank(analysis.breakdown, nodes)
        return {
            "figures": figure(f"GPU time breakdown per {nodes.one_cell() if nodes else 'rank'}", png, folder, "breakdown.png"),
            "tables": [
                table_data(analysis.breakdown, BREAKDOWN_COLUMNS, title="Time breakdown per GPU (% of its window)",
                           per_rank="breakdown"),
                table_data(analysis.memcpy, title="Memcpy by kind", per_rank="memcpy"),
            ],
        }

    return Section("gpu", "GPU time breakdown and overlap", terminal, html, _tables(data, "breakdown", "memcpy"))


def nvtx(analysis: Analysis, data: Callable[[], dict]) -> Section:
    """The NVTX ranges with the most time, and the GPU time of the kernels each range launched."""
    ranges = analysis.nvtx.sorted_by("total_ns") if analysis.nvtx is not None and len(analysis.nvtx) else None
    projected = analysis.nvtx_gpu if analysis.has_gpu else None
    projected_title = "NVTX ranges projected onto the GPU (kernels each range launched)"

    def terminal(console: Console, top: int) -> None:
        _print(console, f"NVTX ranges (top {top})", ranges, NVTX_COLUMNS, top, empty=NO_NVTX)
        _print(console, projected_title, projected, None, top * 2)

    def html(folder: Path, top: int) -> dict:
        tables = [table_data(ranges, NVTX_COLUMNS, top, empty=NO_NVTX)]
        if projected is not None and len(projected):
            tables.append(table_data(projected, limit=top, title=projected_title))
        return {"tables": tables}

    return Section("nvtx", "NVTX ranges", terminal, html, _tables(data, "nvtx", "nvtx_gpu"))


NCCL_SIZE_COLUMNS = ["op", "origin", "bucket", "nranks", "count", "total_ns", "median_ns", "bytes", "busbw_p10_gbps",
                     "busbw_median_gbps", "busbw_p90_gbps", "algbw_median_gbps", "fabric_busbw_gbps", "fabric_ratio"]  # fmt: skip


def nccl_size_columns(sizes: Table | None) -> list[str]:
    """The sizes table's terminal columns: origin only where the run has several (the JSON keeps every column)."""
    several = sizes is not None and "origin" in sizes and len(set(sizes["origin"].tolist())) > 1
    return [c for c in NCCL_SIZE_COLUMNS if c != "origin" or several]


def n_source_note(sizes: Table | None, sums: dict | None = None) -> str:
    """Where the table's communicator sizes (nranks) and, from the digests' `sums`, its message sizes come from, in
    one line ('' without bandwidths)."""
    if sizes is None or not len(sizes) or "n_source" not in sizes or not (sizes["bw_count"] > 0).any():
        return ""
    sized = {"payload_sized": "NCCL's payloads", "json_sized": "JSON payloads", "log_sized": "the rank's NCCL log"}
    origins = [f"{said} ({sums[key]:,})" for key, said in sized.items() if (sums or {}).get(key)]
    said = {"report": "the report's NCCL payloads", "run.json": "the run's world size (run.json)",
            "nccl log": "the NCCL log's [nranks=N] for the collective and size",
            "rank reports": "the number of ranks analyzed (no run.json states the world size)"}  # fmt: skip
    sources = sorted(set(sizes["n_source"].tolist()))
    return ("busbw = algbw x NCCL's factor for the operation and nranks (nccl-tests' PERFORMANCE.md), GB = 10^9 bytes, "
            "GPU kernel time only; nranks from " + " and ".join(said.get(s, s) for s in sources)
            + ("; message sizes from " + ", ".join(origins) if origins else ""))  # fmt: skip


def communication(analysis: Analysis, data: Callable[[], dict], fabric=None) -> Section:
    """Collective operations (NCCL, or gloo on CPU runs) by message size: count, time and bandwidth per size bucket;
    with --fabric (FABRIC: the nccltests.Ceiling), the busbw plot draws the run against the measured curve."""

    def terminal(console: Console, top: int) -> None:
        title = "Collective operations by message size (NCCL, gloo)"
        _print(console, title, analysis.nccl_sizes, nccl_size_columns(analysis.nccl_sizes), top * 2, empty=NO_COLLECTIVES)
        note = n_source_note(analysis.nccl_sizes, analysis.nccl.sums if analysis.nccl is not None else None)
        if note:
            console.print(f"  {note}", markup=False)

    def html(folder: Path, top: int) -> dict:
        from nsyskit.analysis.compute.ncclcurve import busbw_by_size
        from nsyskit.analysis.present import plots

        png = plots.nccl_size_histograms(analysis.nccl)
        if fabric is not None:
            busbw = plots.nccl_busbw_against_fabric(analysis.nccl_sizes, fabric)
        else:
            busbw = plots.nccl_busbw(busbw_by_size(analysis.nccl)) if analysis.nccl is not None else None
        note = n_source_note(analysis.nccl_sizes, analysis.nccl.sums if analysis.nccl is not None else None)
        return {
            "figures": figure("NCCL durations per message size", png, folder, "nccl_sizes.png")
            + figure("NCCL bus bandwidth against message size", busbw, folder, "nccl_busbw.png"),
            "tables": [table_data(analysis.nccl_sizes, nccl_size_columns(analysis.nccl_sizes), caption=note,
                                  empty=NO_COLLECTIVES)],
        }

    return Section("communication", "Communication (collective operations by message size)", terminal, html,
                   _tables(data, "nccl_sizes"))  # fmt: skip


def ranks(analysis: Analysis, summary: Summary, data: Callable[[], dict], nodes: Nodes | None = None) -> Section:
    """Step time per rank and the slow ranks (stragglers); with `nodes` (a run of thousands of ranks), the heatmap
    draws a column per node and report.html's Nodes table names each node's slowest and most idle rank (in
    analysis.json: 'nodes')."""
    per_node = node_table(nodes, analysis.ranks, analysis.breakdown) if nodes is not None and analysis.ranks is not None else None

    def terminal(console: Console, top: int) -> None:  # (no Nodes table: the ranks shown carry their host)
        _print_per_rank(console, "Ranks (stragglers in red)", analysis.ranks, None, "ranks", top)

    def html(folder: Path, top: int) -> dict:
        from nsyskit.analysis.present import plots

        png = plots.step_times_per_rank(analysis.steps, summary.view.steps, nodes)
        tables = [table_data(analysis.ranks, per_rank="ranks")]
        if per_node is not None:
            tables.append(table_data(per_node, NODE_COLUMNS, title=NODES_TITLE, per_rank="nodes",
                                     caption=f"nodes {nodes.source}"))  # fmt: skip
        title = f"Step time per {nodes.one_cell()} (its slowest rank)" if nodes is not None else "Step time per rank"
        return {"figures": figure(title, png, folder, "step_times.png"), "tables": tables}

    def json() -> dict:
        tables = _tables(data, "steps", "ranks")()
        return tables if per_node is None else {**tables, "nodes": per_node.to_json(), "nodes_are": nodes.source}

    return Section("ranks", "Ranks", terminal, html, json)


def nccl_log(logs: NcclLogAnalysis) -> Section:
    """The run's NCCL_DEBUG=INFO logs: the summary line and per-op sizes in the terminal, every table in HTML/JSON."""
    from nsyskit.nccllog.render import render

    def terminal(console: Console, top: int) -> None:
        console.print(f"{NCCL_LOG_TITLE}: {render.summary_line(logs)}", markup=False, highlight=False)
        console.print(render.per_op_table(logs))
        console.print("(every NCCL log table: report.html, or 'invoke nccl-log' on the run folder)")

    return Section("nccl-log", NCCL_LOG_TITLE, terminal, lambda folder, top: render.html_data(logs, top),
                   lambda: {"nccl_log": logs.to_dict()}, render.SECTION_TEMPLATE)  # fmt: skip
