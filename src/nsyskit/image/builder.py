"""The build layer: one classic-builder build through the Docker SDK, its progress, and BuildError on failure."""

from __future__ import annotations

import io
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import docker
from docker.errors import APIError, DockerException

from nsyskit.errors import BuildError

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the engine colours a step's stderr
STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
LOG_TAIL_LINES = 30


@dataclass
class BuildProgress:
    """What the build stream has said so far: the current step, the cached steps and the output tail."""

    step: int = 0
    total: int = 0
    instruction: str = ""
    cached: int = 0
    image_id: str = ""
    tail: deque = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    step_started: float = field(default_factory=time.monotonic)
    step_seconds: dict[int, float] = field(default_factory=dict)
    instructions: dict[int, str] = field(default_factory=dict)
    cached_steps: set[int] = field(default_factory=set)

    @property
    def rebuilt_steps(self) -> list[int]:
        """Steps that ran instead of coming from the layer cache (FROM, and ARGs before it, make no layer)."""
        first_from = min((n for n, text in self.instructions.items() if text.upper().startswith("FROM")), default=0)
        return [n for n in self.instructions if n > first_from and n not in self.cached_steps]

    def feed(self, line: str) -> bool:
        """Take one output line; True when it started a new step."""
        line = line.rstrip()
        match = STEP.match(line)
        if match:
            now = time.monotonic()
            if self.step:
                self.step_seconds[self.step] = now - self.step_started
            self.step, self.total, self.instruction = int(match[1]), int(match[2]), match[3]
            self.instructions[self.step] = self.instruction
            self.step_started = now
            return True
        if line.strip() == "---> Using cache":
            self.cached += 1
            self.cached_steps.add(self.step)
        if line.strip():
            self.tail.append(line)
        return False


def stream_lines(chunks: Iterable[dict]) -> Iterable[tuple[str, str]]:
    """("line", text) per output line and ("error", message) / ("id", image id) from the engine's JSON stream."""
    pending = ""
    for chunk in chunks:
        if "error" in chunk:
            if pending:
                yield "line", pending
                pending = ""
            detail = chunk.get("errorDetail") or {}
            yield "error", str(detail.get("message") or chunk["error"]).strip()
        elif "aux" in chunk and isinstance(chunk["aux"], dict) and chunk["aux"].get("ID"):
            yield "id", chunk["aux"]["ID"]
        elif "stream" in chunk:
            pending += ANSI.sub("", chunk["stream"])
            *lines, pending = pending.split("\n")
            for line in lines:
                yield "line", line
        elif "status" in chunk:  # pulling a base image
            yield "line", " ".join(str(chunk[k]) for k in ("status", "id", "progress") if chunk.get(k))
    if pending:
        yield "line", pending


def key_line(progress: BuildProgress, engine_message: str) -> str:
    """The most telling line: an install script's first 'error:' line (the cause), else what the engine said."""
    for line in progress.tail:
        if "error:" in line and line.lstrip().startswith("nsyskit["):
            return line.strip()
    return engine_message


def run_build(
    client: docker.DockerClient,
    context: bytes,
    tag: str,
    build_args: dict[str, str],
    on_line: Callable[[BuildProgress, str, bool], None] | None = None,
    fix_for_base: str = "",
    no_cache: bool = False,
) -> BuildProgress:
    """Build the context tar with the classic builder; returns the progress (with image_id) or raises BuildError."""
    progress = BuildProgress()
    try:
        chunks = client.api.build(
            fileobj=io.BytesIO(context), custom_context=True, tag=tag, buildargs=build_args,
            rm=True, forcerm=True, pull=False, decode=True, nocache=no_cache,
        )  # fmt: skip
        for kind, value in stream_lines(chunks):
            if kind == "line":
                new_step = progress.feed(value)
                if on_line:
                    on_line(progress, value, new_step)
            elif kind == "id":
                progress.image_id = value
            else:
                raise _failure(progress, value, fix_for_base)
    except APIError as exc:
        raise _failure(progress, exc.explanation or str(exc), fix_for_base) from None
    except DockerException as exc:
        raise BuildError(
            f"the Docker engine failed during the build: {exc}",
            progress.step,
            progress.total,
            progress.instruction,
            list(progress.tail),
        ) from None
    if progress.step:
        progress.step_seconds[progress.step] = time.monotonic() - progress.step_started
    if not progress.image_id:
        progress.image_id = client.images.get(tag).id
    return progress


def _failure(progress: BuildProgress, engine_message: str, fix_for_base: str) -> BuildError:
    """A BuildError for the step that failed; a FROM that failed gets the BASE_IMAGE fix."""
    message = " ".join(engine_message.split())
    reason = key_line(progress, message)
    fix = ""
    if progress.instruction.upper().startswith("FROM") or not progress.step:
        fix = fix_for_base
    elif reason != message:
        reason = f"{reason} ({message})"
    return BuildError(reason, progress.step, progress.total, progress.instruction, list(progress.tail), fix)
