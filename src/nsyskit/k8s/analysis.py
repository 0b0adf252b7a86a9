"""A run's analysis on Kubernetes: the map as an Indexed Job over its reports, the merge as a Job that waits for the
parts, and past ANALYZE_TREE_RANKS reports an Indexed Job of partial merges between them (the merge as a tree)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from nsyskit import console
from nsyskit.clusteranalysis import (
    AnalysisPlan,
    clear_parts,
    count_blocks,
    count_elements,
    index_list,
    parts_done,
    record_submitted,
    without_report_line,
)
from nsyskit.config import Config
from nsyskit.errors import ConfigError, ConfigErrors, JobError, PartialAnalysis
from nsyskit.jobdir import write_record
from nsyskit.k8s import crd, kubectl, render
from nsyskit.templates import render_template

JOBS_FILE = "k8s-jobs.yaml"
MERGE_DEADLINE_S = 86400  # the merge Job waits for the map's parts at most a day (a map that never ends)
POLL_S = 10.0
WAIT_SECONDS = 10  # the merge's init container looks for the parts this often


@dataclass(frozen=True)
class Submitted:
    """The two Jobs of one analysis: the map's (Indexed) and the merge's, in their namespace."""

    map_id: str
    merge_id: str
    namespace: str


def job_names(plan: AnalysisPlan) -> tuple[str, str]:
    """(map, merge) Job names: 'nsyskit-map-<run>-<hash>' as DNS labels short enough for the pods' host names."""
    slug = re.sub(r"[^a-z0-9]+", "-", plan.run.name.lower()).strip("-")[:24].strip("-") or "run"
    digest = hashlib.sha256(str(plan.run).encode()).hexdigest()[:6]
    return f"nsyskit-map-{slug}-{digest}", f"nsyskit-merge-{slug}-{digest}"


def partial_name(plan: AnalysisPlan) -> str:
    """The Job name of a tree's partial merges, beside the map's and the merge's."""
    return job_names(plan)[0].replace("nsyskit-map-", "nsyskit-partial-", 1)


def _wait_for(folder: Path, count: int) -> list[str]:
    """An init container's command: wait until `folder` holds `count` part files (each written whole, then renamed)."""
    from nsyskit.analysis.mapreduce.parts import SUFFIX

    quoted = shlex.quote(str(folder))
    return ["/bin/sh", "-c", f"until [ \"$(find {quoted} -maxdepth 1 -name '*{SUFFIX}' 2>/dev/null | wc -l)\" -ge "
            f"{count} ]; do sleep {WAIT_SECONDS}; done"]  # fmt: skip


def problems(cfg: Config, plan: AnalysisPlan) -> list[ConfigError]:
    """What keeps the pods from the run's reports, checked here before anything is applied."""
    errors = []
    if not cfg.k8s_report_pvc:
        errors.append(ConfigError("K8S_REPORT_PVC", "", "names no claim, and the analysis pods read the reports from one",
                                  "set K8S_REPORT_PVC to the ReadWriteMany claim holding the run (e.g. FSx for Lustre)",
                                  cfg.sources.get("K8S_REPORT_PVC", "")))  # fmt: skip
    if not cfg.k8s_shared_dir:
        errors.append(ConfigError("K8S_SHARED_DIR", "", "is empty, so the run folder's place on the claim is unknown",
                                  "set K8S_SHARED_DIR to where this machine mounts K8S_REPORT_PVC (e.g. /fsx)",
                                  cfg.sources.get("K8S_SHARED_DIR", "")))  # fmt: skip
    elif not plan.run.is_relative_to(Path(cfg.k8s_shared_dir)):
        errors.append(ConfigError(
            "run folder", str(plan.run), f"is not on K8S_SHARED_DIR ({cfg.k8s_shared_dir}), so the pods cannot read its "
            "reports", f"keep the run on the claim (under {cfg.k8s_shared_dir}), or set K8S_SHARED_DIR to where this "
            "machine mounts K8S_REPORT_PVC",
        ))  # fmt: skip
    return errors


def image_of_run(cfg: Config, plan: AnalysisPlan) -> str:
    """The image the pods run: the one the run ran in (its run.json of an MPIJob), else REGISTRY/IMAGE:TAG."""
    from nsyskit.analysis.read.runinfo import run_record

    record = run_record(plan.run)
    return record.image if record is not None and record.target == "k8s" and record.image else cfg.image_ref


def manifests(cfg: Config, root: Path, plan: AnalysisPlan) -> str:
    """The two Jobs as one YAML file, validated against the batch/v1 Job API."""
    from nsyskit.assets import kit_root

    map_name, merge_name = job_names(plan)
    index = '--array-index "$JOB_COMPLETION_INDEX"'
    parts_wait = _wait_for(plan.parts, len(plan.reports))
    text = render_template(render.environment(root), "analyze-jobs.yaml.j2", render.TEMPLATES, {
        "run": str(plan.run), "reports": len(plan.reports), "elements": plan.elements,
        "parallelism": plan.max_parallel or plan.elements, "map_name": map_name, "merge_name": merge_name,
        "namespace": cfg.k8s_namespace, "job_label": render.JOB_LABEL, "role_label": render.ROLE_LABEL,
        "ttl": cfg.k8s_ttl_seconds_after_finished, "image": image_of_run(cfg, plan), "pvc": cfg.k8s_report_pvc or "-",
        "shared_dir": cfg.k8s_shared_dir or "/", "merge_deadline_s": MERGE_DEADLINE_S,
        "map_command": ["/bin/sh", "-c", f"exec nsyskit {shlex.join(plan.map_arguments())} {index}"],
        "wait_command": _wait_for(plan.partials, plan.blocks) if plan.blocks else parts_wait,
        "merge_command": ["nsyskit", *plan.merge_arguments()], "blocks": plan.blocks, "partial_name": partial_name(plan),
        "parts_wait_command": parts_wait,
        "partial_command": ["/bin/sh", "-c", f"exec nsyskit {shlex.join(plan.partial_arguments())} {index}"],
    })  # fmt: skip
    crd.validate_jobs(text, kit_root(root) / crd.CRD_FILE, name=str(plan.folder / JOBS_FILE))
    return text


def prepare(cfg: Config, root: Path, plan: AnalysisPlan) -> list[Path]:
    """Check, render and validate the Jobs into the run's analysis-jobs/ folder; the file (one, with both Jobs)."""
    if errors := problems(cfg, plan):
        raise ConfigErrors(errors)
    text = manifests(cfg, root, plan)
    plan.folder.mkdir(parents=True, exist_ok=True)
    path = plan.folder / JOBS_FILE
    path.write_text(text)
    return [path]


def submit(cfg: Config, root: Path, plan: AnalysisPlan) -> Submitted:
    """Render, clear the old parts and 'kubectl apply' both Jobs (the merge waits for the map's parts in its pod)."""
    [path] = prepare(cfg, root, plan)
    map_name, merge_name = job_names(plan)
    for name in (map_name, partial_name(plan), merge_name):  # a Job's template cannot change: earlier Jobs go first
        kubectl.run(f"deleting the earlier Job {name}", kubectl.command(
            "delete", "job", name, "--ignore-not-found", "--wait=true", namespace=cfg.k8s_namespace))  # fmt: skip
    clear_parts(plan)
    kubectl.run(f"submitting the analysis Jobs {map_name}, {merge_name}{' and the partial merges' if plan.blocks else ''} ({path})",
                kubectl.command("apply", "-f", str(path), namespace=cfg.k8s_namespace))  # fmt: skip
    record_submitted(plan, map_name, merge_name, namespace=cfg.k8s_namespace)
    return Submitted(map_name, merge_name, cfg.k8s_namespace)


def submitted_lines(plan: AnalysisPlan, jobs: Submitted) -> list[str]:
    """What the user reads after applying: the Job names, where the report will be, how to follow."""
    return [
        f"map: Indexed Job {jobs.map_id}, {count_elements(plan)} (namespace {jobs.namespace}); logs: kubectl logs -n {jobs.namespace} -l job-name={jobs.map_id}",
        *([f"partial merges: Indexed Job {partial_name(plan)}, {count_blocks(plan)}, once every part is in "
            f"{plan.parts}; logs: kubectl logs -n {jobs.namespace} -l job-name={partial_name(plan)}"] if plan.blocks else []),
        f"merge: Job {jobs.merge_id}, once every {'partial merge' if plan.blocks else 'part'} is in "
        f"{plan.partials if plan.blocks else plan.parts}; logs: kubectl logs -n {jobs.namespace} job/{jobs.merge_id}",
        f"report: {plan.run / 'report.html'} once the merge ends (follow: kubectl get jobs -n {jobs.namespace} "
        f"{jobs.map_id} {jobs.merge_id})",
    ]


def job_status(name: str, namespace: str) -> dict:
    """The Job's .status (kubectl get job -o json)."""
    text = kubectl.run(f"getting the status of Job {name}", kubectl.command("get", "job", name, "-o", "json",
                                                                            namespace=namespace))  # fmt: skip
    return json.loads(text).get("status", {})


def ended(status: dict) -> str:
    """'Complete' or 'Failed' once the Job has ended, else ''."""
    for condition in status.get("conditions", []):
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return ""


def follow(cfg: Config, plan: AnalysisPlan, jobs: Submitted, poll_s: float = POLL_S) -> Path:
    """Wait for the map (parts done / total) and the merge; print the merged analysis; the report's path.

    A failed map is named with its failed indexes, their reports and how to read their logs; the merge Job (which
    would wait for parts that never come) is deleted, and the error says how to merge the parts that exist.
    """
    total, shown = len(plan.reports), None
    while True:
        status = job_status(jobs.map_id, jobs.namespace)
        line = (f"map: {parts_done(plan)}/{total} parts ({status.get('active', 0)} running, "
                f"{status.get('succeeded', 0)} succeeded, {status.get('failed', 0)} failed)")  # fmt: skip
        if line != shown:
            console.info(line)
            shown = line
        if ended(status):
            break
        time.sleep(poll_s)
    if ended(status) == "Failed":
        kubectl.run(f"deleting Job {jobs.merge_id}", kubectl.command("delete", "job", jobs.merge_id, "--ignore-not-found",
                                                                     namespace=jobs.namespace))  # fmt: skip
        raise JobError(_failure(plan, jobs, status), fix=f"read the logs; the parts that exist merge with 'invoke "
                       f"analyze-merge {plan.parts}' (it names the missing ranks), or run 'invoke analyze --k8s' again")  # fmt: skip
    if plan.blocks:
        _follow_partials(plan, jobs, poll_s)
    phases = console.Phases(f"merge: Job {jobs.merge_id}")
    while not (state := ended(merge := job_status(jobs.merge_id, jobs.namespace))):
        phases.update("running" if merge.get("active") else "waiting")
        time.sleep(poll_s)
    log = kubectl.run(f"reading the log of Job {jobs.merge_id}", kubectl.command(
        "logs", f"job/{jobs.merge_id}", "-c", "merge", namespace=jobs.namespace))  # fmt: skip
    # the merge's tables; its 'report: ...' line is the command's to print, once
    console.out.print(without_report_line(log, plan.run / "report.html").rstrip(), markup=False, highlight=False)
    write_record(plan.folder, merge_state=state)
    if state == "Complete":
        return plan.run / "report.html"
    if (plan.run / "analysis.json").is_file() and "incomplete" in log:
        raise PartialAnalysis(f"the merged analysis of {plan.run} is incomplete (see its first lines above)",
                              fix=f"report: {plan.run / 'report.html'}")  # fmt: skip
    raise JobError(f"the merge (Job {jobs.merge_id}) failed",
                   fix=f"read 'kubectl logs -n {jobs.namespace} job/{jobs.merge_id}'; the parts stay in {plan.parts}")  # fmt: skip


def _follow_partials(plan: AnalysisPlan, jobs: Submitted, poll_s: float) -> None:
    """Wait for a tree's partial merges; when one fails, delete the merge (it would wait for a partial merge that
    never comes) and say which blocks failed and how to merge the parts without the tree."""
    name = partial_name(plan)
    phases = console.Phases(f"partial merges: Indexed Job {name}")
    while not (state := ended(status := job_status(name, jobs.namespace))):
        phases.update(f"{status.get('active', 0)} running, {status.get('succeeded', 0)} of {plan.blocks} done")
        time.sleep(poll_s)
    if state == "Failed":
        kubectl.run(f"deleting Job {jobs.merge_id}", kubectl.command("delete", "job", jobs.merge_id, "--ignore-not-found",
                                                                     namespace=jobs.namespace))  # fmt: skip
        raise JobError(f"the partial merges (Indexed Job {name}) failed: block(s) {status.get('failedIndexes') or '?'} "
                       f"of {plan.blocks}; logs: kubectl logs -n {jobs.namespace} -l job-name={name}",
                       fix=f"read the logs; the parts merge without the tree: 'invoke analyze-merge {plan.parts}'")  # fmt: skip


def _failure(plan: AnalysisPlan, jobs: Submitted, status: dict) -> str:
    """One line naming the failed indexes (Kubernetes' status.failedIndexes, e.g. '1,3-5') with their first reports."""
    failed = index_list(status.get("failedIndexes", "") or "")
    said = []
    for index in failed[:5]:
        said.append(f"index {index} ({plan.named_reports(index)})")
    named = "; ".join(said) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
    logs = f"kubectl logs -n {jobs.namespace} -l job-name={jobs.map_id},batch.kubernetes.io/job-completion-index=N"
    return (f"{len(failed) or status.get('failed', 0)} of {plan.elements} map element(s) of Indexed Job {jobs.map_id} "
            f"failed: {named or 'see the Job'}; logs: {logs}")  # fmt: skip
