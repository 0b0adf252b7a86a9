"""Tasks that turn nsys reports into answers: analyze (tables, report.html, diff, CI gate) and recipes."""

from __future__ import annotations

from pathlib import Path

from nsyskit import console
from nsyskit.analysis.request import DEFAULT_TOP, AnalyzeRequest, ClusterRequest, dtype_flag, no_reports, split_paths
from nsyskit.analyze import progress
from nsyskit.cli import PROFILE_HELP, load, number_flag, project_root, task
from nsyskit.errors import AnalysisError, UsageError

PARTS = "analysis-parts"  # the default folder of analyze-part's part files, beside the reports
# The findings' inputs beyond the reports, taken alike by analyze and analyze-merge (AnalyzeRequest.judge_inputs).
JUDGE_HELP = {
    "flops_per_step": "The model's training FLOPs of one step on one GPU (e.g. 6 x parameters x tokens per GPU per "
    "step, plus attention): the low_mfu rule reports achieved TFLOP/s per GPU and MFU (default: what the kit's "
    "example marked in its report; without either, no MFU).",
    "dtype": "The dtype of the model's math, whose dense peak MFU is against: bf16, fp16, tf32, fp32 or fp8 "
    "(default: the example's mark, else bf16).",
    "gpu_model": "The GPU model to take the peak of when the export names none (e.g. H100-SXM, A100-PCIe, L40S, "
    "MI300X); default: the export's GPU name.",
    "fabric": "nccl-tests output(s) measured on the same fabric (files, or the run folder of a nccl-tests workload), "
    "comma-separated: each collective row gets nccl-tests' busbw at its size and the ratio; a finding when a bucket "
    "with >= 10% of the NCCL time reaches under 50% of it.",
}


def _paths(path: str | None) -> list[str]:
    """The comma-separated paths given, or the one-line error of none."""
    parts = split_paths(path)
    if not parts:
        raise no_reports()
    return parts


@task(
    positional=["path"],
    help={
        "path": "Run folder (reports/<run-id>) or report files (.nsys-rep, .qdrep, .sqlite, .qdstrm; .ncu-rep; .pt.trace.json.gz), comma-separated; a quoted pattern ('RUN/*-all-gather_*') takes the reports it matches.",
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
        "tree_ranks": "With --slurm/--k8s: past this many reports, merge as a tree: blocks of 512 parts merged side by "
        "side, then the final merge of those (default: ANALYZE_TREE_RANKS, 1024).",
        "explain": "PATH is a findings rule: print what it measures, when it fires (its thresholds) and what to try, "
        "e.g. 'invoke analyze --explain sync_stall' ('all': every rule); reads no report.",
        "profile": PROFILE_HELP,
        **JUDGE_HELP,
    },
)
def analyze(
    c, path=None, json_=False, html=True, output=None, timeline=False, timeline_max_events=None, diff=None,
    fail_on=None, fail_on_regression=None, straggler_pct=None, top=None, full_names=False, strict=False,
    slurm=False, k8s=False, wait=False, slurm_max_parallel=None, dry_run=False, explain=False, profile=None,
    flops_per_step=None, dtype=None, gpu_model=None, fabric=None, tree_ranks=None,
):  # fmt: skip
    """Findings first, then kernels, GPU breakdown and overlap, NVTX, NCCL sizes, ranks, NCCL logs; report.html, timeline."""
    from nsyskit.analyze import answer

    if slurm and k8s:
        raise UsageError("--slurm and --k8s both given", fix="choose the cluster the reports are on")
    engine = "slurm" if slurm else "k8s" if k8s else None
    cluster = ClusterRequest(engine, load(c, profile), project_root(c)) if engine else None
    answer(AnalyzeRequest(
        paths=[] if explain else split_paths(path), json=json_, html=html, output=output and Path(output), timeline=timeline,
        timeline_max_events=_int_flag("--timeline-max-events", timeline_max_events),
        straggler_pct=number_flag("--straggler-pct", straggler_pct, None),
        top=int(number_flag("--top", top, DEFAULT_TOP, integer=True, low=1)), full_names=full_names, strict=strict,
        diff=_paths(diff) if diff else None, fail_on=fail_on,
        fail_on_regression=number_flag("--fail-on-regression", fail_on_regression, None),
        cluster=cluster, wait=wait, max_parallel=_int_flag("--slurm-max-parallel", slurm_max_parallel),
        tree_ranks=_int_flag("--tree-ranks", tree_ranks),
        dry_run=dry_run, explain=path if explain else None, **_judge_flags(flops_per_step, dtype, gpu_model, fabric),
    ))  # fmt: skip


def _judge_flags(flops_per_step: object, dtype: object, gpu_model: object, fabric: object = None) -> dict:
    """--flops-per-step, --dtype, --gpu-model and --fabric as AnalyzeRequest fields (checked: one error line for a
    bad value)."""
    return {"flops_per_step": number_flag("--flops-per-step", flops_per_step, None, low=1.0),
            "dtype": dtype_flag(dtype), "gpu_model": str(gpu_model) if gpu_model else None,
            "fabric": split_paths(str(fabric)) or None if fabric else None}  # fmt: skip


def _int_flag(flag: str, value: object) -> int | None:
    """A whole-number flag >= 1, None when not given."""
    return None if value is None else int(number_flag(flag, value, None, integer=True, low=1))


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
    written = map_reports(paths, folder, index, size, progress("map"), strict, events if timeline else None)
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
        "partial": "Write a partial merge of the parts into this folder instead (block.part.npz, or block-N.part.npz "
        "with --array-index N): a file 'analyze-merge FOLDER' merges as it merges the parts themselves.",
        "array_index": "With --partial: this array element's block of the part files in name order, rank_2 before rank_10 (e.g. $SLURM_ARRAY_TASK_ID).",
        "array_size": "With --partial: how many blocks the part files are cut into (with --array-index).",
        "workers": "Processes merging blocks of the parts side by side, from 512 parts on (default: the CPUs this job "
        "may use, at most 8; each holds up to 1,024 parts' tables, ~300 MB for large ranks; 1: one process).",
        **JUDGE_HELP,
    },
)
def analyze_merge(
    c, parts=None, json_=False, html=True, output=None, straggler_pct=None, top=None, full_names=False, strict=False,
    timeline=False, flops_per_step=None, dtype=None, gpu_model=None, fabric=None, partial=None, array_index=None,
    array_size=None, workers=None,
):  # fmt: skip
    """The reduce of a cluster analysis: merge the parts into what 'invoke analyze' makes of the same reports."""
    from nsyskit.analysis import default_workers, merged_parts, merged_timelines, outputs
    from nsyskit.analyze import check_output, show_and_write

    if not parts:
        raise UsageError("no parts folder given", fix="invoke analyze-merge PARTS_DIR")
    if partial:
        from nsyskit.analysis import merge_block

        index = None if array_index is None else int(number_flag("--array-index", array_index, 0, integer=True))
        size = None if array_size is None else int(number_flag("--array-size", array_size, 1, integer=True, low=1))
        console.done(f"partial merge in {merge_block(Path(parts), Path(partial), index, size, strict)}")
        return
    if array_index is not None or array_size is not None:
        raise UsageError("--array-index/--array-size without --partial", fix="add --partial FOLDER, or drop them")
    rows = int(number_flag("--top", top, 15, integer=True, low=1))
    straggler = number_flag("--straggler-pct", straggler_pct, 5.0)
    request = AnalyzeRequest([parts], json=json_, html=html, timeline=timeline, top=rows,
                             **_judge_flags(flops_per_step, dtype, gpu_model, fabric))  # fmt: skip
    processes = int(number_flag("--workers", workers, default_workers(), integer=True, low=1))
    inputs = request.judge_inputs()  # --fabric read before the merge: a file without a table stops it at once
    with merged_parts(Path(parts), straggler, strict, processes, progress("merge", "blocks of parts merged side by side", 1)) as (analysis, facts):
        timelines = merged_timelines(facts["part_files"], analysis) if timeline else None  # before printing: may refuse
    folder = check_output(output) or Path(facts["folder"])
    result = outputs.of_analysis([facts["folder"]], folder, analysis, full_names, inputs)
    result.timelines = timelines
    show_and_write(result, request)

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
