"""The streaming scanner: reads logs (plain or gzip) in big blocks and counts what their lines say, in constant memory.

Speed comes from never looping over lines in Python: one precompiled regex finds every NCCL INFO line of a
block (collectives with their fields, any other message as text), collections.Counter counts identical
findings in C, and only the distinct findings are looked at one by one.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.nccllog.facts import VERSION, Facts
from nsyskit.nccllog.lines import INFO_LINE, MISSED_LINE, TAIL, read_missed_line, split_source
from nsyskit.nccllog.steps import NEEDLES, STEP_FIELDS, StepLine, StepStats, parse_step_line, step_of

BLOCK_SIZE = 8 << 20
MAX_LINE = 16 << 20  # a "line" longer than this is garbage (binary junk): counted and dropped, never buffered
MAX_EXAMPLES = 3
MERGED_LINES = re.compile(rb"\n[^\n]*?NCCL INFO[^\n]*?NCCL INFO[^\n]*+")  # two NCCL lines on one (examples)
PARALLEL_MIN_BYTES = 16 << 20  # below this the files are read in this process (starting workers costs more)


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
    """Everything counted; `coll` maps (source 'host:pid:tid [dev]', op, count, datatype, nranks, comm) bytes to
    calls; `steps` holds each file's step sums (files of different jobs are never averaged together)."""

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
        self.facts.merge(other.facts)
        self.steps.update(other.steps)
        self.files_without_steps += other.files_without_steps
        self.files_without_nccl.update(other.files_without_nccl)
        self.warnings += other.warnings
        for kind, lines in other.examples.items():
            kept = self.examples.setdefault(kind, [])
            kept += lines[: MAX_EXAMPLES - len(kept)]


def what_it_holds(path: Path) -> str:
    """What a file without any NCCL line is, in words: empty, UTF-16 text, binary data or other text."""
    with (gzip.open if is_gzip(path) else open)(path, "rb") as f:
        try:
            head = f.read(4096)
        except (OSError, EOFError, zlib.error):
            return "is unreadable data"
    if not head:
        return "is empty"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head[1:200:2].count(0) > len(head[1:200:2]) // 2:
        return "is UTF-16 text (convert it: iconv -f UTF-16 -t UTF-8)"
    if b"\0" in head or sum(byte < 9 or 13 < byte < 32 for byte in head) > len(head) // 10:
        return "is binary data"
    return "is text without NCCL INFO lines (was NCCL_DEBUG=INFO set?)"


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
        self.fmt: str | None = None  # the file's step-line format, once it showed one
        lines = self.window.lines
        self.in_lines = lines is None or lines[0] <= 1 <= lines[1]
        self.stats = scan.steps.setdefault(str(path), StepStats())
        self.saw_nccl = False  # any NCCL INFO/WARN line or bare version line in the file
        self.look_for_version = True  # until the file's version or first collective line: NCCL <= 2.21's bare line

    def run(self) -> None:
        """Scan the whole file."""
        for block, end in read_blocks(self.path, self.scan, self.block_size):
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
        self.nlines = nlines = block.count(b"\n", 0, end) - 1
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
        self.line_no += nlines

    def _bare_versions(self, block: bytearray) -> None:
        """NCCL <= 2.21 prints 'NCCL version X+cudaY' on stdout without 'NCCL INFO' (maybe behind a launcher
        prefix or a timestamp): read it once per file, before the first collective (init comes first)."""
        first_collective = block.find(b": opCount ", 0, self.end)
        limit = self.end if first_collective < 0 else first_collective
        if first_collective >= 0:
            self.look_for_version = False
        at = block.find(b"NCCL version ", 0, limit)
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
        at, end = 0, self.end
        while True:
            hits = [hit for hit in (block.find(needle, at, end) for needle in NEEDLES.values()) if hit >= 0]
            if not hits:
                return end, []
            line_start = block.rfind(b"\n", 0, min(hits))
            line_end = block.find(b"\n", min(hits), end)
            step = parse_step_line(block[line_start + 1 : line_end].decode("utf-8", "replace"))
            if step is not None:
                self.saw_step, self.fmt = True, step.fmt
                if self.window.steps is None and self.window.lines is None:
                    self.stats.add(step)
                    return line_end, []
                return line_end, [(line_start, "step", step)]
            at = line_end

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
        found = Counter(INFO_LINE.findall(block, start, end))
        info = block.count(b"NCCL INFO", start, end)
        if info:
            self.saw_nccl = True
        if not facts_only:
            whole = start == 0 and end == self.end
            scan.lines_in_window += (
                self.nlines if whole else block.count(b"\n", start, end) - (1 if end == self.end else 0)
            )
            scan.nccl_info_lines += info
            warn = block.count(b"NCCL WARN", start, end)
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
                coll[(source, op, count, dtype, nranks, comm)] += calls
                continue
            host, pid, dev = split_source(source)
            if len(facts.hosts) < 4096:
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

    def _where(self, block: bytearray, newline: int) -> str:
        line = self.line_no + 1 + block.count(b"\n", 0, newline)
        return f"{self.path}:{line}"

    def _example_of(self, block: bytearray, start: int, end: int, text: bytes, kind: str) -> None:
        at = block.find(text, start, end)
        newline = block.rfind(b"\n", 0, at)
        line_end = block.find(b"\n", at)
        self.scan.example(kind, self._where(block, newline), block[newline + 1 : line_end])


def scan_file(path: Path, window: Window, block_size: int = BLOCK_SIZE) -> Scan:
    """One file's counts."""
    scan = Scan(window=window, files=[str(path)])
    FileScanner(path, scan, block_size).run()
    return scan


def workers_for(paths: list[Path]) -> int:
    """Processes to read the files with: one per core (at most one per file); 1 for small inputs."""
    total = sum(path.stat().st_size for path in paths)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 1 if total < PARALLEL_MIN_BYTES else max(1, min(cores, len(paths)))


def scan_files(
    paths: list[Path], window: Window | None = None, block_size: int = BLOCK_SIZE, workers: int | None = None
) -> Scan:
    """Scan the logs (each file has its own line numbers and step state) and return the counts, in file order;
    several files are read by several processes (one per core), each in constant memory."""
    window = window or Window()
    workers = workers_for(paths) if workers is None else workers
    if workers <= 1 or len(paths) <= 1:
        parts = [scan_file(path, window, block_size) for path in paths]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(scan_file, paths, [window] * len(paths), [block_size] * len(paths)))
    scan = Scan(window=window)
    for part in parts:
        scan.merge(part)
    return scan
