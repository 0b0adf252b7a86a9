"""Print a job's log file, and with follow keep printing what is appended until the job has ended."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 1.0


def print_log(log: Path, follow: bool, ended: Callable[[], bool], poll_s: float = POLL_S) -> bool:
    """Write LOG to stdout; with follow, keep going until ended() and nothing new is left. False: no log (yet)."""
    offset = 0
    while True:
        if log.is_file():
            with log.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
        if not follow:
            return log.is_file()
        if ended():
            if log.is_file() and log.stat().st_size > offset:
                continue  # print what was written after the last read
            return log.is_file()
        time.sleep(poll_s)
