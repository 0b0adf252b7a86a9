"""The NCCL tasks: nccl-log (NCCL_DEBUG=INFO logs: sizes, histograms, steps, init facts) and nccl-tests (its tables)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from nsyskit import console
from nsyskit.cli import number_flag, task


@task(
    positional=["logs"],
    help={
        "logs": "Logs to read: files (plain or .gz), globs, or a run folder; several comma-separated (e.g. 'a.log,b.log.gz'); "
        "'-' reads standard input. A run folder's logs form one job (one set of step statistics); any other file is its own job.",
        "steps": "Only the step window A-B: from the step line of iteration A up to the first step line after B "
        "(NeMo 'Training epoch .. iteration N/M', Megatron 'iteration N/M', the example's '[rank 0] step N/M').",
        "lines": "Only lines A-B (1-based, inclusive) of each file; combined with --steps, lines in both.",
        "json": "Print the results as JSON instead of tables.",
        "top": "Rows of the aggregate table (default 20; --json has them all).",
        "html": "Also write the results as a self-contained HTML page to this file (a run folder always gets nccl-log.html "
        "and nccl-log.json; its report.html gets the same section from 'invoke analyze').",
    },
)
def nccl_log(c, logs, steps=None, lines=None, json_=False, top=None, html=None):
    """Analyze NCCL_DEBUG=INFO logs (COLL lines; INIT/NET/TUNING when present): per-op sizes, histograms, aggregates, steps, init facts."""
    from nsyskit.nccllog import (
        Window,
        analyze,
        check_html_target,
        no_nccl_line,
        parse_range,
        print_analysis,
        resolve_jobs,
        write_outputs,
    )

    top = int(number_flag("--top", top, 20, integer=True, low=1))
    arguments = [logs]
    window = Window(steps=parse_range("--steps", steps), lines=parse_range("--lines", lines, lowest=1))
    html_path = check_html_target(html)
    jobs = resolve_jobs(arguments)
    analysis = analyze(list(jobs), window, jobs={str(path): job for path, job in jobs.items()}, progress=_progress(jobs))
    error = no_nccl_line(analysis)
    if error:
        raise error
    if json_:
        console.out.print_json(json.dumps(analysis.to_dict()))
    else:
        print_analysis(analysis, console.out, top=top)
    for warning in analysis.warnings:
        console.warn(warning)
    for written in write_outputs(analysis, arguments, html_path, top):
        console.done(written)


PROGRESS_MIN_BYTES = 256 << 20  # below this a read takes a few seconds at most: no progress lines


def _progress(paths: list[Path]) -> Callable[[int, int], None] | None:
    """A progress callback for big inputs: bytes read, share and time elapsed on stderr (None for small inputs)."""
    total = sum(path.stat().st_size for path in paths if path.is_file())
    if total < PROGRESS_MIN_BYTES:
        return None
    phases = console.Phases("nccl-log", every_s=0)
    phases.update(f"reading {len(paths)} file(s), {total / 1e6:,.0f} MB")

    def show(read: int, of: int) -> None:
        phases.update(f"read {read / 1e6:,.0f} of {of / 1e6:,.0f} MB ({100 * read / max(of, 1):.0f}%)")

    return show


@task(
    positional=["outputs"],
    help={
        "outputs": "nccl-tests outputs to read: files (plain or .gz), globs, or the run folder of a nccl-tests "
        "workload (every text file under it that holds a table); several comma-separated; '-' reads standard input.",
        "json": "Print the tests as JSON (every row, unrounded) instead of tables.",
        "diff": "Baseline outputs (files or a run folder) to compare against: the busbw change per size, tests "
        "paired by operation.",
        "plot": "Also write busbw against message size (log scale) as a PNG to this file (a run folder always gets "
        "nccl-tests.png and nccl-tests.json).",
    },
)
def nccl_tests(c, outputs, json_=False, diff=None, plot=None):
    """Read nccl-tests/rccl-tests outputs: each test's rows (both placements), average busbw, plot, --diff."""
    from nsyskit.nccltests import check_plot_target, nccl_tests_report, print_diff, print_tests

    outcome = nccl_tests_report([outputs], [diff] if diff else None, check_plot_target(plot))
    if outcome.reading.tests:
        if json_:  # plain: rich's print_json re-reads and colours it, 30 s for 15,000 rows
            sys.stdout.write(json.dumps(outcome.to_dict(), indent=2) + "\n")
        else:
            print_tests(outcome.reading.tests, console.out)
            if outcome.diff is not None:
                print_diff(outcome.diff, console.out)
    for note in outcome.notes:
        console.warn(note)
    for written in outcome.written:
        console.done(written)
    if outcome.error is not None:
        raise outcome.error
