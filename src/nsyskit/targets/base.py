"""The one contract every target (local Docker, Kubernetes, Slurm) implements, and the job it hands along."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nsyskit.config import Config


@dataclass
class Job:
    """One job of a target: rendered into job_dir, then (unless a dry run) submitted under job_id."""

    target: str                        # local, k8s or slurm
    job_dir: Path                      # jobs/<id>/ for clusters, reports/<run-id>/ for a local run
    job_id: str = ""                   # run id, MPIJob name or Slurm job id
    files: list[Path] = field(default_factory=list)  # what render wrote
    submitted: bool = False
    progress: bool = True              # show live progress while a step blocks
    lines: list[str] = field(default_factory=list)   # what the task prints, step by step
    how_to_submit: str = ""            # the command that submits the rendered files by hand (after a dry run)
    preview: str = ""                  # the rendered text a dry run prints (Slurm: the sbatch script)
    state: Any = None                  # what the target keeps between its own steps (e.g. a local run's result)


@dataclass
class Outcome:
    """How a job ended: the target's final state, its exit code and where its logs are."""

    state: str            # COMPLETED/FAILED/... (Slurm), Succeeded/Failed (k8s), exited/interrupted (local)
    exit_code: int
    logs: str             # log file or folder to read
    reason: str = ""      # why it failed, in the target's words
    log_tail: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # what the task prints on success


class Target(Protocol):
    """validate -> render -> submit -> wait -> collect -> undeploy, plus status and logs, for one kind of cluster.

    `job` arguments name a job as the user gives it (--job): a job folder name, a scheduler id or a run id;
    None means the last one deployed from this project.
    """

    name: str
    submit_waits: bool  # True when submit itself runs the job to its end (local: no queue to hand it to)

    def validate(self, cfg: Config, root: Path) -> None:
        """Raise ConfigErrors listing every setting this target cannot run with; writes nothing."""

    def render(self, cfg: Config, root: Path, run_id: str | None = None) -> Job:
        """Write the job's files into a fresh folder (nothing is started)."""

    def submit(self, cfg: Config, job: Job) -> None:
        """Hand the rendered job to the scheduler (sets job.job_id and job.submitted)."""

    def wait(self, cfg: Config, job: Job) -> Outcome:
        """Block until the submitted job ends; its outcome."""

    def collect(self, cfg: Config, root: Path, job: str | None) -> Path:
        """Gather the ended job's reports and logs into REPORT_DIR/<run-id>/ (with run.json); that folder."""

    def undeploy(self, cfg: Config, root: Path, job: str | None) -> str:
        """Cancel or delete the job and what it left running; says what was done."""

    def status(self, cfg: Config, root: Path, job: str | None) -> str:
        """The job's state, as text."""

    def logs(self, cfg: Config, root: Path, job: str | None, follow: bool) -> None:
        """Print the job's output (following it until the job ends with follow=True)."""


class ClusterSteps:
    """collect, undeploy, status and logs of a cluster target: the functions of the same names in its module."""

    module = ""  # nsyskit.k8s or nsyskit.slurm, imported when a step runs (keeps 'invoke --list' fast)

    def _steps(self):
        return importlib.import_module(self.module)

    def collect(self, cfg: Config, root: Path, job: str | None) -> Path:
        """The module's collect."""
        return self._steps().collect(cfg, root, job)

    def undeploy(self, cfg: Config, root: Path, job: str | None) -> str:
        """The module's undeploy."""
        return self._steps().undeploy(cfg, root, job)

    def status(self, cfg: Config, root: Path, job: str | None) -> str:
        """The module's status."""
        return self._steps().status(cfg, root, job)

    def logs(self, cfg: Config, root: Path, job: str | None, follow: bool) -> None:
        """The module's logs."""
        self._steps().logs(cfg, root, job, follow)
