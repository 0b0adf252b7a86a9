"""Tasks that turn nsys reports into answers: analyze (tables, report.html, diff, CI gate) and recipes."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, load, number_flag, project_root, task
from nsyskit.errors import AnalysisError, ConfigError, PartialAnalysis, RegressionFound, UsageError

PROGRESS_FROM = 8  # reports in a run from which analyze and --timeline print their progress
PARTS = "analysis-parts"  # the default folder of analyze-part's part files, beside the reports


def _paths(path: str) -> list[str]:
    parts = [p.strip() for p in (path or "").split(",") if p.strip()]
    if not parts:
        raise UsageError(
            "no run folder or report given", fix="pass a run folder (reports/<run-id>) or report files separated by commas"
        )
    return parts


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
        "json": "Print the whole analysis (findings first) as JSON on stdout instead of tables (report.html is still written).",
        "html": "Write report.html, the PNG plots and analysis.json into the run folder (default: yes; --no-html skips).",
        "output": "Folder for report.html and the PNGs (default: the run folder, or the folder of the first report).",
        "timeline": "Also write timeline.json.gz: every rank's profiled window for ui.perfetto.dev (drag and drop).",
        "timeline_max_events": "Cap on the timeline's events over all ranks (default 500000); the trace says where it cut.",
        "diff": "Baseline to compare PATH against (run folder or analysis.json): 'invoke analyze --diff A B'.",
        "fail_on": "With --diff: per-metric thresholds, e.g. step_time=5,exposed_comm=10; exit 3 past one.",
        "fail_on_regression": "With --diff: same as --fail-on step_time=PCT.",
        "straggler_pct": "Flag ranks whose mean step time lies more than this percent from the median (default 5).",
        "top": "Rows shown in each terminal table (default 15).",
        "full_names": "Show kernel names whole in the terminal (default: the function's name, one line each; "
        "report.html shows the whole name on hover, --json has both).",
        "strict": "Stop at the first report that cannot be read (default: analyze the others, name the missing ranks "
        "first in every output, exit 4).",
        "slurm": "Analyze where the reports are: a Slurm job array maps the run folder's reports (analyze-part), a job "
        "after it merges them (analyze-merge) into report.html and analysis.json in the run folder.",
        "k8s": "Analyze where the reports are: a Kubernetes Indexed Job maps the reports on K8S_REPORT_PVC, a Job "
        "merges them.",
        "wait": "With --slurm/--k8s: follow the jobs (parts done / total) and print the merged analysis.",
        "slurm_max_parallel": "With --slurm/--k8s: at most this many map elements at once (the array's %N, the Job's "
        "parallelism); default: no cap.",
        "dry_run": "With --slurm/--k8s: check and render the jobs into RUN/analysis-jobs/ only; submit nothing.",
        "profile": PROFILE_HELP,
    },
)
def analyze(
    c, path=None, json_=False, html=True, output=None, timeline=False, timeline_max_events=None, diff=None,
    fail_on=None, fail_on_regression=None, straggler_pct=None, top=None, full_names=False, strict=False,
    slurm=False, k8s=False, wait=False, slurm_max_parallel=None, dry_run=False, profile=None,
):  # fmt: skip
    """Findings first, then kernels, GPU breakdown and overlap, NVTX, NCCL sizes, ranks, NCCL logs; report.html, timeline."""
    if slurm or k8s:
        return _analyze_on_cluster(c, path, slurm, k8s, wait, slurm_max_parallel, dry_run, profile, timeline,
                                   timeline_max_events, straggler_pct, strict)  # fmt: skip
    if wait or dry_run or slurm_max_parallel is not None:
        raise UsageError("--wait, --dry-run and --slurm-max-parallel go with --slurm or --k8s",
                         fix="invoke analyze RUN_FOLDER --slurm --wait")  # fmt: skip
    from nsyskit.analysis import (
        DEFAULT_MAX_EVENTS,
        outputs,
        print_profiler_analysis,
        profiler_of,
        run_profiler_analysis,
    )

    rows = int(number_flag("--top", top, 15, integer=True, low=1))
    straggler = number_flag("--straggler-pct", straggler_pct, 5.0)
    threshold = number_flag("--fail-on-regression", fail_on_regression, None)
    max_events = int(number_flag("--timeline-max-events", timeline_max_events, DEFAULT_MAX_EVENTS, integer=True, low=1))
    if diff:
        from nsyskit.analysis import diff_table, run_diff

        result = run_diff(_paths(diff), _paths(path), fail_on, threshold)
        if json_:
            _print_json(result.to_json())
        else:
            console.out.print(diff_table(result, full_names))
        if result.regressions:
            raise RegressionFound(
                f"regression past the threshold: {', '.join(result.regressions)} (A={diff}, B={path})",
                fix="see the table above; when the change is expected, raise the threshold with --fail-on METRIC=PCT",
            )
        return
    if threshold is not None or fail_on is not None:
        raise UsageError(
            "--fail-on and --fail-on-regression need a baseline (--diff)",
            fix="use 'invoke analyze --diff BASELINE RUN --fail-on step_time=5'",
        )
    paths = _paths(path)
    folder = _check_output(output) or outputs.report_folder(paths)
    profiler = profiler_of(paths)
    if profiler != "nsys":  # PROFILER=ncu or torch runs: their own tables, shown the same way
        other, page = run_profiler_analysis(profiler, paths, folder, html, straggler)
        if json_:
            _print_json(other.to_json())
        else:
            print_profiler_analysis(other, console.out, top=rows)
        if page:
            console.done(f"report: {page}")
        return
    if not json_:  # rich (~50 ms to import) loads while the reports are read: the tables need it only at the end
        threading.Thread(target=_import_rich, daemon=True).start()
    result = outputs.analyze(paths, folder, straggler, _progress("analyze"), full_names, strict)
    _show_and_write(result, json_, rows, html, timeline, max_events)


def _analyze_on_cluster(c, path, slurm, k8s, wait, max_parallel, dry_run, profile, timeline, timeline_max_events,
                        straggler_pct, strict) -> None:  # fmt: skip
    """analyze --slurm / --k8s: the run folder's map and merge submitted where the reports are."""
    from importlib import import_module

    from nsyskit.clusteranalysis import make_plan, submit_and_follow

    if slurm and k8s:
        raise UsageError("--slurm and --k8s both given", fix="choose the cluster the reports are on")
    folders = _paths(path)
    if len(folders) != 1 or not Path(folders[0]).is_dir():
        raise UsageError(f"--slurm/--k8s analyze one run folder, not {path!r}", fix="pass the run folder (reports/<run-id>)")
    cap = None if max_parallel is None else int(number_flag("--slurm-max-parallel", max_parallel, 1, integer=True, low=1))
    events = None if timeline_max_events is None else int(
        number_flag("--timeline-max-events", timeline_max_events, 1, integer=True, low=1))  # fmt: skip
    straggler = None if straggler_pct is None else number_flag("--straggler-pct", straggler_pct, 5.0)
    cfg = load(c, profile)
    plan = make_plan(Path(folders[0]), cap, timeline, events, straggler, strict)
    runner = import_module("nsyskit.slurm.analysis" if slurm else "nsyskit.k8s.analysis")
    for line in submit_and_follow(runner, cfg, project_root(c), plan, wait, dry_run):
        console.done(line) if line.startswith("report:") else console.out.print(line, markup=False, highlight=False)


def _show_and_write(result, json_: bool, rows: int, html: bool, timeline: bool = False, max_events: int = 0) -> None:
    """Print an analysis (tables or JSON) and its warnings, then write its files and say where they are."""
    from nsyskit.analysis import grouped, outputs, print_report, render_json

    if json_:
        _print_json(render_json(result.report))
    else:
        print_report(result.report, console.out, top=rows)
    ranks = len(result.analysis.sources)
    for warning in grouped(result.analysis.warnings, ranks):  # one line for what holds on many ranks
        console.warn(warning)
    outputs.write(result, html, timeline, max_events, _progress("timeline"))
    for note in grouped(result.timeline_notes, ranks):
        console.warn(note)
    if result.timeline:
        console.done(f"timeline: {result.timeline} (open https://ui.perfetto.dev and drop the file on it)")
    if result.report_html:
        console.done(f"report: {result.report_html}")
    if result.analysis.incomplete:  # the outputs are written, and say so first; a script learns it from the code
        left_out = "; ".join(line.partition("; fix:")[0] for line in result.analysis.incomplete[:3])
        raise PartialAnalysis(f"the analysis is incomplete: {left_out}",
                              fix="see the first lines of the output (and analysis.json's run.incomplete); "
                              "--strict stops at the first unreadable report instead")  # fmt: skip


@task(
    name="analyze-part",
    positional=["path"],
    help={
        "path": "Reports or a run folder to map (comma-separated), as 'invoke analyze' takes them.",
        "out": "Folder the part files go to, one per report (default: PATH's folder/analysis-parts).",
        "array_index": "This array element's index (e.g. $SLURM_ARRAY_TASK_ID): it maps reports index, index+size, ...",
        "array_size": "How many array elements share the reports (with --array-index).",
        "strict": "Stop at the first report that cannot be read (default: its part says why, the merge names its rank).",
        "timeline": "Also keep each rank's share of the run's timeline in its part ('analyze-merge --timeline').",
        "timeline_max_events": "Cap on the timeline's events over all ranks (default 500000), shared by the run's reports.",
    },
)
def analyze_part(
    c, path=None, out=None, array_index=None, array_size=None, strict=False, timeline=False, timeline_max_events=None
):  # fmt: skip
    """The map of a cluster analysis: analyze each report (exported with the nsys beside it) into a small part file."""
    from nsyskit.analysis import map_reports

    paths = _paths(path)
    index = None if array_index is None else int(number_flag("--array-index", array_index, 0, integer=True))
    size = None if array_size is None else int(number_flag("--array-size", array_size, 1, integer=True, low=1))
    folder = Path(out) if out else (Path(paths[0]) if Path(paths[0]).is_dir() else Path(paths[0]).parent) / PARTS
    from nsyskit.analysis import DEFAULT_MAX_EVENTS

    events = int(number_flag("--timeline-max-events", timeline_max_events, DEFAULT_MAX_EVENTS, integer=True, low=1))
    written = map_reports(paths, folder, index, size, _progress("map"), strict, events if timeline else None)
    console.done(f"{len(written)} part(s) in {folder}")


@task(
    name="analyze-merge",
    positional=["parts"],
    help={
        "parts": "Folder of the part files 'invoke analyze-part' wrote.",
        "json": "Print the whole analysis as JSON on stdout instead of tables (report.html is still written).",
        "html": "Write report.html, the PNG plots and analysis.json (default: yes; --no-html skips).",
        "output": "Folder for report.html and analysis.json (default: the run folder the parts were mapped from).",
        "straggler_pct": "A straggler is more than this percent over the median of the other ranks (default 5).",
        "top": "Rows shown in each terminal table (default 15).",
        "full_names": "Show kernel names whole in the terminal.",
        "strict": "Stop at the first missing, failed or unreadable part (default: merge the others, name the missing "
        "ranks and why first in every output, exit 4).",
        "timeline": "Also write timeline.json.gz from the ranks' timelines the parts hold (mapped with --timeline).",
    },
)
def analyze_merge(
    c, parts=None, json_=False, html=True, output=None, straggler_pct=None, top=None, full_names=False, strict=False,
    timeline=False,
):  # fmt: skip
    """The reduce of a cluster analysis: merge the parts into what 'invoke analyze' makes of the same reports."""
    from nsyskit.analysis import merge_parts, merged_timelines, outputs

    if not parts:
        raise UsageError("no parts folder given", fix="invoke analyze-merge PARTS_DIR")
    rows = int(number_flag("--top", top, 15, integer=True, low=1))
    straggler = number_flag("--straggler-pct", straggler_pct, 5.0)
    analysis, facts = merge_parts(Path(parts), straggler, strict)
    timelines = merged_timelines(facts["part_files"], analysis) if timeline else None  # before printing: may refuse
    folder = _check_output(output) or Path(facts["folder"])
    result = outputs.of_analysis([facts["folder"]], folder, analysis, full_names)
    result.timelines = timelines
    _show_and_write(result, json_, rows, html, timeline)

def _progress(what: str):
    """A progress callback printing '<what>: i/N reports' about ten times, from 8 reports on (few are quick)."""

    def show(done: int, total: int) -> None:
        if total >= PROGRESS_FROM and (done == total or done % max(1, total // 10) == 0):
            console.info(f"{what}: {done}/{total} reports")

    return show


def _import_rich() -> None:
    """Import what the terminal tables use (run in a thread beside the analysis)."""
    import rich.console  # noqa: F401
    import rich.table  # noqa: F401


def _print_json(data: object) -> None:
    """JSON on stdout with the plain encoder (rich's highlighter takes seconds and GBs on large analyses)."""
    json.dump(data, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


@task(positional=["report"], help={"report": "A .nsys-rep (or a folder of them) to run nsys recipes on."})
def recipes(c, report=None):
    """Run nsys recipes (kernel summary, nccl_sum, NCCL/GPU overlap, gpu_gaps) when the installed nsys has them."""
    from nsyskit.analysis import run_recipes

    results = run_recipes(Path(_paths(report)[0]))
    for result in results:
        if result.ok:
            console.done(f"{result.name}: {result.output}")
        else:
            console.warn(f"{result.name} failed: {result.message}")
    if not any(r.ok for r in results):
        raise AnalysisError(report, "no recipe succeeded", "see the messages above")
