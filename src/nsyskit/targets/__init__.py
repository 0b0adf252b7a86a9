"""The targets a job runs on (local, k8s, slurm), chosen by a task flag, and the steps every task composes."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.config import Config
from nsyskit.errors import JOB_LABELS, ConfigErrors, JobFailed, JobInterrupted, NsyskitError, UsageError
from nsyskit.ranks.launch import check_launchable, launch_problems
from nsyskit.targets.base import Job, Outcome, Target

__all__ = ["DeployResult", "Job", "Outcome", "Target", "choose", "deploy", "failure", "get", "run", "validate_targets"]

MODULES = {"local": "nsyskit.targets.local", "k8s": "nsyskit.targets.k8s", "slurm": "nsyskit.targets.slurm"}


def get(name: str) -> Target:
    """The target called NAME (local, k8s or slurm)."""
    return importlib.import_module(MODULES[name]).TARGET


def choose(default: str | None = None, **flags: bool) -> Target:
    """The target of the one flag given (--local/--k8s/--slurm); DEFAULT when none is and a default exists."""
    chosen = [name for name, given in flags.items() if given]
    offered = " or ".join(f"--{name}" for name in flags)
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join('--' + n for n in chosen)} given together", fix=f"choose one target: {offered}")
    if not chosen:
        if default is None:
            raise UsageError("no target given", fix=f"choose one target: {offered}")
        chosen = [default]
    return get(chosen[0])


def validate_targets(cfg: Config, root: Path, **chosen: bool) -> None:
    """Run the checks of every chosen target (e.g. k8s=True); one ConfigErrors listing all their problems."""
    problems = []
    for name in (name for name, given in chosen.items() if given):
        try:
            get(name).validate(cfg, root)
        except ConfigErrors as found:
            problems += found.errors
    if problems:
        raise ConfigErrors(problems)


@dataclass
class DeployResult:
    """What deploy did: the job (rendered, maybe submitted) and, when waited for, how it ended."""

    job: Job
    outcome: Outcome | None = None
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # a dry run's: what a real submit would refuse, each with its fix


def rendered(target: Target, cfg: Config, root: Path, run_id: str | None, progress: bool) -> Job:
    """validate (before anything is written), then render."""
    target.validate(cfg, root)
    job = target.render(cfg, root, run_id)
    job.progress = progress
    return job


def previewed(target: Target, cfg: Config, root: Path, run_id: str | None) -> DeployResult:
    """A dry run: render, and where the target previews despite its checks (Slurm, whose checks are about the
    cluster's paths, often previewed on a laptop), what a real submit would refuse becomes warnings."""
    problems: list[str] = []
    try:
        target.validate(cfg, root)
    except ConfigErrors as found:
        if not getattr(target, "dry_run_previews", False):
            raise
        problems = [f"a real submit would refuse: {problem}" for problem in found.errors]
    # The machines a real deploy would stop on (no GPU for the NCCL tests): said, but the job is rendered to review.
    problems += [f"a real deploy would stop before launching: {problem}" for problem in launch_problems(cfg, target.name)]
    job = target.render(cfg, root, run_id)
    if job.preview:
        job.lines.append(job.preview.rstrip("\n"))
    hint = f"; submit with '{job.how_to_submit}'" if job.how_to_submit else ""
    if hint and problems:
        hint += f" once the {len(problems)} warning(s) are fixed"
    job.lines.append("dry run: nothing submitted" + hint)
    return DeployResult(job, lines=job.lines, warnings=problems)


def deploy(target: Target, cfg: Config, root: Path, *, dry_run: bool = False, wait: bool = False,
           run_id: str | None = None, progress: bool = True) -> DeployResult:  # fmt: skip
    """validate -> render -> submit (unless dry_run) -> wait (with wait); JobFailed with the job's code when it fails."""
    if dry_run:
        return previewed(target, cfg, root, run_id)
    check_launchable(cfg, target.name)  # before anything is made; a dry run (above) renders anyway, so a machine without GPUs can preview
    job = rendered(target, cfg, root, run_id, progress)
    result = DeployResult(job, lines=job.lines)
    with _interruptible(target, job):
        target.submit(cfg, job)
        if wait or target.submit_waits:
            result.outcome = target.wait(cfg, job)
    if result.outcome is not None:
        if result.outcome.exit_code != 0:
            raise failure(target, job, result.outcome)
        job.lines += result.outcome.lines
    if not target.submit_waits:  # what 'run' does by itself comes next here by hand
        flag = f"--{target.name}"
        job.lines.append(f"next: 'invoke collect {flag}' gathers its reports" if result.outcome else
                         f"next: 'invoke status {flag}', 'invoke logs {flag}', 'invoke collect {flag}' (after the job), "
                         f"'invoke undeploy {flag}'")  # fmt: skip
    return result


@contextmanager
def _interruptible(target: Target, job: Job) -> Iterator[None]:
    """Ctrl-C while a job is submitted or waited for: one line on what became of it and where its files are."""
    try:
        yield
    except KeyboardInterrupt:
        if target.submit_waits:  # the job ran here: it stopped with the task, its folder stays
            raise JobInterrupted(f"interrupted: {JOB_LABELS.get(target.name, 'job')} {job.job_id} stopped; its reports "
                                 f"and logs are in {job.job_dir}") from None  # fmt: skip
        if not job.submitted:
            raise JobInterrupted(f"interrupted before the job was submitted; its rendered files are in {job.job_dir}",
                                 fix=f"submit it again with 'invoke deploy --{target.name}'") from None  # fmt: skip
        raise JobInterrupted(
            f"stopped waiting: {JOB_LABELS.get(target.name, 'job')} {job.job_id} keeps running",
            fix=f"'invoke undeploy --{target.name}' cancels it; 'invoke collect --{target.name}' gathers its reports "
            "once it ends",
        ) from None


def failure(target: Target, job: Job, outcome: Outcome, reports: Path | None = None) -> JobFailed:
    """The one error of a job that ended non-zero (naming the reports collected, if any): exits with the job's code."""
    return JobFailed(target.name, job.job_id, outcome.state, outcome.exit_code, outcome.logs, outcome.reason,
                     outcome.log_tail, reports or "")  # fmt: skip


def run(target: Target, cfg: Config, root: Path, run_id: str | None = None,
        progress: bool = True) -> tuple[DeployResult, Path | None]:  # fmt: skip
    """deploy and wait, then collect into REPORT_DIR/<run-id>/ (what 'invoke run' does); a failed job is collected too."""
    check_launchable(cfg, target.name)  # before anything is made: no run folder, no job folder
    job = rendered(target, cfg, root, run_id, progress)
    with _interruptible(target, job):
        target.submit(cfg, job)
        outcome = target.wait(cfg, job)
    try:
        folder = target.collect(cfg, root, job.job_dir.name)
    except NsyskitError:
        if outcome.exit_code == 0:
            raise
        folder = None  # the job's failure is the news; its logs are named in the error
    if outcome.exit_code != 0:
        raise failure(target, job, outcome, folder)
    job.lines += outcome.lines
    return DeployResult(job, outcome, lines=job.lines), folder
