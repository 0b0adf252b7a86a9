"""Training-step lines: which lines mark a step (NeMo, Megatron-LM, the kit's example) and what they report."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from nsyskit import runrecord

# Until a file shows its format, candidate step lines are found with bytes.find of literals the formats' lines
# contain (the fastest search Python has: 'iteration' is in NeMo's and Megatron's lines, 'step_ms=' in the
# example's), each candidate checked by parse_step_line; then its lines are read with STEP_FIELDS in C.
NEEDLES: tuple[bytes, ...] = (b"iteration", runrecord.STEP_TIME_KEY.encode() + b"=")
ITERATION = re.compile(r"iteration\s*(\d+)\s*/\s*(\d+)")

# NeMo: 'Training epoch 0, iteration 45/99 | lr: ... | train_step_timing in s: 1.23 | TFLOPS_per_GPU: 412.3'
NEMO_MARK = re.compile(r"Training epoch \d+, iteration\s*\d+\s*/\s*\d+")
NEMO_TIME = re.compile(r"train_step_timing in s: ([0-9.eE+-]+)")
NEMO_TFLOPS = re.compile(r"TFLOPS_per_GPU: ([0-9.eE+-]+)")

# Megatron-LM: ' [date] iteration   45/  100 | ... | elapsed time per iteration (ms): 5444.9 |
#               throughput per GPU (TFLOP/s/GPU): 239.8 | ...' (the throughput field only in recent versions;
#               legacy Megatron and Megatron-DeepSpeed print '| TFLOPs: 33.65 |' instead)
MEGATRON_TIME = re.compile(r"elapsed time per iteration \(ms\): ([0-9.eE+-]+)")
MEGATRON_TFLOPS = re.compile(r"(?:throughput per GPU \(TFLOP/s/GPU\)|\bTFLOPs): ([0-9.eE+-]+)")

# The kit's example (Container-Root/nsyskit/workload/train.py), rank 0 after each step, as runrecord.step_line
# writes it: '[rank 0] step 5/20 loss=10.8000 step_ms=123.4 tokens_per_s=1234' (no TFLOP/s: not available).
KIT_MARK = re.compile(runrecord.STEP_MARK)
KIT_TIME = re.compile(rf"\b{runrecord.STEP_TIME_KEY}=([0-9.eE+-]+)")
KIT_TFLOPS = re.compile(r"\btflops(?:_per_gpu)?=([0-9.eE+-]+)")


# Once a file showed its format, its step lines are read in C, one findall per block: the mark, then the fields
# (each optional, anywhere after the mark on the same line) as (iteration, total, time, tflops).
_NUMBER = rb"([0-9.eE+-]+)"


def _later(key: bytes) -> bytes:
    """A lookahead capturing the number after `key` further on the line: unrolled (runs of 'not the key's first
    character'), so a long line costs one pass in C, no retry per character."""
    first, rest = re.escape(key[:1]), re.escape(key[1:])
    return (
        rb"(?=[^"
        + first
        + rb"\n]*+(?:"
        + first
        + rb"(?!"
        + rest
        + rb")[^"
        + first
        + rb"\n]*+)*+"
        + first
        + rest
        + _NUMBER
        + rb")"
    )


STEP_FIELDS: dict[str, re.Pattern[bytes]] = {
    "nsyskit": re.compile(
        runrecord.STEP_MARK.encode()
        + rb"(?=[^\n]*?\b"
        + runrecord.STEP_TIME_KEY.encode()
        + rb"="
        + _NUMBER
        + rb")?(?=[^\n]*?\btflops(?:_per_gpu)?="
        + _NUMBER
        + rb")?"
    ),
    "nemo": re.compile(
        rb"Training epoch \d+, iteration\s*(\d+)\s*/\s*(\d+)"
        + _later(b"_timing in s: ")
        + b"?"
        + _later(b"TFLOPS_per_GPU: ")
        + b"?"
    ),
    # megatron: the time field is what makes it a step line; TFLOP/s as 'throughput per GPU (TFLOP/s/GPU): F'
    # (recent) or 'TFLOPs: F' (legacy)
    "megatron": re.compile(
        rb"iteration\s*(\d+)\s*/\s*(\d+)(?=[^(\n]*+(?:\((?!ms\): )[^(\n]*+)*+(?<=per iteration )\(ms\): "
        + _NUMBER
        + rb")"
        rb"(?=[^T\n]*+(?:T(?!FLOP/s/GPU\): |FLOPs: )[^T\n]*+)*+T(?:FLOP/s/GPU\)|FLOPs): " + _NUMBER + rb")?"
    ),
}
_TO_SECONDS = {"nsyskit": 1e-3, "nemo": 1.0, "megatron": 1e-3}


def _float(text: bytes) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def step_of(fmt: str, fields: tuple[bytes, bytes, bytes, bytes]) -> StepLine:
    """The StepLine of one STEP_FIELDS[fmt] finding."""
    iteration, total, time, tflops = fields
    seconds = _float(time)
    return StepLine(
        int(iteration), int(total), fmt, None if seconds is None else seconds * _TO_SECONDS[fmt], _float(tflops)
    )


@dataclass(frozen=True)
class StepLine:
    """One recognised step line: its iteration, the step time in seconds and TFLOP/s per GPU when printed."""

    iteration: int
    total: int
    fmt: str
    step_time_s: float | None
    tflops_per_gpu: float | None


def _number(pattern: re.Pattern[str], line: str) -> float | None:
    match = pattern.search(line)
    if not match:
        return None
    try:
        return float(match.group(1).rstrip("|"))
    except ValueError:
        return None


def parse_step_line(line: str) -> StepLine | None:
    """The step a candidate line reports, or None when the line is no step line of a known format."""
    kit = KIT_MARK.search(line)
    if kit:
        ms = _number(KIT_TIME, line)
        seconds = None if ms is None else ms / 1000.0
        return StepLine(int(kit.group(1)), int(kit.group(2)), "nsyskit", seconds, _number(KIT_TFLOPS, line))
    position = ITERATION.search(line)
    if position is None:
        return None
    iteration, total = int(position.group(1)), int(position.group(2))
    if NEMO_MARK.search(line):
        return StepLine(iteration, total, "nemo", _number(NEMO_TIME, line), _number(NEMO_TFLOPS, line))
    if "elapsed time per iteration (ms)" in line:
        ms = _number(MEGATRON_TIME, line)
        seconds = None if ms is None else ms / 1000.0
        return StepLine(iteration, total, "megatron", seconds, _number(MEGATRON_TFLOPS, line))
    return None


@dataclass
class StepStats:
    """Running sums over the step lines in the window of one file (constant memory)."""

    lines: int = 0
    timed: int = 0
    time_sum: float = 0.0
    time_min: float | None = None
    time_max: float | None = None
    with_tflops: int = 0
    tflops_sum: float = 0.0
    first_iteration: int | None = None
    last_iteration: int | None = None
    formats: Counter = field(default_factory=Counter)

    def add(self, step: StepLine) -> None:
        """Count one step line."""
        self.lines += 1
        self.formats[step.fmt] += 1
        if self.first_iteration is None:
            self.first_iteration = step.iteration
        self.last_iteration = step.iteration
        if step.step_time_s is not None:
            self.timed += 1
            self.time_sum += step.step_time_s
            self.time_min = step.step_time_s if self.time_min is None else min(self.time_min, step.step_time_s)
            self.time_max = step.step_time_s if self.time_max is None else max(self.time_max, step.step_time_s)
        if step.tflops_per_gpu is not None:
            self.with_tflops += 1
            self.tflops_sum += step.tflops_per_gpu

    def add_all(self, fmt: str, found: list[tuple[bytes, bytes, bytes, bytes]]) -> None:
        """Count STEP_FIELDS[fmt] findings in bulk (no window: their order is all that matters)."""
        if not found:
            return
        try:
            times = [float(f[2]) * _TO_SECONDS[fmt] for f in found if f[2]]
            tflops = [float(f[3]) for f in found if f[3]]
        except ValueError:  # a malformed number ('1.2.3'): count line by line, that one as not logged
            for fields in found:
                self.add(step_of(fmt, fields))
            return
        self.lines += len(found)
        self.formats[fmt] += len(found)
        if self.first_iteration is None:
            self.first_iteration = int(found[0][0])
        self.last_iteration = int(found[-1][0])
        if times:
            self.timed += len(times)
            self.time_sum += sum(times)
            self.time_min = min(times) if self.time_min is None else min(self.time_min, min(times))
            self.time_max = max(times) if self.time_max is None else max(self.time_max, max(times))
        if tflops:
            self.with_tflops += len(tflops)
            self.tflops_sum += sum(tflops)

    def merge(self, other: StepStats) -> None:
        """Add another file's sums (files of one job: a run folder's rank logs)."""
        if not other.lines:
            return
        self.lines += other.lines
        self.formats.update(other.formats)
        if self.first_iteration is None or (
            other.first_iteration is not None and other.first_iteration < self.first_iteration
        ):
            self.first_iteration = other.first_iteration
        if self.last_iteration is None or (
            other.last_iteration is not None and other.last_iteration > self.last_iteration
        ):
            self.last_iteration = other.last_iteration
        self.timed += other.timed
        self.time_sum += other.time_sum
        for name, pick in (("time_min", min), ("time_max", max)):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else mine if theirs is None else pick(mine, theirs))
        self.with_tflops += other.with_tflops
        self.tflops_sum += other.tflops_sum

    def summary(self) -> dict:
        """Average step time and TFLOP/s per GPU (None where not logged)."""
        return {
            "step_lines": self.lines,
            "formats": dict(self.formats),
            "first_iteration": self.first_iteration,
            "last_iteration": self.last_iteration,
            "timed_steps": self.timed,
            "avg_step_time_s": self.time_sum / self.timed if self.timed else None,
            "min_step_time_s": self.time_min,
            "max_step_time_s": self.time_max,
            "tflops_steps": self.with_tflops,
            "avg_tflops_per_gpu": self.tflops_sum / self.with_tflops if self.with_tflops else None,
        }
