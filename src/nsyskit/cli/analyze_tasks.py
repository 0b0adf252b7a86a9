"""Tasks that turn nsys reports into answers: analyze (tables, report.html, diff, CI gate) and recipes."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from nsyskit import console
from nsyskit.cli import task
from nsyskit.errors import AnalysisError, ConfigError, RegressionFound


def _paths(path: str) -> list[str]:
    parts = [p.strip() for p in (path or "").split(",") if p.strip()]
    if not parts:
        raise AnalysisError(
            "(no path)",
            "no run folder or report given",
            "pass a run folder (reports/<run-id>) or report files separated by commas",
        )
    return parts


def _number(flag: str, value: object, default: float | None, integer: bool = False, low: float = 0.0) -> float | None:
    """A flag's value as a finite number >= low (an int when `integer`), or ConfigError naming the flag and value."""
    if value is None:
        return default
    kind = "a whole number" if integer else "a number"
    try:
        number = int(str(value)) if integer else float(str(value))
    except ValueError:
        number = None
    if number is None or not math.isfinite(number) or number < low:
        raise ConfigError(flag, value, f"must be {kind} >= {low:g}", f"e.g. {flag} {int(low) + 5 if integer else 5}")
    return number


def _check_output(output: str | None) -> Path | None:
    """The --output folder; an error when it names a file (checked before the analysis runs)."""
    if not output:
        return None
    folder = Path(output)
    for part in (folder, *folder.parents):
        if part.exists():
            if not part.is_dir():
                raise ConfigError(
                    "--output", output, f"{part} is a file, not a folder", "pass a folder for report.html"
                )
            break
    return folder


@task(
    positional=["path"],
    help={
        "path": "Run folder (reports/<run-id>) or report files (.nsys-rep, .qdrep, .sqlite, .qdstrm; .ncu-rep; .pt.trace.json.gz), comma-separated.",
        "json": "Print the whole analysis as JSON on stdout instead of tables (report.html is still written).",
        "html": "Write report.html, the PNG plots and analysis.json into the run folder (default: yes; --no-html skips).",
        "output": "Folder for report.html and the PNGs (default: the run folder, or the folder of the first report).",
        "diff": "Baseline run to compare PATH against: 'invoke analyze --diff A B' prints metric changes from A to B.",
        "fail_on_regression": "With --diff: exit 3 when step time or GPU busy time per step got worse by more than this percent.",
        "straggler_pct": "Flag ranks whose mean step time lies more than this percent from the median (default 5).",
        "top": "Rows shown in each terminal table (default 15).",
    },
)
def analyze(
    c, path=None, json_=False, html=True, output=None, diff=None, fail_on_regression=None, straggler_pct=None, top=None
):
    """Kernel summary, GPU compute/communication/memory breakdown and overlap, NCCL sizes, stragglers; report.html."""
    from nsyskit.analysis import diff_runs, report_folder
    from nsyskit.analysis.profilers import print_profiler_analysis, profiler_of, run_profiler_analysis
    from nsyskit.analysis.terminal import print_analysis, rich_table
    from nsyskit.analysis.trace import analyze_run

    rows = int(_number("--top", top, 15, integer=True, low=1))
    straggler = _number("--straggler-pct", straggler_pct, 5.0)
    threshold = _number("--fail-on-regression", fail_on_regression, None)
    if diff:
        table = diff_runs(_paths(diff), _paths(path), threshold)
        if json_:
            _print_json(table.to_json())
        else:
            console.out.print(rich_table(f"A = {diff}   B = {path}", table))
        regressions = [row["metric"] for row in table.rows() if row["regression"]]
        if regressions:
            raise RegressionFound(f"regression over {threshold}%: {', '.join(regressions)} (A={diff}, B={path})")
        return
    if threshold is not None:
        raise AnalysisError(
            path,
            "--fail-on-regression needs a baseline",
            "use 'invoke analyze --diff BASELINE RUN --fail-on-regression PCT'",
        )
    paths = _paths(path)
    folder = _check_output(output) or report_folder(paths)
    profiler = profiler_of(paths)
    if profiler != "nsys":  # PROFILER=ncu or torch runs: their own tables, shown the same way
        other, report = run_profiler_analysis(profiler, paths, folder, html, straggler)
        if json_:
            _print_json(other.to_json())
        else:
            print_profiler_analysis(other, console.out, top=rows)
        if report:
            console.done(f"report: {report}")
        return
    analysis = analyze_run(paths, straggler_pct=straggler)
    if json_:
        _print_json(analysis.to_json())
    else:
        print_analysis(analysis, console.out, top=rows)
    for warning in analysis.warnings:
        console.warn(warning)
    if html:
        from nsyskit.analysis.report import write_report  # matplotlib only when a report is written

        try:
            report = write_report(analysis, folder)
        except OSError as exc:  # the analysis is printed above: say what was not written and how to get it
            raise AnalysisError(
                folder, f"report.html could not be written ({exc.strerror or exc}); the analysis above is complete",
                "pass --output with a writable folder, or --no-html",
            ) from None  # fmt: skip
        console.done(f"report: {report}")


def _print_json(data: object) -> None:
    """JSON on stdout with the plain encoder (rich's highlighter takes seconds and GBs on large analyses)."""
    json.dump(data, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


@task(positional=["report"], help={"report": "A .nsys-rep (or a folder of them) to run nsys recipes on."})
def recipes(c, report=None):
    """Run nsys recipes (kernel summary, nccl_sum, NCCL/GPU overlap, gpu_gaps) when the installed nsys has them."""
    from nsyskit.analysis.recipes import run_recipes

    results = run_recipes(Path(_paths(report)[0]))
    for result in results:
        if result.ok:
            console.done(f"{result.name}: {result.output}")
        else:
            console.warn(f"{result.name} failed: {result.message}")
    if not any(r.ok for r in results):
        raise AnalysisError(report, "no recipe succeeded", "see the messages above")
