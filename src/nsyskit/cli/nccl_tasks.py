"""The nccl-log task: analyze NCCL_DEBUG=INFO logs (per-op sizes, histograms, aggregates, step timing, init facts)."""

from __future__ import annotations

import json
from pathlib import Path

from nsyskit import console
from nsyskit.cli import task
from nsyskit.nccllog import Window, analyze, parse_range, resolve_logs
from nsyskit.nccllog.render import print_report, render_html
from nsyskit.nccllog.section import update_report_html


def _run_folders(arguments: list[str]) -> list[Path]:
    """The arguments that are run folders (a reports/<run-id>/ with its run.json)."""
    return [Path(a) for a in arguments if Path(a).is_dir() and (Path(a) / "run.json").is_file()]


@task(
    positional=["logs"],
    help={
        "logs": "Logs to read: files (plain or .gz), globs, or a run folder; several comma-separated (e.g. 'a.log,b.log.gz').",
        "steps": "Only the step window A-B: from the step line of iteration A up to the first step line after B "
        "(NeMo 'Training epoch .. iteration N/M', Megatron 'iteration N/M', the example's '[rank 0] step N/M').",
        "lines": "Only lines A-B (1-based, inclusive) of each file; combined with --steps, lines in both.",
        "json": "Print the results as JSON instead of tables.",
        "top": "Rows of the aggregate table (default 20; --json has them all).",
        "html": "Also write the HTML section to this file (a run folder always gets nccl-log.html and nccl-log.json, "
        "and the section in its report.html when there is one).",
    },
)
def nccl_log(c, logs, steps=None, lines=None, json_=False, top=20, html=None):
    """Analyze NCCL_DEBUG=INFO logs (COLL lines; INIT/NET/TUNING when present): per-op sizes, histograms, aggregates, steps, init facts."""
    arguments = [logs]
    window = Window(steps=parse_range("--steps", steps), lines=parse_range("--lines", lines))
    report = analyze(resolve_logs(arguments), window)
    fragment = render_html(report, top=int(top))
    for folder in _run_folders(arguments):
        (folder / "nccl-log.json").write_text(json.dumps(report.to_dict(), indent=1))
        (folder / "nccl-log.html").write_text(fragment)
        page = update_report_html(folder, render_html(report, top=int(top), heading=False))
        console.done(
            f"wrote {folder / 'nccl-log.html'} and nccl-log.json" + (f"; section added to {page}" if page else "")
        )
    if html:
        Path(html).write_text(fragment)
    if json_:
        console.out.print_json(json.dumps(report.to_dict()))
    else:
        print_report(report, console.out, top=int(top))
    for warning in report.warnings:
        console.warn(warning)
