"""The shared rich consoles: results to stdout, progress and warnings to stderr."""

from __future__ import annotations

from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def info(message: str) -> None:
    """A progress line on stderr."""
    err.print(f"[cyan]•[/] {message}")


def done(message: str) -> None:
    """A step that finished, on stderr."""
    err.print(f"[green]✓[/] {message}")


def warn(message: str) -> None:
    """A warning on stderr; never fatal."""
    err.print(f"[yellow]warning:[/] {message}")
