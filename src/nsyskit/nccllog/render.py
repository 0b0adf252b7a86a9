"""Output of an NcclLogReport: rich tables for the terminal and an HTML section for the run's report.html."""

from __future__ import annotations

import html

from rich.console import Console
from rich.table import Table

from nsyskit.nccllog.dtypes import BUCKET_NAMES
from nsyskit.nccllog.report import NcclLogReport

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


def init_rows(report: NcclLogReport) -> list[tuple[str, str]]:
    """(label, text) of every init fact the logs gave."""
    return [(label, shown(report.init.get(key))) for label, key in INIT_ROWS if shown(report.init.get(key)) != "-"]


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


def step_text(report: NcclLogReport) -> list[tuple[str, str]]:
    """(label, text) of the step timing, per job when the logs come from several jobs (files or run folders are
    never averaged together); says 'not available' where the step lines do not print it."""
    s = report.steps
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


def summary_line(report: NcclLogReport) -> str:
    """One line: files, window, lines, calls, speed."""
    lines = report.lines
    speed = report.bytes_read / report.seconds / 1e6 if report.seconds else 0.0
    return (
        f"{len(report.files)} file(s), {report.bytes_read / 1e6:.1f} MB, {lines['total']:,} lines; window: {report.window} "
        f"({lines['in_window']:,} lines); NCCL INFO {lines['nccl_info']:,}, collective calls {lines['collective']:,}, "
        f"WARN {lines['nccl_warn']:,}; skipped: {lines['unrecognized_nccl']:,} unrecognized, {lines['garbled_collective']:,} garbled; "
        f"{report.seconds:.2f} s ({speed:.0f} MB/s)" + _jobs_note(report)
    )


def _jobs_note(report: NcclLogReport) -> str:
    jobs = report.steps.get("jobs", [])
    if len(jobs) <= 1:
        return ""
    return f"; step statistics per job ({len(jobs)} jobs, not averaged together: {', '.join(j['job'] for j in jobs)})"


TEXT_COLUMNS = {"op", "gpu", "dtype", "algorithm", "protocol", "fact", "value", ""}


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in TEXT_COLUMNS else "right")
    for row in rows:
        table.add_row(*row)
    return table


def print_report(report: NcclLogReport, console: Console, top: int = 20) -> None:
    """The report as rich tables: summary, init facts, per-op stats, histograms, aggregate, tuning, steps, problems."""
    console.print(summary_line(report))
    facts = init_rows(report)
    if facts:
        console.print(_table("Init facts", ["fact", "value"], [list(r) for r in facts]))
    console.print(
        _table(
            "Per-op message sizes",
            ["op", "calls", "min", "avg", "max", "total"],
            [
                [
                    r["op"],
                    f"{r['calls']:,}",
                    human_bytes(r["min_bytes"]),
                    human_bytes(r["avg_bytes"]),
                    human_bytes(r["max_bytes"]),
                    human_bytes(r["total_bytes"]),
                ]
                for r in report.per_op
            ],
        )
    )
    for title, key, rows in (
        ("Message-size histogram per op (calls)", "op", report.histogram_per_op),
        ("Message-size histogram per GPU (calls)", "gpu", report.histogram_per_gpu[: top * 4]),
    ):
        console.print(
            _table(
                title,
                [key, *BUCKET_NAMES, "calls"],
                [[r[key], *(f"{r[b]:,}" for b in BUCKET_NAMES), f"{r['calls']:,}"] for r in rows],
            )
        )
    if len(report.histogram_per_gpu) > top * 4:
        console.print(f"… {len(report.histogram_per_gpu) - top * 4} more GPUs (see --json)")
    console.print(
        _table(
            f"Aggregate: distinct calls by total bytes (top {min(top, len(report.aggregate))} of {len(report.aggregate)})",
            ["calls", "op", "count", "dtype", "bytes/call", "total"],
            [
                [
                    f"{r['calls']:,}",
                    r["op"],
                    f"{r['count']:,}",
                    r["dtype"],
                    f"{r['bytes_per_call']:,}",
                    human_bytes(r["total_bytes"]),
                ]
                for r in report.aggregate[:top]
            ],
        )
    )
    if report.tuning:
        console.print(
            _table(
                "Algorithms and protocols (TUNING lines)",
                ["op", "algorithm", "protocol", "calls", "total"],
                [
                    [r["op"], r["algorithm"], r["protocol"], f"{r['calls']:,}", human_bytes(r["total_bytes"])]
                    for r in report.tuning
                ],
            )
        )
    console.print(_table("Steps", ["", "value"], [list(r) for r in step_text(report)]))
    for kind, examples in report.examples.items():
        for example in examples:
            console.print(f"  {kind}: {example}", markup=False)


def _html_table(columns: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: NcclLogReport, top: int = 20, heading: bool = True) -> str:
    """A self-contained <section> with the same tables, for the run's report.html (pure: report in, text out);
    heading=False leaves out the <h2> (report.html's section hook adds its own)."""
    parts = ['<section class="nsyskit-nccl-log" id="nccl-log">']
    if heading:
        parts.append("<h2>NCCL log analysis</h2>")
    parts.append(f"<p>{html.escape(summary_line(report))}</p>")
    facts = init_rows(report)
    if facts:
        parts += ["<h3>Init facts</h3>", _html_table(["fact", "value"], [list(r) for r in facts])]
    parts += [
        "<h3>Per-op message sizes (bytes)</h3>",
        _html_table(
            ["op", "calls", "min", "avg", "max", "total"],
            [
                [r["op"], r["calls"], r["min_bytes"], f"{r['avg_bytes']:.1f}", r["max_bytes"], r["total_bytes"]]
                for r in report.per_op
            ],
        ),
        "<h3>Message-size histogram per op (calls)</h3>",
        _html_table(
            ["op", *BUCKET_NAMES, "calls"],
            [[r["op"], *(r[b] for b in BUCKET_NAMES), r["calls"]] for r in report.histogram_per_op],
        ),
        "<h3>Message-size histogram per GPU (calls)</h3>",
        _html_table(
            ["gpu", *BUCKET_NAMES, "calls"],
            [[r["gpu"], *(r[b] for b in BUCKET_NAMES), r["calls"]] for r in report.histogram_per_gpu],
        ),
        f"<h3>Aggregate: distinct calls by total bytes (top {min(top, len(report.aggregate))} of {len(report.aggregate)})</h3>",
        _html_table(
            ["calls", "op", "count", "dtype", "bytes/call", "total bytes"],
            [
                [r["calls"], r["op"], r["count"], r["dtype"], r["bytes_per_call"], r["total_bytes"]]
                for r in report.aggregate[:top]
            ],
        ),
    ]
    if report.tuning:
        parts += [
            "<h3>Algorithms and protocols (TUNING lines)</h3>",
            _html_table(
                ["op", "algorithm", "protocol", "calls", "total bytes"],
                [[r["op"], r["algorithm"], r["protocol"], r["calls"], r["total_bytes"]] for r in report.tuning],
            ),
        ]
    parts += ["<h3>Steps</h3>", _html_table(["", "value"], [list(r) for r in step_text(report)])]
    if report.warnings:
        parts.append("<ul class='warnings'>" + "".join(f"<li>{html.escape(w)}</li>" for w in report.warnings) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)
