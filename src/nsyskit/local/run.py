"""invoke run --local: the example under nsys in 1..N local containers, into reports/<run-id>/."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from docker import DockerClient

from nsyskit import console, engine, runrecord
from nsyskit.config import Config
from nsyskit.errors import JobFailed
from nsyskit.local import runfolder
from nsyskit.local.cluster import LocalCluster, launcher_kind, launcher_role
from nsyskit.local.failure import Failure, blame
from nsyskit.local.watch import LogFollower, RunProgress, log_path, wait_for_end

LOG_TAIL_LINES = 5
OTHER_REPORTS = (("ncu_reports", ".ncu-rep"), ("torch_traces", ".pt.trace.json.gz"))  # PROFILER=ncu, torch


@dataclass
class RunResult:
    """What a finished local run left and how it went."""

    run_id: str
    run_dir: Path
    exit_code: int
    duration_s: float
    failure: Failure | None = None
    ended_how: str = ""       # how the run ended: exited, stopped after rank failure, interrupted...
    reason: str = ""          # why it failed (the blamed rank), for JobFailed
    log_tail: list[str] = field(default_factory=list)
    checksums: dict[int, str] = field(default_factory=dict)
    world_sizes: set[int] = field(default_factory=set)
    files: dict[str, list[str]] = field(default_factory=dict)
    step_notes: list[str] = field(default_factory=list)  # the step hook's lines (PROFILE_STEPS not marked as asked)
    command_ranks: int | None = None  # WORKLOAD=command: the ranks that ran it (they print no checksum line)

    def summary_lines(self) -> list[str]:
        """What the task prints after a run."""
        files = self.files
        in_sync = len(set(self.checksums.values())) == 1 and bool(self.checksums)
        ranks = (
            f"nccl-tests: {len(files['nccl_tests'])} output(s) from rank 0: {', '.join(files['nccl_tests'])}"
            if files.get("nccl_tests")
            else f"ranks: {self.command_ranks} ran your command; their output is in {self.run_dir / 'logs'}"
            if self.command_ranks is not None
            else f"ranks: {len(self.checksums)} reported a checksum; world size {', '.join(map(str, sorted(self.world_sizes))) or '?'}; "
            f"parameters {'in sync' if in_sync else 'NOT in sync' if self.checksums else 'unknown'}"
        )
        lines = [
            f"run {self.run_id}: exit code {self.exit_code} after {self.duration_s:.0f} s",
            ranks,
            f"reports: {len(files.get('reports', []))} .nsys-rep, {len(files.get('sqlite', []))} .sqlite"
            + "".join(f", {len(files[k])} {suffix}" for k, suffix in OTHER_REPORTS if files.get(k)),
            f"folder: {self.run_dir}",
        ]
        return lines + self.step_notes


def run_local(cfg: Config, root: Path, run_id: str | None = None, show_progress: bool = True) -> RunResult:
    """Run the profiled example in local containers and return the result; JobFailed when it ends non-zero.

    Containers and network are removed on success, failure and Ctrl-C; the run folder keeps what was written.
    """
    client, run_id, run_dir = prepare(cfg, root, run_id)
    result = execute(cfg, client, run_id, run_dir, show_progress)
    if result.exit_code != 0:
        raise JobFailed("local", run_id, "FAILED", result.exit_code, run_dir, result.reason, result.log_tail)
    return result


def prepare(cfg: Config, root: Path, run_id: str | None = None) -> tuple[DockerClient, str, Path]:
    """Check the run id, the engine and the image, then make the run folder: (engine client, run id, run folder)."""
    run_id = runfolder.check_run_id(run_id or runfolder.new_run_id())
    client = engine.connect()  # engine and image before the run folder: a run that cannot start leaves nothing
    engine.require_image(client, cfg.image_ref)
    run_dir = runfolder.make_run_dir(root, cfg, run_id)
    return client, run_id, run_dir


def execute(cfg: Config, client: DockerClient, run_id: str, run_dir: Path, show_progress: bool = True) -> RunResult:
    """Start the containers, follow their logs until the run ends, remove them and write run.json: the result."""
    cluster = LocalCluster(client, cfg, run_id, run_dir)
    record: dict = {"started": time.time()}
    started = time.monotonic()
    ended_how = "not started"
    followers: list[LogFollower] = []
    console.info(
        f"run {run_id}: {cfg.nodes} node(s) x {cfg.procs_per_node} rank(s) of {cfg.image_ref}, reports in {run_dir}"
    )
    try:
        # The bar counts the example's training steps; the NCCL tests print none (their tables go to the logs).
        with RunProgress(cfg.steps, cfg.world_size) if show_progress and cfg.workload == "ddp" else _NoProgress() as progress:
            cluster.start()
            record["commands"] = cluster.commands
            record["containers"] = [m.container.name for m in cluster.members]
            for member in cluster.members:
                follower = LogFollower(member.container, log_path(run_dir, member.role), progress.line)
                follower.start()
                followers.append(follower)
            ended_how = wait_for_end(cluster, run_dir)
    except KeyboardInterrupt:
        ended_how = "interrupted (Ctrl-C)"
        raise
    finally:
        exit_codes = cluster.exit_codes()
        cluster.stop()
        for follower in followers:
            follower.join(timeout=5)
        cluster.remove()
        result = _finish(cfg, run_dir, run_id, record, exit_codes, ended_how, time.monotonic() - started)
    if result.exit_code != 0:
        launcher_log = log_path(run_dir, launcher_role(cfg))
        result.log_tail = launcher_log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:] if launcher_log.exists() else []
        result.reason = (
            result.failure.describe()
            if result.failure
            else f"the launcher ended with exit code {result.exit_code} ({ended_how})"
        )
    return result


class _NoProgress:
    """A stand-in for RunProgress when the display is off."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def line(self, text: str) -> None:
        return None


def _finish(
    cfg: Config, run_dir: Path, run_id: str, record: dict, exit_codes: dict, ended_how: str, duration: float
) -> RunResult:
    """Collect what the run left, blame a failed rank, write run.json."""
    logs = runfolder.logs_text(run_dir)
    statuses = runfolder.rank_statuses(run_dir)
    launcher_code = exit_codes.get(launcher_role(cfg))
    rank_failed = any(s.exit_code != 0 for s in statuses)
    if launcher_code is None:
        exit_code = 130 if ended_how.startswith("interrupted") else 1
    else:
        exit_code = launcher_code if launcher_code != 0 or not rank_failed else 1
    if ended_how == "stopped after rank failure" and exit_code == 0:
        exit_code = 1
    failure = blame(statuses, logs) if exit_code != 0 else None
    written = runfolder.write_run_record(
        run_dir, cfg, "local", run_id, logs, ranks=statuses, started=record.pop("started"), ended=time.time(),
        duration_s=round(duration, 3), ended_how=ended_how, exit_code=exit_code,
        launcher=launcher_kind(cfg),
        failed_rank=None if failure is None else failure.to_dict(),
        details={**record, "container_exit_codes": exit_codes},
    )  # fmt: skip
    return RunResult(run_id, run_dir, exit_code, duration, failure, ended_how, checksums=written.checksums,
                     world_sizes=set(written.world_sizes), files=written.files,
                     step_notes=runrecord.step_hook_lines(statuses),
                     command_ranks=len(statuses) if cfg.workload == "command" else None)  # fmt: skip
