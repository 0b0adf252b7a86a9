"""The shared rich consoles: results to stdout, progress and warnings to stderr."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    out: Console
    err: Console


PIPED_WIDTH = 160  # columns of the tables when stdout/stderr is not a terminal and COLUMNS is unset


def __getattr__(name: str) -> Console:
    """`out` and `err`, made on first use: importing rich costs ~0.1 s that `invoke --list` and JSON output skip."""
    if name not in ("out", "err"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import os
    import sys

    from rich.console import Console

    stream = sys.stderr if name == "err" else sys.stdout
    # Piped into a file or a CI log: tables as wide as a log viewer shows (rich's 80 columns folded them three times
    # as long, and rendering them cost a third more); COLUMNS still decides when set.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH
    made = Console(stderr=name == "err", highlight=False, soft_wrap=True, width=width)
    globals()[name] = made
    return made


def _err() -> Console:
    """The stderr console (a test or caller may have replaced it)."""
    made = globals().get("err")
    return __getattr__("err") if made is None else made


def info(message: str) -> None:
    """A progress line on stderr."""
    _err().print(f"[cyan]•[/] {message}")


def done(message: str) -> None:
    """A step that finished, on stderr."""
    _err().print(f"[green]✓[/] {message}")


def warn(message: str) -> None:
    """A warning on stderr; never fatal."""
    _err().print(f"[yellow]warning:[/] {message}")


def elapsed(seconds: float) -> str:
    """'45 s', '3 min 05 s', '1 h 02 min': how long a wait has lasted."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class Phases:
    """Progress of a long wait on stderr: a line when the phase changes, and one every `every_s` while it lasts."""

    def __init__(self, what: str, every_s: float = 30.0, clock=time.monotonic) -> None:
        self.what, self.every_s, self.clock = what, every_s, clock
        self.started = self.last_line = self.clock()
        self.phase: str | None = None

    def update(self, phase: str) -> None:
        """Say the phase and the time since the start, when it changed or `every_s` passed since the last line."""
        now = self.clock()
        if phase != self.phase or now - self.last_line >= self.every_s:
            info(f"{self.what}: {phase} ({elapsed(now - self.started)} elapsed)")
            self.phase, self.last_line = phase, now
