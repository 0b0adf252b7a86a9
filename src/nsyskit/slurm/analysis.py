"""A run's analysis on Slurm: the map as one job array over its reports, the merge as a job after it (afterok), and
past ANALYZE_TREE_RANKS reports a job array of partial merges between them (the merge as a tree); in Pyxis mode, an import job before the map when the run's image must become a .sqsh first (nsyskit.slurm.analysis_image)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from nsyskit import console
from nsyskit.clusteranalysis import (
    AnalysisPlan,
    clear_parts,
    count_blocks,
    count_elements,
    parts_done,
    record_submitted,
    without_report_line,
    words,
)
from nsyskit.config import Config
from nsyskit.errors import ConfigError, ConfigErrors, JobError, PartialAnalysis
from nsyskit.jobdir import write_record
from nsyskit.slurm import scheduler
from nsyskit.slurm.analysis_image import AnalysisImage, analysis_image
from nsyskit.slurm.render import container_image, environment
from nsyskit.templates import render_template

IMPORT_SCRIPT, MAP_SCRIPT, MERGE_SCRIPT = "import.sbatch", "map.sbatch", "merge.sbatch"
PARTIAL_SCRIPT = "partial.sbatch"  # a tree's partial merges
# sbatch fills in the job id, the array's id and the element
IMPORT_LOG, MAP_LOG, MERGE_LOG = "import-%j.out", "map-%A_%a.out", "merge-%j.out"
PARTIAL_LOG = "partial-%A_%a.out"
PARTIAL_EXIT = PartialAnalysis.exit_code  # analyze-merge's exit code when ranks are left out (the report is written)


@dataclass(frozen=True)
class Submitted:
    """The two jobs of one analysis: the map's array job id and the merge's job id."""

    map_id: str
    merge_id: str
    import_id: str = ""  # the job importing the image before the map ('' when none was needed)
    image: AnalysisImage | None = None  # what the jobs run in Pyxis mode
    partial_id: str = ""  # the array of a tree's partial merges, between the map and the merge ('' when none)


def how_it_runs(cfg: Config, plan: AnalysisPlan) -> tuple[str, str]:
    """(mode, image) of the analysis: as the run ran (its run.json of a Slurm job), else as SLURM_MODE says."""
    from nsyskit.analysis.read.runinfo import run_record

    record = run_record(plan.run)
    if record is not None and record.target == "slurm" and (record.details or {}).get("mode") in ("pyxis", "host"):
        mode = record.details["mode"]
        return mode, (record.image if mode == "pyxis" else "")
    return cfg.slurm_mode, (container_image(cfg) if cfg.slurm_mode == "pyxis" else "")


def image_of(cfg: Config, plan: AnalysisPlan) -> AnalysisImage | None:
    """The squashfs the Pyxis jobs run and whether it is imported first (None in host mode)."""
    from nsyskit.analysis.read.runinfo import run_record

    mode, image = how_it_runs(cfg, plan)
    if mode != "pyxis":
        return None
    record = run_record(plan.run)
    recorded_id = str((record.details or {}).get("image_id", "")) if record is not None and record.image == image else ""
    return analysis_image(cfg, image, recorded_id)


def problems(cfg: Config, plan: AnalysisPlan) -> list[ConfigError]:
    """What keeps the compute nodes from the run folder, checked here before anything is submitted."""
    from nsyskit.config.slurm_parse import image_file
    from nsyskit.targets.slurm import image_problems

    mode, image = how_it_runs(cfg, plan)
    from_settings = mode == cfg.slurm_mode and image == (container_image(cfg) if mode == "pyxis" else "")
    errors = image_problems(cfg) if mode == "pyxis" and from_settings else []  # a run's recorded image needs no REGISTRY
    squashfs = image_file(image) if mode == "pyxis" else None
    if squashfs and not Path(squashfs).is_file():  # the run's .sqsh, removed since: Pyxis would fail on every element
        errors.append(ConfigError(
            "image", image, "is the squashfs image the analysis would run in (the run's), and it does not exist",
            f"write it again at that path ('invoke enroot-import' for SLURM_SQSH, else 'enroot import -o {squashfs} "
            "URI' of the run's image)",
        ))  # fmt: skip
    shared = Path(cfg.slurm_shared_dir)
    if not plan.run.is_relative_to(shared.resolve() if shared.exists() else shared):
        errors.append(ConfigError(
            "run folder", str(plan.run), f"is not on SLURM_SHARED_DIR ({cfg.slurm_shared_dir}), so the compute nodes "
            "cannot read its reports", f"keep runs on the shared file system (under {cfg.slurm_shared_dir}), or set "
            "SLURM_SHARED_DIR to the shared folder that holds this run",
        ))  # fmt: skip
    if any(c.isspace() for c in str(plan.run)):
        errors.append(ConfigError("run folder", str(plan.run), "contains blanks, which #SBATCH --output cannot quote",
                                  "move the run to a path without blanks"))  # fmt: skip
    return errors


def scripts(cfg: Config, root: Path, plan: AnalysisPlan) -> dict[str, str]:
    """The sbatch scripts (name -> text): the image's import when Pyxis needs it first, the map, the merge."""
    mode, _image = how_it_runs(cfg, plan)
    image = image_of(cfg, plan)
    shared = cfg.slurm_shared_dir
    mounts = ",".join(dict.fromkeys([f"{shared}:{shared}", *(m for m in cfg.slurm_container_mounts.split(",") if m)]))
    sqsh = Path(image.sqsh) if image else Path()
    common = {
        "folder": str(plan.folder), "mode": mode, "container_image": image.sqsh if image else "",
        "container_mounts": mounts, "image_note": image.describe() if image else "", "image_uri": image.uri if image else "",
        "sqsh_folder": str(sqsh.parent), "partial": str(sqsh.parent / f".{sqsh.name}.partial-"),
        "nsyskit": words(cfg.slurm_nsyskit), "partition": cfg.slurm_partition, "account": cfg.slurm_account,
        "time_limit": cfg.slurm_time_limit, "elements": plan.elements, "max_parallel": plan.max_parallel,
        "blocks": plan.blocks,
    }  # fmt: skip
    jobs = [
        (MAP_SCRIPT, "analyze-map.sbatch.j2", MAP_LOG, plan.map_arguments(),
         f"the map of {plan.run}'s analysis, {count_elements(plan)}: element i takes reports i, i+{plan.elements}, ...",
         "nsyskit-map"),
        (MERGE_SCRIPT, "analyze-merge.sbatch.j2", MERGE_LOG, plan.merge_arguments(),
         f"the merge of {plan.partials if plan.blocks else plan.parts} into report.html and analysis.json in {plan.run}",
         "nsyskit-merge"),
    ]  # fmt: skip
    if plan.blocks:  # the tree's middle level: element i merges block i of the sorted parts
        jobs.insert(1, (PARTIAL_SCRIPT, "analyze-partial.sbatch.j2", PARTIAL_LOG, plan.partial_arguments(),
                        f"the partial merges of {plan.run}'s analysis, {count_blocks(plan)}", "nsyskit-partial"))  # fmt: skip
    if image and image.imports:
        jobs.insert(0, (IMPORT_SCRIPT, "analyze-import.sbatch.j2", IMPORT_LOG, [],
                        f"the import of {image.uri} into {image.sqsh}, once, for the analysis of {plan.run}",
                        "nsyskit-import"))  # fmt: skip
    texts = {}
    for name, template, log, arguments, what, job_name in jobs:
        texts[name] = render_template(environment(root), template, "slurm", {
            **common, "what": what, "job_name": job_name, "log_pattern": str(plan.folder / log), "arguments": arguments,
            "plots": name == MERGE_SCRIPT,
        })  # fmt: skip
    return texts


def render(cfg: Config, root: Path, plan: AnalysisPlan) -> dict[str, Path]:
    """The sbatch scripts written into the run's analysis-jobs/ folder (an earlier import script removed when none
    is needed now); name -> path."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    for unneeded in (IMPORT_SCRIPT, PARTIAL_SCRIPT):  # an earlier analysis' import or tree, not needed now
        (plan.folder / unneeded).unlink(missing_ok=True)
    paths = {}
    for name, text in scripts(cfg, root, plan).items():
        path = plan.folder / name
        path.write_text(text)
        path.chmod(0o755)
        paths[name] = path
    return paths


def prepare(cfg: Config, root: Path, plan: AnalysisPlan) -> list[Path]:
    """Check what the nodes need (every problem at once), then render the scripts; their paths."""
    if errors := problems(cfg, plan):
        raise ConfigErrors(errors)
    return list(render(cfg, root, plan).values())


def submit(cfg: Config, root: Path, plan: AnalysisPlan) -> Submitted:
    """Check, render and submit: the image's import when needed, the map array after it, then the merge after the
    map (afterok each); recorded in job.json."""
    paths = {path.name: path for path in prepare(cfg, root, plan)}
    image = image_of(cfg, plan)
    clear_parts(plan)
    submitted: list[str] = []
    try:
        import_id = scheduler.submit(cfg, paths[IMPORT_SCRIPT]) if IMPORT_SCRIPT in paths else ""
        submitted += [import_id] if import_id else []
        map_id = scheduler.submit(cfg, paths[MAP_SCRIPT], dependency=f"afterok:{import_id}" if import_id else "")
        submitted.append(map_id)
        partial_id = scheduler.submit(cfg, paths[PARTIAL_SCRIPT], dependency=f"afterok:{map_id}") if plan.blocks else ""
        submitted += [partial_id] if partial_id else []
        merge_id = scheduler.submit(cfg, paths[MERGE_SCRIPT], dependency=f"afterok:{partial_id or map_id}")
    except BaseException:
        for job_id in reversed(submitted):  # jobs whose successors were never queued would leave parts and no report
            scheduler.cancel(cfg, job_id)
        raise
    record_submitted(plan, map_id, merge_id, import_id=import_id, image=image.sqsh if image else "",
                     partial_id=partial_id, blocks=plan.blocks)  # fmt: skip
    return Submitted(map_id, merge_id, import_id, image, partial_id)


def submitted_lines(plan: AnalysisPlan, jobs: Submitted) -> list[str]:
    """What the user reads after submitting: the job ids, where the logs and the report will be, how to follow."""
    image = []
    if jobs.image is not None:
        by = f" (Slurm job {jobs.import_id}; log: {plan.folder / IMPORT_LOG.replace('%j', jobs.import_id)})" if jobs.import_id else ""
        image = [f"image: {jobs.image.describe()}{by}; every map element and the merge run it"]
    return [
        *image,
        f"map: Slurm array job {jobs.map_id}, {count_elements(plan)}; logs: {plan.folder / MAP_LOG.replace('%A', jobs.map_id).replace('%a', '<i>')}",
        *_partial_lines(plan, jobs),
        f"merge: Slurm job {jobs.merge_id}, after every {'partial merge' if jobs.partial_id else 'map element'} "
        f"succeeds (afterok); log: {plan.folder / MERGE_LOG.replace('%j', jobs.merge_id)}",
        f"report: {plan.run / 'report.html'} once the merge ends (follow: squeue --jobs "
        f"{','.join(filter(None, (jobs.map_id, jobs.partial_id, jobs.merge_id)))})",
    ]


def _partial_lines(plan: AnalysisPlan, jobs: Submitted) -> list[str]:
    """The tree's middle level, when there is one: its array job, its shape and its logs."""
    if not jobs.partial_id:
        return []
    logs = plan.folder / PARTIAL_LOG.replace("%A", jobs.partial_id).replace("%a", "<i>")
    return [f"partial merges: Slurm array job {jobs.partial_id}, {count_blocks(plan)}, after every map element "
            f"succeeds (afterok); logs: {logs}"]  # fmt: skip


def map_log(plan: AnalysisPlan, map_id: str, element: int) -> Path:
    """The log of one map element."""
    return plan.folder / MAP_LOG.replace("%A", map_id).replace("%a", str(element))


def follow(cfg: Config, plan: AnalysisPlan, jobs: Submitted, poll_s: float = scheduler.POLL_S) -> Path:
    """Wait for the map (parts done / total) and the merge; print the merged analysis; the report's path.

    A failed map element is named with its reports and its log, and the merge (which afterok would keep pending
    for ever) is cancelled: the error says how to merge the parts that exist. A failed import cancels both.
    """
    if jobs.import_id:
        _follow_import(cfg, plan, jobs, poll_s)
    total, shown, last = len(plan.reports), None, 0.0
    while True:
        states = scheduler.array_states(cfg, jobs.map_id)
        done = parts_done(plan)
        counts = _count(states.values())
        line = f"map: {done}/{total} parts ({counts})"
        if line != shown or time.monotonic() - last > 30:
            console.info(line)
            shown, last = line, time.monotonic()
        if states and all(state.final for state in states.values()) and len(states) >= plan.elements:
            break
        time.sleep(poll_s)
    failed = {index: s for index, s in sorted(states.items()) if s.state != "COMPLETED" or s.exit_code}
    if failed:
        scheduler.cancel(cfg, jobs.merge_id)
        raise JobError(_failure(plan, jobs.map_id, failed),
                       fix=f"read the log(s); the parts that exist merge with 'invoke analyze-merge {plan.parts}' "
                       "(it names the missing ranks), or run 'invoke analyze --slurm' again")  # fmt: skip
    if jobs.partial_id:
        _follow_partials(cfg, plan, jobs, poll_s)
    phases = console.Phases(f"merge: Slurm job {jobs.merge_id}")
    final = scheduler.wait(cfg, jobs.merge_id, poll_s, on_poll=lambda s: phases.update(s.state))
    log = plan.folder / MERGE_LOG.replace("%j", jobs.merge_id)
    write_record(plan.folder, merge_state=final.state, merge_exit_code=final.exit_code)
    if log.is_file():  # the merge's tables; its 'report: ...' line is the command's to print, once
        console.out.print(without_report_line(log.read_text(errors="replace"), plan.run / "report.html").rstrip(),
                          markup=False, highlight=False)  # fmt: skip
    if final.state == "COMPLETED" and final.exit_code == 0:
        return plan.run / "report.html"
    if final.exit_code == PARTIAL_EXIT and (plan.run / "analysis.json").is_file():
        raise PartialAnalysis(f"the merged analysis of {plan.run} is incomplete (see its first lines above)",
                              fix=f"report: {plan.run / 'report.html'}; the map log(s) in {plan.folder} say why")  # fmt: skip
    raise JobError(f"the merge (Slurm job {jobs.merge_id}) ended {final.state} with exit code {final.exit_code}; log: {log}",
                   fix="read the log; the parts stay in " + str(plan.parts))  # fmt: skip


def _follow_import(cfg: Config, plan: AnalysisPlan, jobs: Submitted, poll_s: float) -> None:
    """Wait for the image's import; when it fails, cancel the map and the merge (afterok would keep them pending for
    ever) and say why, from its log."""
    phases = console.Phases(f"image import: Slurm job {jobs.import_id}")
    final = scheduler.wait(cfg, jobs.import_id, poll_s, on_poll=lambda s: phases.update(s.state))
    if final.state == "COMPLETED" and final.exit_code == 0:
        return
    for job_id in (jobs.merge_id, jobs.map_id):
        scheduler.cancel(cfg, job_id)
    log = plan.folder / IMPORT_LOG.replace("%j", jobs.import_id)
    image = jobs.image.uri if jobs.image else "the run's image"
    raise JobError(f"the import of {image} (Slurm job {jobs.import_id}) ended {final.state}, exit code "
                   f"{final.exit_code}, log {log}{_last_line(log)}; the map and the merge were cancelled",
                   fix="the compute nodes need enroot (Pyxis' own) and access to the image (its Docker daemon for "
                   "dockerd://, enroot's .credentials for a registry: 'invoke enroot-credentials'); then run 'invoke "
                   "analyze --slurm' again")  # fmt: skip


def _follow_partials(cfg: Config, plan: AnalysisPlan, jobs: Submitted, poll_s: float) -> None:
    """Wait for a tree's partial merges; a failed one is named with its log, and the merge (which afterok would keep
    pending for ever) is cancelled: the error says how to merge the parts without the tree."""
    phases = console.Phases(f"partial merges: Slurm array job {jobs.partial_id}")
    while True:
        states = scheduler.array_states(cfg, jobs.partial_id)
        phases.update(_count(states.values()))
        if states and all(state.final for state in states.values()) and len(states) >= plan.blocks:
            break
        time.sleep(poll_s)
    failed = {index: s for index, s in sorted(states.items()) if s.state != "COMPLETED" or s.exit_code}
    if not failed:
        return
    scheduler.cancel(cfg, jobs.merge_id)
    index, state = next(iter(failed.items()))
    log = plan.folder / PARTIAL_LOG.replace("%A", jobs.partial_id).replace("%a", str(index))
    raise JobError(f"{len(failed)} of {plan.blocks} partial merge(s) of Slurm array job {jobs.partial_id} failed: "
                   f"block {index} ended {state.state}, exit code {state.exit_code}, log {log}{_last_line(log)}",
                   fix=f"read the log; the parts merge without the tree: 'invoke analyze-merge {plan.parts}'")  # fmt: skip


def _count(states) -> str:
    """'3 running, 12 pending, 1 completed' from the elements' states."""
    tally: dict[str, int] = {}
    for state in states:
        tally[state.state.lower()] = tally.get(state.state.lower(), 0) + 1
    return ", ".join(f"{n} {name}" for name, n in sorted(tally.items())) or "not started"


def _failure(plan: AnalysisPlan, map_id: str, failed: dict[int, scheduler.JobState]) -> str:
    """One line naming each failed element (its first reports, state, exit code and log), at most five."""
    said = []
    for index, state in list(failed.items())[:5]:
        said.append(f"element {index} ({plan.named_reports(index)}) ended {state.state}, exit code {state.exit_code}, "
                    f"log {map_log(plan, map_id, index)}{_last_line(map_log(plan, map_id, index))}")  # fmt: skip
    more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
    return f"{len(failed)} of {plan.elements} map element(s) of Slurm array job {map_id} failed: " + "; ".join(said) + more


def _last_line(log: Path) -> str:
    """': <the log's last line>' (what the element said last), '' when the log is empty or missing."""
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f": {lines[-1].strip()[:200]}" if lines else ""

