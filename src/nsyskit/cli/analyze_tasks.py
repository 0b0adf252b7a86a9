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
        "path": "Run folder (reports/<run-id>) or report files (.nsys-rep, .sqlite, .qdstrm), comma-separated.",
        "json": "Print the whole analysis (findings first) as JSON on stdout instead of tables (report.html is still written).",
        "html": "Write report.html, the PNG plots and analysis.json into the run folder (default: yes; --no-html skips).",
        "output": "Folder for report.html and the PNGs (default: the run folder, or the folder of the first report).",
        "timeline": "Also write timeline.json.gz: every rank's profiled window for ui.perfetto.dev (drag and drop).",
        "timeline_max_events": "Cap on the timeline's events over all ranks (default 500000); the trace says where it cut.",
        "diff": "Baseline to compare PATH against (run folder or analysis.json): 'invoke analyze --diff A B'.",
        "fail_on": "With --diff: per-metric thresholds, e.g. step_time=5,exposed_comm=10; exit 3 past one.",
        "fail_on_regression": "With --diff: same as --fail-on step_time=PCT.",
        "straggler_pct": "Flag ranks whose mean step time lies more than this percent from the median (default 5).",
        "top": "Rows shown in the kernel and NVTX tables (default 15).",
    },
)
def analyze(
    c, path=None, json_=False, html=True, output=None, timeline=False, timeline_max_events=None, diff=None,
    fail_on=None, fail_on_regression=None, straggler_pct=None, top=15,
):  # fmt: skip
    """Findings first, then kernel summary, GPU breakdown and overlap, NCCL sizes, stragglers; report.html, timeline."""
    from nsyskit.analysis import produce, run_diff
    from nsyskit.analysis.diff import diff_table
    from nsyskit.analysis.report import print_analysis
    from nsyskit.analysis.summary import document
    from nsyskit.analysis.timeline import DEFAULT_MAX_EVENTS

    if diff:
        result = run_diff(
            _paths(diff), _paths(path), fail_on, float(fail_on_regression) if fail_on_regression else None
        )
        if json_:
            console.out.print_json(json.dumps(result.to_json()))
        else:
            console.out.print(diff_table(result))
        if result.regressions:
            raise RegressionFound(
                f"regression past the threshold: {', '.join(result.regressions)} (A={diff}, B={path})"
            )
        return
    if fail_on_regression is not None or fail_on is not None:
        raise AnalysisError(
            path, "--fail-on needs a baseline", "use 'invoke analyze --diff BASELINE RUN --fail-on step_time=5'"
        )
    result = produce(
        _paths(path), Path(output) if output else None, html=html,
        straggler_pct=float(straggler_pct) if straggler_pct is not None else 5.0, timeline=timeline,
        max_events=int(timeline_max_events) if timeline_max_events else DEFAULT_MAX_EVENTS, progress=_progress("timeline"),
    )  # fmt: skip
    if json_:
        console.out.print_json(json.dumps(document(result.analysis, result.summary)))
    else:
        print_analysis(result.analysis, console.out, top=int(top), summary=result.summary)
    for note in result.timeline_notes:
        console.warn(note)
    if result.timeline:
        console.done(f"timeline: {result.timeline} (open https://ui.perfetto.dev and drop the file on it)")
    if result.report:
        console.done(f"report: {result.report}")


def _progress(what: str):
    """A progress callback printing '<what>: rank i/N' about ten times over the ranks."""

    def report(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            console.info(f"{what}: {done}/{total} ranks")

    return report


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
