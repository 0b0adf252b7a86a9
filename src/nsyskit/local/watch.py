"""Follow a running local run: container logs into logs/<role>.log, a progress display, and failure detection."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from nsyskit import console
from nsyskit.local.runfolder import LOGS, rank_statuses
from nsyskit.runrecord import parse_step

PROGRESS_BAR = re.compile(r"\r|\[\d+/\d+\] \[[=\d% ]*\]")  # nsys's importer/export bars, redrawn with \r
FAILURE_GRACE_S = 30  # after a rank's failure, how long the launcher gets to end the run itself


def clean(line: str) -> str:
    """A log line without nsys's carriage-return progress bars."""
    if "\r" in line:
        line = line.rsplit("\r", 1)[-1]
    return line


class LogFollower(threading.Thread):
    """Copies one container's output into a log file and reports the training progress lines."""

    def __init__(self, container, path: Path, on_line) -> None:
        super().__init__(daemon=True, name=f"logs-{path.stem}")
        self.container, self.path, self.on_line = container, path, on_line

    def run(self) -> None:
        pending = b""
        with self.path.open("ab") as log:
            try:
                for chunk in self.container.logs(stream=True, follow=True):
                    log.write(chunk)
                    log.flush()
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        self.on_line(clean(line.decode(errors="replace")))
            except Exception:  # the container was removed under us: the copy so far is what there is
                return


class RunProgress:
    """The live display: a bar of rank 0's training steps, the last step time and throughput."""

    def __init__(self, total_steps: int, world_size: int) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console.err, transient=False,
        )  # fmt: skip
        self.task = self.progress.add_task(f"training ({world_size} ranks)", total=total_steps, rate="starting")
        self.last_step = 0

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def line(self, text: str) -> None:
        """Feed one output line; steps advance the bar."""
        step = parse_step(text)
        if step:
            self.last_step, _total, step_ms, tokens_per_s = step
            self.progress.update(
                self.task, completed=self.last_step, rate=f"{step_ms:.0f} ms/step, {tokens_per_s} tok/s"
            )
        elif "Generating" in text or "Generated:" in text or "converting" in text:
            self.progress.update(self.task, rate="writing reports")


def wait_for_end(cluster, run_dir: Path, poll_s: float = 0.5) -> str:
    """Block until the launcher container exits; if a rank fails and the launcher lingers, stop the run.

    Returns how it ended: 'exited', or 'stopped after rank failure'.
    """
    failure_seen_at = None
    while True:
        cluster.launcher.container.reload()
        if cluster.launcher.container.status in ("exited", "dead"):
            return "exited"
        if failure_seen_at is None and any(s.exit_code != 0 for s in rank_statuses(run_dir)):
            failure_seen_at = time.monotonic()
        if failure_seen_at is not None and time.monotonic() - failure_seen_at > FAILURE_GRACE_S:
            console.warn(f"a rank failed and the launcher did not end the run within {FAILURE_GRACE_S} s: stopping it")
            cluster.stop()
            return "stopped after rank failure"
        time.sleep(poll_s)


def log_path(run_dir: Path, role: str) -> Path:
    """logs/<role>.log of the run."""
    return run_dir / LOGS / f"{role}.log"
