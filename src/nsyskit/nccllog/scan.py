"""The streaming scanner: reads logs (plain or gzip) in big blocks and counts what their lines say, in constant memory.

Speed comes from never looping over lines in Python: one precompiled regex finds every NCCL INFO line of a
block (collectives with their fields, any other message as text), collections.Counter counts identical
findings in C, and only the distinct findings are looked at one by one.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.nccllog.facts import Facts
from nsyskit.nccllog.steps import NEEDLES, StepLine, parse_step_line

BLOCK_SIZE = 8 << 20
MAX_LINE = 16 << 20  # a "line" longer than this is garbage (binary junk): counted and dropped, never buffered
MAX_EXAMPLES = 3

# What may precede 'host:pid:tid [dev] NCCL INFO': srun -l task ids ('0: ', '  12: '), bracketed stamps
# ('[2025-01-02 03:04:05] ' from NCCL_DEBUG_TIMESTAMP_FORMAT, mpirun '[1,0]<stdout>:', torchrun '[default0]:'),
# ISO dates ('%F %T' without brackets), epoch seconds ('%s'), and '|' separators of log collectors.
# Possessive, so a line costs one pass.
_PREFIX = (
    rb"[ \t|]*+(?:(?:\[[^\]\n]*+\]|<\w++>|\d++:|\d{4}-\d\d-\d\d[T ][\d:.,+\-]*+|\d++(?:\.\d++)?(?=[ \t|]))[ \t:|]*+)*+"
)
_HOST = rb"([^\s:\[\]|<>]++:\d++:\d++ \[\d++\]) NCCL INFO "
# The fields after the datatype are optional: a line cut short after them still says what was sent (as the awk
# scripts read it); nranks is then unknown.
_COLL = (
    rb"(\w++): opCount [0-9a-fA-F]++ sendbuff \S++ recvbuff \S++ (count \d++ datatype \d++)"
    rb"(?: op \d++ root -?\d++ comm \S++ \[nranks=(\d++)\])?+"
)
# Groups: 'host:pid:tid [dev]', then op, 'count N datatype D', nranks (collective lines) | message (any other INFO
# line). Few groups make findall cheaper; the groups of the distinct findings are split afterwards.
INFO_LINE = re.compile(rb"\n(?:(?=[ \t|\[<\d])" + _PREFIX + rb")?" + _HOST + rb"(?:" + _COLL + rb"|([^\n]*+))")
SOURCE = re.compile(rb"([^:]*+):\d++:\d++ \[(\d++)\]")
COUNT_DTYPE = re.compile(rb"count (\d++) datatype (\d++)")


def source(key: bytes) -> tuple[bytes, bytes]:
    """(host, dev) of a 'host:pid:tid [dev]' prefix."""
    match = SOURCE.match(key)
    return match.group(1), match.group(2)


@dataclass(frozen=True)
class Window:
    """Which part of each file counts: step lines' iterations A-B and/or 1-based line numbers A-B (both inclusive)."""

    steps: tuple[int, int] | None = None
    lines: tuple[int, int] | None = None

    def describe(self) -> str:
        """The window in words."""
        parts = []
        if self.steps:
            parts.append(f"iterations {self.steps[0]}-{self.steps[1]}")
        if self.lines:
            parts.append(f"lines {self.lines[0]}-{self.lines[1]}")
        return " and ".join(parts) if parts else "whole log"


@dataclass
class StepStats:
    """Running sums over the step lines in the window (constant memory)."""

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


@dataclass
class Scan:
    """Everything counted over all files; `coll` maps (host, dev, op, count, datatype, nranks) bytes to calls."""

    window: Window = field(default_factory=Window)
    files: list[str] = field(default_factory=list)
    bytes_read: int = 0
    lines_total: int = 0
    lines_in_window: int = 0
    nccl_info_lines: int = 0
    nccl_warn_lines: int = 0
    other_info_lines: int = 0
    unrecognized_nccl_lines: int = 0
    garbled_coll_lines: int = 0
    overlong_lines: int = 0
    coll: Counter = field(default_factory=Counter)
    facts: Facts = field(default_factory=Facts)
    steps: StepStats = field(default_factory=StepStats)
    files_without_steps: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def example(self, kind: str, where: str, text: bytes) -> None:
        """Keep a few example lines of a problem, each with file:line."""
        kept = self.examples.setdefault(kind, [])
        if len(kept) < MAX_EXAMPLES:
            kept.append(f"{where}: {text[:300].decode('utf-8', 'replace').rstrip()}")

    def wants_example(self, kind: str) -> bool:
        """True while fewer than MAX_EXAMPLES lines of that kind were kept."""
        return len(self.examples.get(kind, ())) < MAX_EXAMPLES


def is_gzip(path: Path) -> bool:
    """True when the file starts with gzip's magic bytes (whatever its name)."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_blocks(path: Path, scan: Scan, block_size: int = BLOCK_SIZE) -> Iterator[tuple[bytearray, int]]:
    """The file as blocks of whole lines: (buffer, end), the block being buffer[:end]; it starts with b'\\n' (so
    every line follows a newline) and ends with one. One buffer is reused (read into, never re-allocated per
    block), so a consumer must copy what it keeps. gzip is read with readinto1, so a damaged stream still gives
    what came before the damage."""
    compressed = is_gzip(path)
    buf = bytearray(block_size + 1)
    buf[0] = 10  # the newline before the first line
    have = 1  # valid bytes: the leading newline and the partial line carried over from the previous block
    with (gzip.open if compressed else open)(path, "rb") as f:
        fill = f.readinto1 if compressed else f.readinto
        eof = False
        while not eof:
            end = have
            try:
                while end < len(buf):
                    with memoryview(buf) as view:
                        n = fill(view[end:])
                    if not n:
                        eof = True
                        break
                    end += n
                    scan.bytes_read += n
                    if not compressed:
                        break
            except (OSError, EOFError, zlib.error) as exc:
                scan.warnings.append(f"{path}: read stopped early ({exc}); analyzed what came before")
                eof = True
            cut = buf.rfind(b"\n", 1, end)
            if cut >= 0:
                yield buf, cut + 1
                rest = end - cut - 1
                buf[1 : 1 + rest] = buf[cut + 1 : end]
                have = 1 + rest
            elif end > MAX_LINE:  # no line ends in the buffer and the line is past any sense: drop it
                scan.overlong_lines += 1
                have = 1
            else:  # one line longer than the buffer: make room for it
                if not eof:
                    buf.extend(bytes(block_size))
                have = end
        if have > 1:  # the last line has no newline
            buf[have : have + 1] = b"\n"
            yield buf, have + 1


class FileScanner:
    """Scans one file block by block, keeping the per-file state: line number, current iteration, window."""

    def __init__(self, path: Path, scan: Scan, block_size: int = BLOCK_SIZE) -> None:
        self.path, self.scan, self.window, self.block_size = path, scan, scan.window, block_size
        self.line_no = 0  # lines before the current block
        self.iteration: int | None = None
        self.saw_step = False
        self.needles = tuple(NEEDLES.values())  # until the file shows its step-line format
        lines = self.window.lines
        self.in_lines = lines is None or lines[0] <= 1 <= lines[1]

    def run(self) -> None:
        """Scan the whole file."""
        for block, end in read_blocks(self.path, self.scan, self.block_size):
            self.block(block, end)
        self.scan.lines_total += self.line_no
        if self.window.steps and not self.saw_step:
            self.scan.files_without_steps.append(str(self.path))

    def in_window(self) -> bool:
        """Whether the line at the current position counts."""
        steps = self.window.steps
        in_steps = steps is None or (self.iteration is not None and steps[0] <= self.iteration <= steps[1])
        return in_steps and self.in_lines

    def mode(self) -> str | None:
        """'count' in the window; 'facts' before the file's first step line (init happens there); else None."""
        if self.in_window():
            return "count"
        return "facts" if self.iteration is None else None

    def block(self, block: bytearray, end: int) -> None:
        """Count block[:end]: split it where the window opens or closes, count the in-window parts."""
        self.end = end
        self.nlines = nlines = block.count(b"\n", 0, end) - 1
        events = self._step_events(block) + self._line_events(block, nlines)
        events.sort(key=lambda event: event[0])
        start, mode = 0, self.mode()
        for position, kind, value in events:
            if kind == "step":
                self.iteration = value.iteration
            else:
                self.in_lines = value
            if kind == "step" and self.in_window():
                self.scan.steps.add(value)
            new_mode = self.mode()
            if new_mode != mode:
                if mode is not None:
                    self.segment(block, start, position, facts_only=mode == "facts")
                start, mode = position, new_mode
        if mode is not None:
            self.segment(block, start, end, facts_only=mode == "facts")
        self.line_no += nlines

    def _step_events(self, block: bytearray) -> list[tuple[int, str, StepLine]]:
        events, seen, end = [], set(), self.end
        for needle in self.needles:
            at = block.find(needle, 0, end)
            while at >= 0:
                line_start = block.rfind(b"\n", 0, at)
                line_end = block.find(b"\n", at, end)
                if line_start not in seen:
                    seen.add(line_start)
                    step = parse_step_line(block[line_start + 1 : line_end].decode("utf-8", "replace"))
                    if step is not None:
                        self.saw_step = True
                        self.needles = (NEEDLES[step.fmt],)
                        events.append((line_start, "step", step))
                at = block.find(needle, line_end, end)
        return events

    def _line_events(self, block: bytearray, nlines: int) -> list[tuple[int, str, bool]]:
        if self.window.lines is None:
            return []
        first, last = self.line_no + 1, self.line_no + nlines
        events = []
        for line_number, inside in ((self.window.lines[0], True), (self.window.lines[1] + 1, False)):
            if first <= line_number <= last:
                events.append((self._newline_before(block, line_number - first), "lines", inside))
        return events

    @staticmethod
    def _newline_before(block: bytearray, local_line: int) -> int:
        position = 0
        for _ in range(local_line):
            position = block.find(b"\n", position + 1)
        return position

    def segment(self, block: bytearray, start: int, end: int, facts_only: bool = False) -> None:
        """Count the lines of block[start:end] (start is the newline before its first line); facts_only: only
        gather init facts (the lines before the window that hold NCCL's initialization)."""
        scan = self.scan
        found = INFO_LINE.findall(block, start, end)
        if not facts_only:
            info = block.count(b"NCCL INFO", start, end)
            whole = start == 0 and end == self.end
            scan.lines_in_window += (
                self.nlines if whole else block.count(b"\n", start, end) - (1 if end == self.end else 0)
            )
            scan.nccl_info_lines += info
            scan.nccl_warn_lines += block.count(b"NCCL WARN", start, end)
            if info > len(found):
                scan.unrecognized_nccl_lines += info - len(found)
                if scan.wants_example("unrecognized"):
                    self._unrecognized_examples(block, start, end)
        coll, facts = scan.coll, scan.facts
        for key, calls in Counter(found).items():
            where, op, count_dtype, nranks, message = key
            host, dev = source(where)
            if op:
                if not facts_only:
                    count, dtype = COUNT_DTYPE.match(count_dtype).groups()
                    coll[(host, dev, op, count, dtype, nranks)] += calls
                continue
            if len(facts.hosts) < 4096:
                facts.hosts.add(host)
                facts.gpus.add((host, dev))
            if facts_only:
                facts.add(message.decode("utf-8", "replace").rstrip(), calls, per_call=False)
            elif b"opCount" in message:
                scan.garbled_coll_lines += calls
                if scan.wants_example("garbled"):
                    self._example_of(block, start, end, message, "garbled")
            elif not facts.add(message.decode("utf-8", "replace").rstrip(), calls):
                scan.other_info_lines += calls

    def _where(self, block: bytearray, newline: int) -> str:
        line = self.line_no + 1 + block.count(b"\n", 0, newline)
        return f"{self.path}:{line}"

    def _example_of(self, block: bytearray, start: int, end: int, message: bytes, kind: str) -> None:
        at = block.find(message, start, end)
        newline = block.rfind(b"\n", 0, at)
        line_end = block.find(b"\n", at)
        self.scan.example(kind, self._where(block, newline), block[newline + 1 : line_end])

    def _unrecognized_examples(self, block: bytearray, start: int, end: int) -> None:
        at = block.find(b"NCCL INFO", start, end)
        while at >= 0 and self.scan.wants_example("unrecognized"):
            newline = block.rfind(b"\n", 0, at)
            match = INFO_LINE.match(block, newline)
            line_end = block.find(b"\n", at)
            if match is None or block.count(b"NCCL INFO", newline, line_end) > 1:
                self.scan.example("unrecognized", self._where(block, newline), block[newline + 1 : line_end])
            at = block.find(b"NCCL INFO", line_end, end)


def scan_files(paths: list[Path], window: Window | None = None, block_size: int = BLOCK_SIZE) -> Scan:
    """Scan the logs in order (each file has its own line numbers and step state) and return the counts."""
    scan = Scan(window=window or Window())
    for path in paths:
        scan.files.append(str(path))
        FileScanner(path, scan, block_size).run()
    return scan
