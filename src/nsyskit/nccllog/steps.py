"""Training-step lines: which lines mark a step (NeMo, Megatron-LM, the kit's example) and what they report."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Candidate step lines are found with bytes.find of a literal each format's line contains (the fastest search
# Python has); the line is then checked against the formats. Once a file showed its format, the scanner looks for
# that format's literal only, so out-of-window parts of a log cost a single pass.
NEEDLES: dict[str, bytes] = {"nemo": b"Training epoch", "megatron": b"per iteration (ms)", "nsyskit": b"step_ms="}
ITERATION = re.compile(r"iteration\s*(\d+)\s*/\s*(\d+)")

# NeMo: 'Training epoch 0, iteration 45/99 | lr: ... | train_step_timing in s: 1.23 | TFLOPS_per_GPU: 412.3'
NEMO_MARK = re.compile(r"Training epoch \d+, iteration\s*\d+\s*/\s*\d+")
NEMO_TIME = re.compile(r"train_step_timing in s: ([0-9.eE+-]+)")
NEMO_TFLOPS = re.compile(r"TFLOPS_per_GPU: ([0-9.eE+-]+)")

# Megatron-LM: ' [date] iteration   45/  100 | ... | elapsed time per iteration (ms): 5444.9 |
#               throughput per GPU (TFLOP/s/GPU): 239.8 | ...' (the throughput field only in recent versions)
MEGATRON_TIME = re.compile(r"elapsed time per iteration \(ms\): ([0-9.eE+-]+)")
MEGATRON_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\): ([0-9.eE+-]+)")

# The kit's example (Container-Root/nsyskit/workload/train.py), rank 0 after each step:
# '[rank 0] step 5/20 loss=10.8000 step_ms=123.4 tokens_per_s=1234' (no TFLOP/s: reported as not available).
KIT_MARK = re.compile(r"\[rank \d+\] step (\d+)/(\d+) ")
KIT_TIME = re.compile(r"\bstep_ms=([0-9.eE+-]+)")
KIT_TFLOPS = re.compile(r"\btflops(?:_per_gpu)?=([0-9.eE+-]+)")


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
