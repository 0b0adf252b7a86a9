"""When and how a rank's application ended, seen by the wrapper (nsys-profile) as it happens, and the rank's status
file, written then and again when the wrapper ends.

Runs in the image (the wrapper imports it from /nsyskit): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time

import runrecord

WATCH_S = 0.02  # between two looks, where no pidfd tells when a process exits


def process_ended(pid: int) -> bool:
    """True once PID has exited (gone, or a zombie its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def zombie_exit_code(pid: int) -> int | None:
    """How an ended process its parent has not reaped yet ended (-N: killed by signal N), from /proc/PID/stat's
    exit_code field (52nd, Linux 3.5+); None once it is reaped or when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()  # fields 3.. of the line
        if fields[0] != "Z":
            return None
        status = int(fields[52 - 3])
    except (OSError, IndexError, ValueError):
        return None
    return -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF  # as waitpid(2) encodes it


def watch_application(profiler: subprocess.Popen, find_apps, died: list, on_death=None) -> None:
    """Append to DIED the wall-clock time the profiled application's first process (FIND_APPS(profiler's pid), the
    shallowest first) ends, seen as it happens, and call ON_DEATH(time, exit code or None) then.

    The profiler's own end comes later (it writes the report first, for seconds under load), so ordering ranks by it
    can put a rank that was killed first behind a peer that aborted because of it. A pidfd wakes this thread when the
    process exits; without one (Linux < 5.3), it looks every WATCH_S. How it ended can be read until the profiler
    reaps it.
    """
    apps: list[int] = []
    while not apps and profiler.poll() is None:
        apps = find_apps(profiler.pid)
        if not apps:
            time.sleep(WATCH_S)
    if not apps:
        return
    first = apps[0]  # the application's own process, not its children
    try:
        handle = os.pidfd_open(first)
    except (AttributeError, OSError):
        handle = None
    if handle is not None:
        poller = select.poll()
        poller.register(handle, select.POLLIN)  # readable once the process has exited
        poller.poll()
        os.close(handle)
    else:
        while not process_ended(first):
            time.sleep(WATCH_S)
    died.append(time.time())
    if on_death is not None:
        on_death(died[-1], zombie_exit_code(first))


class StatusFile:
    """The rank's status file, written when its application dies (final: false; the profiler still writes the
    report, and the wrapper may be killed meanwhile) and again at the end; the first never replaces the last."""

    def __init__(self, report_dir: str, name: str, **fields) -> None:
        self.report_dir, self.name, self.fields = report_dir, name, fields
        self.lock, self.done = threading.Lock(), False

    def at_death(self, when: float, code: int | None) -> None:
        """Write what is known when the application died: its exit code when it could be read, else 0 and a note."""
        notes = [] if code is not None else ["the application ended; how is written when the wrapper ends"]
        self.write(code or 0, final=False, died=when, notes=notes)

    def write(self, code: int, final: bool = True, **values) -> runrecord.RankStatus:
        """Write the status with exit code CODE (-N: killed by signal N); a non-final one only before the final."""
        status = runrecord.RankStatus(**self.fields, **values, exit_code=code if code >= 0 else 128 - code,
                                      signal=signal_name(-code) if code < 0 else None, final=final)  # fmt: skip
        with self.lock:
            if not self.done:
                runrecord.write_status(self.report_dir, self.name, status)
                self.done = final
        return status


def signal_name(number: int) -> str:
    """SIGTERM for 15; real-time signals have no name in the signal module: SIGRTMIN+N."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIGRTMIN+{number - signal.SIGRTMIN}" if number >= signal.SIGRTMIN else f"signal {number}"
