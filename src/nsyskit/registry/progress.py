"""Live per-layer progress of a push or pull from the engine's JSON events (rich bars plus a line per finished layer)."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn

# Engine statuses that end a layer, and the word shown for each.
_FINISHED = {
    "Pushed": "pushed",
    "Layer already exists": "already in the registry",
    "Pull complete": "pulled",
    "Already exists": "already local",
    "Mounted from": "mounted",
}


class LayerProgress:
    """A context manager fed with engine events: one bar per layer while it moves (if enabled), one line when it ends."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled and console.is_terminal  # bars only live on a terminal; logs get the per-layer lines
        self.bars = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=console,
            transient=True,  # the bars vanish at the end; the per-layer lines stay (they are what logs keep)
        )
        self.tasks: dict[str, TaskID] = {}
        self.sizes: dict[str, int] = {}
        self.outcomes: Counter[str] = Counter()

    def __enter__(self) -> LayerProgress:
        if self.enabled:
            self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bars.stop()

    def update(self, event: dict) -> None:
        """Apply one engine event (status, id, progressDetail)."""
        layer, status = event.get("id"), str(event.get("status", ""))
        if not layer:
            return  # repository-level lines (digest, "The push refers to…") carry no layer id
        finished = next((word for prefix, word in _FINISHED.items() if status.startswith(prefix)), None)
        if finished:
            self._finish(layer, finished)
            return
        detail = event.get("progressDetail") or {}
        if layer not in self.tasks:
            self.tasks[layer] = self.bars.add_task(f"{layer} {status.lower()}", total=None)
        task = self.tasks[layer]
        if detail.get("total"):
            self.sizes[layer] = max(self.sizes.get(layer, 0), int(detail["total"]))
            # the engine counts compressed bytes against an uncompressed total: it can overshoot, so clamp
            completed = min(int(detail.get("current", 0)), int(detail["total"]))
            self.bars.update(task, total=detail["total"], completed=completed, description=f"{layer} {status.lower()}")
        else:
            self.bars.update(task, description=f"{layer} {status.lower()}")

    def _finish(self, layer: str, word: str) -> None:
        if layer in self.tasks:
            self.bars.remove_task(self.tasks.pop(layer))
        self.outcomes[word] += 1
        size = self.sizes.get(layer)
        shown = f" ({_human(size)})" if size else ""
        self.console.print(f"  [dim]layer[/] {layer} {word}{shown}")

    @property
    def moved_layers(self) -> int:
        """Layers that really travelled (pushed or pulled)."""
        return self.outcomes["pushed"] + self.outcomes["pulled"] + self.outcomes["mounted"]

    def summary(self) -> str:
        """'2 pushed, 5 already in the registry' style counts."""
        return ", ".join(f"{count} {word}" for word, count in self.outcomes.items()) or "no layers"


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{size} B"
        value /= 1000
    return f"{size} B"
