"""The streaming scanner: reads logs (plain or gzip) in big blocks and counts what their lines say, in constant memory.

Speed comes from never looping over lines in Python: one precompiled regex finds every NCCL INFO line of a
block (collectives with their fields, any other message as text), collections.Counter counts identical
findings in C, and only the distinct findings are looked at one by one.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.nccllog.scan import fastscan
from nsyskit.nccllog.scan.blocks import BLOCK_SIZE, read_blocks, what_it_holds
from nsyskit.nccllog.scan.dtypes import bucket_of
from nsyskit.nccllog.scan.facts import MAX_SOURCES, VERSION, Facts
from nsyskit.nccllog.scan.lines import INFO_LINE, MISSED_LINE, TAIL, clean_source, read_missed_line, split_source
from nsyskit.nccllog.scan.steps import NEEDLES, STEP_FIELDS, StepLine, StepStats, parse_step_line, step_of

MAX_EXAMPLES = 3
MERGED_LINES = re.compile(rb"\n[^\n]*?NCCL INFO[^\n]*?NCCL INFO[^\n]*+")  # two NCCL lines on one (examples)


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
class Scan:
    """Everything counted; `coll` maps (op, count, datatype, nranks) to calls, `coll_gpus` each GPU's calls per
    size bucket; `steps` holds each file's step sums (files of different jobs are never averaged together)."""

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
    coll_gpus: Counter = field(default_factory=Counter)  # (host, pid, dev, comm, size bucket or None) -> calls
    facts: Facts = field(default_factory=Facts)
    steps: dict[str, StepStats] = field(default_factory=dict)
    files_without_steps: list[str] = field(default_factory=list)
    files_without_nccl: dict[str, str] = field(default_factory=dict)  # file -> what it holds instead
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

    def merge(self, other: Scan) -> None:
        """Add the counts of another file's scan (read by another process), in file order."""
        for name in (
            "bytes_read", "lines_total", "lines_in_window", "nccl_info_lines", "nccl_warn_lines", "other_info_lines",
            "unrecognized_nccl_lines", "garbled_coll_lines", "overlong_lines",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.files += other.files
        self.coll.update(other.coll)
        self.coll_gpus.update(other.coll_gpus)
        self.facts.merge(other.facts)
        for file, stats in other.steps.items():  # the parts of one file add up
            self.steps.setdefault(file, StepStats()).merge(stats)
        self.files_without_steps += other.files_without_steps
        self.files_without_nccl.update(other.files_without_nccl)
        self.warnings += other.warnings
        for kind, lines in other.examples.items():
            kept = self.examples.setdefault(kind, [])
            kept += lines[: MAX_EXAMPLES - len(kept)]


def first_step(block: bytearray, at: int, end: int) -> tuple[int, int, StepLine] | None:
    """The first step line of block[at:end] (any format): (newline before it, its end, the StepLine), or None."""
    while True:
        hits = [hit for hit in (fastscan.find(block, needle, at, end) for needle in NEEDLES) if hit >= 0]
        if not hits:
            return None
        line_start = block.rfind(b"\n", 0, min(hits))
        line_end = block.find(b"\n", min(hits), end)
        step = parse_step_line(block[line_start + 1 : line_end].decode("utf-8", "replace"))
        if step is not None:
            return line_start, line_end, step
        at = line_end


class FileScanner:
    """Scans one file block by block, keeping the per-file state: line number, current iteration, window."""

    def __init__(
        self,
        path: Path,
        scan: Scan,
        block_size: int = BLOCK_SIZE,
        span: tuple[int, int] | None = None,
        fmt: str | None = None,
    ) -> None:
        """span: only bytes [start, stop) of the file (one part of a file read by several processes); fmt: the
        file's step-line format when known beforehand (the parts after the first read the first part's)."""
        self.path, self.scan, self.window, self.block_size, self.span = path, scan, scan.window, block_size, span
        self.line_no = 0  # lines before the current block
        self.iteration: int | None = None
        self.saw_step = False
        self.fmt = fmt  # the file's step-line format, once it showed one
        lines = self.window.lines
        self.in_lines = lines is None or lines[0] <= 1 <= lines[1]
        self.stats = scan.steps.setdefault(str(path), StepStats())
        self.sources: dict[bytes, tuple[str, str, int]] = {}
        self.values: dict[bytes, bytes] = {}
        self.saw_nccl = False  # any NCCL INFO/WARN line or bare version line in the file
        # until the file's version or first collective line: NCCL <= 2.21's bare line (in a file's first part)
        self.look_for_version = span is None or span[0] == 0
        self.reader = fastscan.reader()  # the compiled line reader, or None: INFO_LINE alone (same findings)

    def run(self) -> None:
        """Scan the whole file."""
        for block, end in read_blocks(self.path, self.scan, self.block_size, self.span):
            self.block(block, end)
        self.scan.lines_total += self.line_no
        if self.window.steps and not self.saw_step:
            self.scan.files_without_steps.append(str(self.path))
        if not self.saw_nccl:
            self.scan.files_without_nccl[str(self.path)] = what_it_holds(self.path)

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
        # the compiled reader counts the lines as it goes (a whole-block segment sets nlines): only a lines window
        # needs them first
        need_lines = self.reader is None or self.window.lines is not None
        self.nlines = nlines = block.count(b"\n", 0, end) - 1 if need_lines else None
        if self.look_for_version:
            self._bare_versions(block)
        events = self._step_events(block) + self._line_events(block, nlines)
        events.sort(key=lambda event: event[0])
        start, mode = 0, self.mode()
        for position, kind, value in events:
            if kind == "step":
                self.iteration = value.iteration
            else:
                self.in_lines = value
            if kind == "step" and self.in_window():
                self.stats.add(value)
            new_mode = self.mode()
            if new_mode != mode:
                if mode is not None:
                    self.segment(block, start, position, facts_only=mode == "facts")
                start, mode = position, new_mode
        if mode is not None:
            self.segment(block, start, end, facts_only=mode == "facts")
        if self.nlines is None:
            self.nlines = block.count(b"\n", 0, end) - 1
        self.line_no += self.nlines

    def _bare_versions(self, block: bytearray) -> None:
        """NCCL <= 2.21 prints 'NCCL version X+cudaY' on stdout without 'NCCL INFO' (maybe behind a launcher
        prefix or a timestamp): read it once per file, before the first collective (init comes first)."""
        first_collective = fastscan.find(block, b": opCount ", 0, self.end)
        limit = self.end if first_collective < 0 else first_collective
        if first_collective >= 0:
            self.look_for_version = False
        at = fastscan.find(block, b"NCCL version ", 0, limit)
        while at >= 0:
            line_start = block.rfind(b"\n", 0, at)
            line_end = block.find(b"\n", at, self.end)
            if b"NCCL INFO" not in block[line_start:at]:
                match = VERSION.match(block[at:line_end].decode("utf-8", "replace"))
                if match:
                    self.scan.facts.add(match.group(0))
                    self.saw_nccl = True
                    self.look_for_version = False
            at = block.find(b"NCCL version ", line_end, limit)

    def _step_events(self, block: bytearray) -> list[tuple[int, str, StepLine]]:
        """The step lines of the block as (position of the newline before, 'step', StepLine); without a window
        they are only counted (no positions needed), in C once the file's format is known."""
        start, events = 0, []
        if self.fmt is None:
            start, events = self._first_step(block)
            if self.fmt is None:
                return events
        pattern = STEP_FIELDS[self.fmt]
        if self.window.steps is None and self.window.lines is None:
            self.stats.add_all(self.fmt, pattern.findall(block, start, self.end))
            return []
        for match in pattern.finditer(block, start, self.end):
            events.append((block.rfind(b"\n", 0, match.start()), "step", step_of(self.fmt, match.groups())))
        return events

    def _first_step(self, block: bytearray) -> tuple[int, list[tuple[int, str, StepLine]]]:
        """Look for the file's first step line (any format); once found, self.fmt is its format. Returns where
        the rest of the block starts and the event of that line."""
        found = first_step(block, 0, self.end)
        if found is None:
            return self.end, []
        line_start, line_end, step = found
        self.saw_step, self.fmt = True, step.fmt
        if self.window.steps is None and self.window.lines is None:
            self.stats.add(step)
            return line_end, []
        return line_end, [(line_start, "step", step)]

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
        read = self.reader.findings(block, start, end) if self.reader else None
        if read is None:
            found, newlines, warn = Counter(INFO_LINE.findall(block, start, end)), None, None
            info = block.count(b"NCCL INFO", start, end)
        else:
            found, newlines, info, warn = read
        if info:
            self.saw_nccl = True
        if not facts_only:
            whole = start == 0 and end == self.end
            if newlines is None:
                counted = whole and self.nlines is not None  # not when the C reader's arrays overflowed
                newlines = self.nlines + 1 if counted else block.count(b"\n", start, end)
            if whole:
                self.nlines = newlines - 1
            scan.lines_in_window += newlines - (1 if end == self.end else 0)
            scan.nccl_info_lines += info
            warn = block.count(b"NCCL WARN", start, end) if warn is None else warn
            scan.nccl_warn_lines += warn
            self.saw_nccl = self.saw_nccl or warn > 0
        if info > found.total():
            self._missed(found, info, block, start, end, count=not facts_only)
        self._count(found, facts_only, block, start, end)

    def _missed(self, found: Counter, info: int, block: bytearray, start: int, end: int, count: bool) -> None:
        """Add to `found` the lines INFO_LINE skipped, read where their NCCL part starts; the unreadable ones and
        second NCCL lines run into the end of another are counted as unrecognized, with examples."""
        scan, fast, missed = self.scan, found.total(), 0
        for match in MISSED_LINE.finditer(block, start, end):
            missed += 1
            finding = read_missed_line(match.group(0))
            if finding is not None:
                found[finding] += 1
            elif count:
                scan.unrecognized_nccl_lines += 1
                if scan.wants_example("unrecognized"):
                    scan.example("unrecognized", self._where(block, match.start()), match.group(0)[1:])
        extra = info - fast - missed
        if extra > 0 and count:
            scan.unrecognized_nccl_lines += extra
            for match in MERGED_LINES.finditer(block, start, end):
                if not scan.wants_example("unrecognized"):
                    break
                scan.example("unrecognized", self._where(block, match.start()), match.group(0)[1:])

    def _count(self, findings: Counter, facts_only: bool, block: bytearray, start: int, end: int) -> None:
        scan = self.scan
        coll, facts = scan.coll, scan.facts
        for (source, op, tail, message), calls in findings.items():
            source = clean_source(source)
            if op:
                if facts_only:
                    continue
                self.look_for_version = False
                fields = TAIL.match(tail)
                if fields is None:
                    scan.garbled_coll_lines += calls
                    if scan.wants_example("garbled"):
                        self._example_of(block, start, end, tail, "garbled")
                    continue
                count, dtype, comm, nranks = fields.groups()
                # the sizes once for all GPUs, and per GPU only its size buckets (keyed by process, device and
                # communicator, not the thread; each part one shared object): a log of thousands of ranks x
                # communicators x sizes stays small
                share, n = self.shared, int(count)
                coll[(share(op), n, share(dtype), share(nranks))] += calls
                scan.coll_gpus[(*self._source(source), share(comm), bucket_of(n, dtype))] += calls
                continue
            host, pid, dev = self._source(source)
            if len(facts.gpus) < MAX_SOURCES:
                facts.hosts.add((host, pid))
                facts.gpus.add((host, pid, dev))
            if not message:
                if not facts_only:
                    scan.other_info_lines += calls
            elif facts_only:
                facts.add(message.decode("utf-8", "replace").rstrip(), calls, per_call=False, origin=(host, pid))
            elif b"opCount" in message:
                scan.garbled_coll_lines += calls
                if scan.wants_example("garbled"):
                    self._example_of(block, start, end, message, "garbled")
            elif not facts.add(message.decode("utf-8", "replace").rstrip(), calls, origin=(host, pid)):
                scan.other_info_lines += calls

    def _source(self, source: bytes) -> tuple[str, str, int]:
        """(host, pid, dev) of a source, the same tuple (and strings) for the same source (bounded cache)."""
        known = self.sources.get(source)
        if known is None:
            known = split_source(source)
            if len(self.sources) < MAX_SOURCES:
                self.sources[source] = known
        return known

    def shared(self, value: bytes | None) -> bytes | None:
        """One object per distinct short value (op, datatype, nranks, comm), so that keys share them (bounded)."""
        if value is None:
            return None
        known = self.values.get(value)
        if known is None:
            known = value
            if len(self.values) < MAX_SOURCES:
                self.values[value] = value
        return known

    def _where(self, block: bytearray, newline: int) -> str:
        line = self.line_no + 1 + block.count(b"\n", 0, newline)
        return f"{self.path}:{line}"

    def _example_of(self, block: bytearray, start: int, end: int, text: bytes, kind: str) -> None:
        at = block.find(text, start, end)
        newline = block.rfind(b"\n", 0, at)
        line_end = block.find(b"\n", at)
        self.scan.example(kind, self._where(block, newline), block[newline + 1 : line_end])
