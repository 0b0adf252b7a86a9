"""The shared rich consoles: results to stdout, progress and warnings to stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    out: Console
    err: Console


def __getattr__(name: str) -> Console:
    """`out` and `err`, made on first use: importing rich costs ~0.1 s that `invoke --list` and JSON output skip."""
    if name not in ("out", "err"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    made = Console(stderr=name == "err", highlight=False, soft_wrap=True)
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
