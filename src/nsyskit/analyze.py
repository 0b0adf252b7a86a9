"""The one entry point of 'invoke analyze': an AnalyzeRequest in, the answer it asks for printed and written.

Modes (AnalyzeRequest.mode): 'explain' prints what a findings rule measures; 'diff' compares two runs and gates on thresholds; 'cluster' maps and merges the run
where its reports are (nsyskit.clusteranalysis); 'run' analyzes here, with the run's own profiler (nsys, or the ncu
and torch analyses of nsyskit.analysis.dispatch). Results go to stdout (tables or JSON), progress and files
written to stderr.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from nsyskit import console
from nsyskit.analysis.process import load_numpy_single_threaded
from nsyskit.analysis.request import AnalyzeRequest
from nsyskit.errors import ConfigError, PartialAnalysis, RegressionFound

PROGRESS_FROM = 8  # reports in a run from which analyze and --timeline print their progress


def answer(request: AnalyzeRequest) -> None:
    """Do what the request asks (after checking that its flags go together); errors are NsyskitErrors."""
    load_numpy_single_threaded()  # before any analysis module imports numpy (analysis/process.py says why)
    request.check()
    {"explain": _explain, "diff": _diff, "cluster": _on_cluster, "run": _here}[request.mode](request)


def _explain(request: AnalyzeRequest) -> None:
    """--explain RULE (or 'all'): what the rule measures, when it fires, what to try."""
    from nsyskit.analysis.judge.findings import CATALOG, explain

    rules = sorted(CATALOG) if request.explain == "all" else [request.explain]
    console.out.print("\n\n".join(explain(rule) for rule in rules), markup=False, highlight=False)


def _diff(request: AnalyzeRequest) -> None:
    """Run B (the request's paths) against baseline A (--diff): the table or JSON, and the CI gate."""
    from nsyskit.analysis import diff_table, run_diff

    result = run_diff(request.diff, request.paths, request.fail_on, request.fail_on_regression)
    if request.json:
        print_json(result.to_json())
    else:
        console.out.print(diff_table(result, request.full_names))
    if result.regressions:
        raise RegressionFound(
            f"regression past the threshold: {', '.join(result.regressions)} "
            f"(A={','.join(request.diff)}, B={','.join(request.paths)})",
            fix="see the table above; when the change is expected, raise the threshold with --fail-on METRIC=PCT",
        )


def _on_cluster(request: AnalyzeRequest) -> None:
    """--slurm / --k8s: the run folder's map and merge submitted where the reports are."""
    from dataclasses import replace
    from importlib import import_module

    from nsyskit.clusteranalysis import make_plan, submit_and_follow

    cluster = request.cluster
    request.judge_inputs()  # --fabric's outputs read here first: one that holds no table stops before any job
    tree_ranks = request.tree_ranks or cluster.cfg.analyze_tree_ranks
    plan = make_plan(Path(request.paths[0]), request.max_parallel, request.timeline, request.timeline_max_events,
                     request.straggler_pct, request.strict, tree_ranks)  # fmt: skip
    plan = replace(plan, merge_options=request.judge_words())  # the merge's rules get what this request's would
    runner = import_module(f"nsyskit.{cluster.engine}.analysis")
    for line in submit_and_follow(runner, cluster.cfg, cluster.root, plan, request.wait, request.dry_run):
        console.done(line) if line.startswith("report:") else console.out.print(line, markup=False, highlight=False)


def _here(request: AnalyzeRequest) -> None:
    """Analyze the run in this process with the profiler that recorded it; print, then write the files."""
    from nsyskit.analysis import outputs, print_profiler_analysis, profiler_of, run_profiler_analysis

    folder = check_output(request.output) or outputs.report_folder(request.paths)
    profiler = profiler_of(request.paths)
    if profiler != "nsys":  # PROFILER=ncu or torch runs: their own tables, shown the same way
        other, page = run_profiler_analysis(profiler, request.paths, folder, request.html, request.straggler)
        if request.json:
            print_json(other.to_json())
        else:
            print_profiler_analysis(other, console.out, top=request.top)
        if page:
            console.done(f"report: {page}")
        return
    if not request.json:  # rich (~50 ms to import) loads while the reports are read: the tables need it only at the end
        threading.Thread(target=_import_rich, daemon=True).start()
    result = outputs.analyze(request.paths, folder, request.straggler, progress("analyze"), request.full_names,
                             request.strict, request.judge_inputs())  # fmt: skip
    show_and_write(result, request)


def show_and_write(result, request: AnalyzeRequest) -> None:
    """Print an analysis (tables or JSON) and its warnings, then write its files and say where they are."""
    from nsyskit.analysis import DEFAULT_MAX_EVENTS, grouped, outputs, print_report, render_json

    if request.json:
        print_json(render_json(result.report))
    else:
        print_report(result.report, console.out, top=request.top)
    ranks = len(result.analysis.sources)
    for warning in grouped(result.analysis.warnings, ranks):  # one line for what holds on many ranks
        console.warn(warning)
    events = request.timeline_max_events or DEFAULT_MAX_EVENTS
    outputs.write(result, request.html, request.timeline, events, progress("timeline"))
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


def check_output(output: str | Path | None) -> Path | None:
    """The --output folder; an error when it names a file (checked before the analysis runs)."""
    if not output:
        return None
    folder = Path(output)
    for part in (folder, *folder.parents):
        if part.exists():
            if not part.is_dir():
                raise ConfigError("--output", str(output), f"{part} is a file, not a folder", "pass a folder for report.html")
            break
    return folder


def progress(what: str, unit: str = "reports", start: int = PROGRESS_FROM) -> Callable[[int, int], None]:
    """A progress callback printing '<what>: i/N <unit>' about ten times, from `start` of them on."""

    def show(done: int, total: int) -> None:
        if total >= start and (done == total or done % max(1, total // 10) == 0):
            console.info(f"{what}: {done}/{total} {unit}")

    return show


def print_json(data: object) -> None:
    """JSON on stdout with the plain encoder (rich's highlighter takes seconds and GBs on large analyses)."""
    json.dump(data, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _import_rich() -> None:
    """Import what the terminal tables use (run in a thread beside the analysis)."""
    import rich.console  # noqa: F401
    import rich.table  # noqa: F401
