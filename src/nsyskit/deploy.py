"""What every deployment target (k8s, slurm) provides, so the deploy tasks can dispatch without knowing them."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nsyskit.config import Config
from nsyskit.errors import NsyskitError


@dataclass
class DeployResult:
    """The outcome of rendering (and, unless dry-run, submitting) a job."""

    job_dir: Path                      # the rendered files
    files: list[Path] = field(default_factory=list)
    submitted: bool = False
    job_id: str | None = None          # Slurm job id or MPIJob name
    exit_code: int | None = None       # set when waited for
    lines: list[str] = field(default_factory=list)  # what the task prints


class Target(Protocol):
    """A deployment target module (nsyskit.k8s, nsyskit.slurm) exposes these functions."""

    def deploy(self, cfg: Config, root: Path, *, dry_run: bool, wait: bool) -> DeployResult: ...
    def undeploy(self, cfg: Config, root: Path, job: str | None) -> str: ...
    def status(self, cfg: Config, root: Path, job: str | None) -> str: ...
    def logs(self, cfg: Config, root: Path, job: str | None, follow: bool) -> None: ...
    def collect(self, cfg: Config, root: Path, job: str | None) -> Path: ...


TARGETS = {"k8s": "nsyskit.k8s", "slurm": "nsyskit.slurm"}


def target(k8s: bool, slurm: bool) -> Target:
    """The module of the chosen target; exactly one of k8s/slurm must be set."""
    if k8s == slurm:
        given = "both --k8s and --slurm" if k8s else "neither --k8s nor --slurm"
        raise NsyskitError(f"{given} given; fix: choose one target: --k8s or --slurm")
    return importlib.import_module(TARGETS["k8s" if k8s else "slurm"])  # type: ignore[return-value]
