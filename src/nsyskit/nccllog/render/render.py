"""Render an NcclLogAnalysis: rich tables for the terminal, and the data of its HTML section (Jinja2 templates in
nsyskit/nccllog/render/templates: the section of invoke analyze's report.html, and nccl-log.html, a page of its own)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsyskit.nccllog.scan.dtypes import BUCKET_NAMES
from nsyskit.nccllog.tables.analysis import NcclLogAnalysis

if TYPE_CHECKING:  # rich only when tables are printed: invoke analyze --json goes without it
    from rich.console import Console
    from rich.table import Table

SECTION_TEMPLATE = "nccl_log.html.j2"  # the section's body; nccl_log_page.html.j2 puts it in a page of its own

INIT_ROWS = (
    ("NCCL version", "nccl_version"),
    ("CUDA (NCCL build)", "cuda_version"),
    ("network", "network"),
    ("net plugin", "net_plugin"),
    ("OFI provider", "ofi_provider"),
    ("NET transports", "net_transports"),
    ("nranks", "nranks"),
    ("communicator sizes", "communicator_sizes"),
    ("nnodes", "nnodes"),
    ("hosts in the log", "nnodes_from_hostnames"),
    ("ranks per node", "local_ranks"),
    ("GPUs in the log", "gpus_seen"),
    ("communicators initialized", "init_complete"),
    ("coll channels", "coll_channels"),
    ("nvls channels", "nvls_channels"),
    ("collnet channels", "collnet_channels"),
    ("p2p channels", "p2p_channels"),
    ("rings", "rings"),
    ("trees", "trees"),
    ("connections", "connections"),
    ("connected", "connected"),
    ("algorithms", "algorithms"),
    ("protocols", "protocols"),
    ("NCCL_* from environment", "env"),
)


def human_bytes(n: float | None) -> str:
    """Bytes in binary units: '512 B', '64.0 KiB', '1.50 MiB'."""
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.2f} {unit}" if value < 10 else f"{value:.1f} {unit}"
    return f"{n:.0f} B" if float(n).is_integer() else f"{n:.1f} B"


def shown(value) -> str:
    """A fact as text: lists comma-separated, dicts as key=value, None as '-'."""
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return ", ".join(str(v) for v in value)
    return str(value)


def init_rows(analysis: NcclLogAnalysis) -> list[tuple[str, str]]:
    """(label, text) of every init fact the logs gave."""
    return [(label, shown(analysis.init.get(key))) for label, key in INIT_ROWS if shown(analysis.init.get(key)) != "-"]


def _one_job_rows(s: dict) -> list[tuple[str, str]]:
    rows = [
        (
            "step lines",
            f"{s['step_lines']} ({shown(s['formats'])}), iterations {s['first_iteration']}-{s['last_iteration']}",
        ),
    ]
    if s["avg_step_time_s"] is None:
        rows.append(("average step time", "not available (the step lines print no step time)"))
    else:
        rows.append(
            (
                "average step time",
                f"{s['avg_step_time_s']:.6f} s over {s['timed_steps']} steps (min {s['min_step_time_s']:.6f}, max {s['max_step_time_s']:.6f})",
            )
        )
    if s["avg_tflops_per_gpu"] is None:
        rows.append(("TFLOP/s per GPU", "not available (the step lines print no TFLOP/s)"))
    else:
        rows.append(("TFLOP/s per GPU", f"{s['avg_tflops_per_gpu']:.6f} (average over {s['tflops_steps']} steps)"))
    return rows


def step_text(analysis: NcclLogAnalysis) -> list[tuple[str, str]]:
    """(label, text) of the step timing, per job when the logs come from several jobs (files or run folders are
    never averaged together); says 'not available' where the step lines do not print it."""
    s = analysis.steps
    jobs = s.get("jobs", [])
    if not s["step_lines"]:
        return [
            (
                "step lines",
                "none found (NeMo 'Training epoch .. iteration N/M', Megatron 'iteration N/M', '[rank 0] step N/M')",
            )
        ]
    if len(jobs) <= 1:
        rows = _one_job_rows(s)
        if jobs:
            rows.insert(0, ("job", f"{jobs[0]['job']} ({jobs[0]['files']} file(s))"))
        return rows
    rows = [("jobs", f"{len(jobs)} jobs with step lines: statistics per job, not averaged together")]
    for number, job in enumerate(jobs, 1):
        rows.append((f"job {number}", f"{job['job']} ({job['files']} file(s))"))
        rows += [(f"job {number}: {label}", text) for label, text in _one_job_rows(job)]
    return rows


def summary_line(analysis: NcclLogAnalysis) -> str:
    """One line: files, window, lines, calls, speed."""
    lines = analysis.lines
    speed = analysis.bytes_read / analysis.seconds / 1e6 if analysis.seconds else 0.0
    return (
        f"{len(analysis.files)} file(s), {analysis.bytes_read / 1e6:.1f} MB, {lines['total']:,} lines; window: {analysis.window} "
        f"({lines['in_window']:,} lines); NCCL INFO {lines['nccl_info']:,}, collective calls {lines['collective']:,}, "
        f"WARN {lines['nccl_warn']:,}; skipped: {lines['unrecognized_nccl']:,} unrecognized, {lines['garbled_collective']:,} garbled; "
        f"{analysis.seconds:.2f} s ({speed:.0f} MB/s)" + _jobs_note(analysis)
    )


def _jobs_note(analysis: NcclLogAnalysis) -> str:
    jobs = analysis.steps.get("jobs", [])
    if len(jobs) <= 1:
        return ""
    return f"; step statistics per job ({len(jobs)} jobs, not averaged together: {', '.join(j['job'] for j in jobs)})"


TEXT_COLUMNS = {"op", "gpu", "dtype", "algorithm", "protocol", "fact", "value", ""}


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in TEXT_COLUMNS else "right")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # log text is data, never rich markup
    return table


def per_op_table(analysis: NcclLogAnalysis) -> Table:
    """The per-op message sizes as a rich table (calls, min/avg/max/total bytes in binary units)."""
    return _table(
        "Per-op message sizes",
        ["op", "calls", "min", "avg", "max", "total"],
        [
            [r["op"], f"{r['calls']:,}", human_bytes(r["min_bytes"]), human_bytes(r["avg_bytes"]),
             human_bytes(r["max_bytes"]), human_bytes(r["total_bytes"])]
            for r in analysis.per_op
        ],
    )  # fmt: skip


def no_collectives(analysis: NcclLogAnalysis) -> str | None:
    """Why the collective tables would be empty, and what to do, in one line; None when there are collectives."""
    lines = analysis.lines
    if lines["collective"]:
        return None
    if lines["garbled_collective"]:
        return (f"no collective call could be read: {lines['garbled_collective']:,} collective line(s) were cut or "
                "garbled (interleaved output of several ranks?); write one log per rank with NCCL_DEBUG_FILE=nccl.%h.%p.log")  # fmt: skip
    if lines["nccl_info"]:
        return (f"no collective calls: these logs have {lines['nccl_info']:,} NCCL INFO lines but none for a collective, "
                "and NCCL prints one only when NCCL_DEBUG_SUBSYS includes COLL; rerun with NCCL_DEBUG=INFO "
                "NCCL_DEBUG_SUBSYS=INIT,COLL (the kit's default: INIT,COLL,NET,TUNING)")  # fmt: skip
    return "no collective calls: no NCCL INFO line in these logs; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL"


def print_collectives(analysis: NcclLogAnalysis, console: Console, top: int = 20) -> None:
    """The collective calls' tables: per-op sizes, the histograms per op and per GPU, the aggregate of distinct calls."""
    console.print(per_op_table(analysis))
    for title, key, rows in (
        ("Message-size histogram per op (calls)", "op", analysis.histogram_per_op),
        ("Message-size histogram per GPU (calls)", "gpu", analysis.histogram_per_gpu[: top * 4]),
    ):
        table_rows = [[r[key], *(f"{r[b]:,}" for b in BUCKET_NAMES), f"{r['calls']:,}"] for r in rows]
        console.print(_table(title, [key, *BUCKET_NAMES, "calls"], table_rows))
    if len(analysis.histogram_per_gpu) > top * 4:
        console.print(f"… {len(analysis.histogram_per_gpu) - top * 4} more GPUs (see --json)")
    console.print(
        _table(
            f"Aggregate: distinct calls by total bytes (top {min(top, len(analysis.aggregate))} of {len(analysis.aggregate)})",
            ["calls", "op", "count", "dtype", "bytes/call", "total"],
            [
                [f"{r['calls']:,}", r["op"], f"{r['count']:,}", r["dtype"], f"{r['bytes_per_call']:,}",
                 human_bytes(r["total_bytes"])]
                for r in analysis.aggregate[:top]
            ],
        )
    )  # fmt: skip


def print_analysis(analysis: NcclLogAnalysis, console: Console, top: int = 20) -> None:
    """The analysis as rich tables: summary, init facts, per-op stats, histograms, aggregate, tuning, steps, problems."""
    console.print(summary_line(analysis))
    facts = init_rows(analysis)
    if facts:
        console.print(_table("Init facts", ["fact", "value"], [list(r) for r in facts]))
    empty = no_collectives(analysis)
    if empty:  # one line that says why and what to do, not four empty tables
        console.print(empty, markup=False)
    else:
        print_collectives(analysis, console, top)
    if analysis.tuning:
        rows = [
            [r["op"], r["algorithm"], r["protocol"], f"{r['calls']:,}", human_bytes(r["total_bytes"])]
            for r in analysis.tuning
        ]
        console.print(
            _table("Algorithms and protocols (TUNING lines)", ["op", "algorithm", "protocol", "calls", "total"], rows)
        )
    console.print(_table("Steps", ["", "value"], [list(r) for r in step_text(analysis)]))
    for kind, examples in analysis.examples.items():
        for example in examples:
            console.print(f"  {kind}: {example}", markup=False)


def _html_table(title: str, columns: list[str], rows: list[list[object]]) -> dict:
    return {"title": title, "columns": columns, "rows": [[str(value) for value in row] for row in rows]}


def html_data(analysis: NcclLogAnalysis, top: int = 20) -> dict:
    """The HTML section's data (SECTION_TEMPLATE): the summary line, its tables (raw byte counts) and the warnings."""
    tables = []
    facts = init_rows(analysis)
    if facts:
        tables.append(_html_table("Init facts", ["fact", "value"], [list(r) for r in facts]))
    empty = no_collectives(analysis)
    tables += [] if empty else [
        _html_table(
            "Per-op message sizes (bytes)", ["op", "calls", "min", "avg", "max", "total"],
            [[r["op"], r["calls"], r["min_bytes"], f"{r['avg_bytes']:.1f}", r["max_bytes"], r["total_bytes"]] for r in analysis.per_op],
        ),
        _html_table(
            "Message-size histogram per op (calls)", ["op", *BUCKET_NAMES, "calls"],
            [[r["op"], *(r[b] for b in BUCKET_NAMES), r["calls"]] for r in analysis.histogram_per_op],
        ),
        _html_table(
            "Message-size histogram per GPU (calls)", ["gpu", *BUCKET_NAMES, "calls"],
            [[r["gpu"], *(r[b] for b in BUCKET_NAMES), r["calls"]] for r in analysis.histogram_per_gpu],
        ),
        _html_table(
            f"Aggregate: distinct calls by total bytes (top {min(top, len(analysis.aggregate))} of {len(analysis.aggregate)})",
            ["calls", "op", "count", "dtype", "bytes/call", "total bytes"],
            [[r["calls"], r["op"], r["count"], r["dtype"], r["bytes_per_call"], r["total_bytes"]] for r in analysis.aggregate[:top]],
        ),
    ]  # fmt: skip
    if analysis.tuning:
        tables.append(_html_table(
            "Algorithms and protocols (TUNING lines)", ["op", "algorithm", "protocol", "calls", "total bytes"],
            [[r["op"], r["algorithm"], r["protocol"], r["calls"], r["total_bytes"]] for r in analysis.tuning],
        ))  # fmt: skip
    tables.append(_html_table("Steps", ["", "value"], [list(r) for r in step_text(analysis)]))
    return {"summary": summary_line(analysis), "note": empty, "tables": tables, "warnings": list(analysis.warnings)}


def render_page(analysis: NcclLogAnalysis, top: int = 20) -> str:
    """nccl-log.html: the section as a self-contained page (report.html's style, no script, every value escaped)."""
    from nsyskit import pages

    return pages.render("nccl_log_page.html.j2", title="NCCL log analysis", data=html_data(analysis, top))
