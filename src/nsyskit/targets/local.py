"""The local target: the job as 1..N Docker containers on this machine (nsyskit.local), in the Target contract."""

from __future__ import annotations

from pathlib import Path

from nsyskit.config import Config
from nsyskit.errors import ConfigError, ConfigErrors, JobNotFound
from nsyskit.targets.base import Job, Outcome
from nsyskit.targets.follow import print_log


def run_folder(cfg: Config, root: Path, run_id: str | None) -> Path:
    """REPORT_DIR/<run-id>/ of RUN_ID, or of the newest local run (the newest folder holding a run.json)."""
    base = Path(root) / cfg.report_dir
    if run_id:
        if "/" in run_id or run_id in (".", "..") or not (base / run_id).is_dir():
            raise JobNotFound(f"no run folder {base / run_id}", fix=f"give a run id from 'ls {base}'")
        return base / run_id
    runs = sorted((p.parent for p in base.glob("*/run.json")), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise JobNotFound(f"no local run in {base} yet", fix="run 'invoke run --local' or pass --job RUN_ID")
    return runs[-1]


class LocalTarget:
    """Docker here: render makes the run folder, submit runs the containers in the foreground, wait reads the result."""

    name = "local"
    submit_waits = True

    def validate(self, cfg: Config, root: Path) -> None:
        """The local run needs at least one container with one rank."""
        errors = [ConfigError(key, value, "must be 1 or more", f"set {key} to 1 or more", cfg.sources.get(key, ""))
                  for key, value in (("NODES", cfg.nodes), ("PROCS_PER_NODE", cfg.procs_per_node)) if value < 1]  # fmt: skip
        if errors:
            raise ConfigErrors(errors)

    def render(self, cfg: Config, root: Path, run_id: str | None = None) -> Job:
        """Check the engine and the image, then make the run folder REPORT_DIR/<run-id>/."""
        from nsyskit.local import run

        client, run_id, run_dir = run.prepare(cfg, root, run_id)
        return Job(self.name, run_dir, run_id, state=client)

    def submit(self, cfg: Config, job: Job) -> None:
        """Run the containers to their end (no queue here: the task shows the progress meanwhile)."""
        from nsyskit.local import run

        job.state = run.execute(cfg, job.state, job.job_id, job.job_dir, job.progress)
        job.submitted = True

    def wait(self, cfg: Config, job: Job) -> Outcome:
        """The ended run's outcome (submit already waited)."""
        result = job.state
        state = "FAILED" if result.exit_code else "COMPLETED"
        return Outcome(state, result.exit_code, str(job.job_dir), result.reason, result.log_tail,
                       lines=result.summary_lines())  # fmt: skip

    def collect(self, cfg: Config, root: Path, job: str | None) -> Path:
        """Nothing to gather: the containers wrote into the run folder (and run.json) as they ran."""
        return run_folder(cfg, root, job)

    def undeploy(self, cfg: Config, root: Path, job: str | None) -> str:
        """Remove the run's containers and network (default: the long-running container nsyskit-dev)."""
        from nsyskit.local import dev

        removed = dev.stop(job)
        return f"removed {', '.join(removed)}" if removed else "nothing to remove"

    def status(self, cfg: Config, root: Path, job: str | None) -> str:
        """The nsyskit containers in the engine (of run JOB, or all) with their state."""
        from nsyskit.local import dev

        rows = dev.containers(job)
        return "\n".join(f"{name}  {state}" for name, state in rows) or "no nsyskit containers"

    def logs(self, cfg: Config, root: Path, job: str | None, follow: bool) -> None:
        """No job: the long-running container's output; a run id: its launcher's log (followed while it runs)."""
        from nsyskit.local import dev

        if job is None:
            dev.logs(follow)
            return
        folder = run_folder(cfg, root, job)
        logs = folder / "logs"
        log = next((p for p in (logs / "launcher.log", logs / "worker-0.log") if p.is_file()), logs / "launcher.log")
        if not print_log(log, follow, ended=lambda: not dev.containers(job, running_only=True)):
            raise JobNotFound(f"run {job} has no launcher log in {logs}", fix="check the run id ('invoke status --local')")


TARGET = LocalTarget()
