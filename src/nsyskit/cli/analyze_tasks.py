"""Tasks that turn nsys reports into answers: analyze (tables, report.html, diff, CI gate) and recipes."""

from __future__ import annotations

import json
from pathlib import Path

from nsyskit import console
from nsyskit.cli import task
from nsyskit.errors import AnalysisError, RegressionFound


def _paths(path: str) -> list[str]:
    parts = [p.strip() for p in (path or "").split(",") if p.strip()]
    if not parts:
        raise AnalysisError(
            "(no path)",
            "no run folder or report given",
            "pass a run folder (reports/<run-id>) or report files separated by commas",
        )
    return parts


@task(
    positional=["path"],
    help={
        "path": "Run folder (reports/<run-id>) or report files (.nsys-rep, .sqlite, .qdstrm; .ncu-rep; .pt.trace.json.gz), comma-separated.",
        "json": "Print the whole analysis as JSON on stdout instead of tables (report.html is still written).",
        "html": "Write report.html, the PNG plots and analysis.json into the run folder (default: yes; --no-html skips).",
        "output": "Folder for report.html and the PNGs (default: the run folder, or the folder of the first report).",
        "diff": "Baseline run to compare PATH against: 'invoke analyze --diff A B' prints metric changes from A to B.",
        "fail_on_regression": "With --diff: exit 3 when step time or GPU busy time per step got worse by more than this percent.",
        "straggler_pct": "Flag ranks whose mean step time lies more than this percent from the median (default 5).",
        "top": "Rows shown in the kernel and NVTX tables (default 15).",
    },
)
def analyze(
    c, path=None, json_=False, html=True, output=None, diff=None, fail_on_regression=None, straggler_pct=None, top=15
):
    """Kernel summary, GPU compute/communication/memory breakdown and overlap, NCCL sizes, stragglers; report.html."""
    from nsyskit.analysis import diff_runs, run_analysis
    from nsyskit.analysis.profilers import print_profiler_analysis, profiler_of, run_profiler_analysis
    from nsyskit.analysis.report import print_analysis, rich_table

    if diff:
        threshold = float(fail_on_regression) if fail_on_regression is not None else None
        table = diff_runs(_paths(diff), _paths(path), threshold)
        if json_:
            console.out.print_json(json.dumps(table.to_json()))
        else:
            console.out.print(rich_table(f"A = {diff}   B = {path}", table))
        regressions = [row["metric"] for row in table.rows() if row["regression"]]
        if regressions:
            raise RegressionFound(f"regression over {threshold}%: {', '.join(regressions)} (A={diff}, B={path})")
        return
    if fail_on_regression is not None:
        raise AnalysisError(
            path,
            "--fail-on-regression needs a baseline",
            "use 'invoke analyze --diff BASELINE RUN --fail-on-regression PCT'",
        )
    profiler = profiler_of(_paths(path))
    if profiler != "nsys":  # PROFILER=ncu or torch runs: their own tables, shown the same way
        other, report = run_profiler_analysis(profiler, _paths(path), Path(output) if output else None, html,
                                              float(straggler_pct) if straggler_pct is not None else 5.0)  # fmt: skip
        if json_:
            console.out.print_json(json.dumps(other.to_json()))
        else:
            print_profiler_analysis(other, console.out, top=int(top))
        if report:
            console.done(f"report: {report}")
        return
    analysis, report = run_analysis(
        _paths(path),
        Path(output) if output else None,
        write=html,
        straggler_pct=float(straggler_pct) if straggler_pct is not None else 5.0,
    )
    if json_:
        console.out.print_json(json.dumps(analysis.to_json()))
    else:
        print_analysis(analysis, console.out, top=int(top))
    if report:
        console.done(f"report: {report}")


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
