"""The lines of a nccl-tests output that matter, found over the whole buffer at once, with launcher prefixes cut.

A Python loop over every line of a 200 MB NCCL_DEBUG=INFO output would spend its time on INFO lines. Instead
each kind of line that matters is found by a regex that starts with a literal (Python's `re` then skips ahead
in C). Rows start a line with a digit after the launchers' prefixes: a whole row on one line comes back with its
13 fields split by the same search (most rows); any other line that starts with a digit comes back as text (a
piece of a row cut by other output, or noise) for the scanner (table.py) to judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nsyskit import launchprefix

# The launchers' prefixes (srun labels, OpenMPI tags, ...) are the shared rule of nsyskit.launchprefix, which the NCCL
# log reader builds its regex from too; native/rowscan.c mirrors it.
PREFIXES = launchprefix.PREFIXES

NUM = rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf"
WRONG = rb"N/A|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?\*?|-?nan\*?"
_PLACEMENT = rb"[ \t]+(" + NUM + rb")[ \t]+(" + NUM + rb")[ \t]+(" + NUM + rb")[ \t]+(" + WRONG + rb")"
# A whole row: size, count, type, [redop], [root], then both placements' time, algbw, busbw and check; groups 1-13.
WHOLE_ROW = (
    rb"(\d+)[ \t]+(\d+)[ \t]+([A-Za-z]\w*)((?:[ \t]+[A-Za-z]\w*)?)((?:[ \t]+-?\d+)?)"
    + _PLACEMENT * 2
    + rb"[ \t\r]*(?=\n|\Z)"
)
# '\n' first keeps the search in C; a line that starts with a digit but is no whole row leaves groups 1-13 empty.
# Lines that start with a letter or '#' (NCCL INFO, the rank list: most lines) fail at their first byte.
ROW_START = re.compile(
    rb"\n(?=" + launchprefix.FIRST + rb")" + PREFIXES.pattern + rb"[ \t]*(?:" + WHOLE_ROW + rb"|(?=\d))"
)
RANK = re.compile(rb"Rank +(\d+) (?:Group +\d+ )?Pid ")
# Each keyword regex starts with its literal: the C helper finds the literal (memmem), the regex is matched there.
KEYWORDS = {
    "header": re.compile(rb"busbw"),
    "avg": re.compile(rb"Avg bus bandwidth\s*:\s*(\S+)"),
    "start": re.compile(rb"Collective test starting: *(\S+)"),
    "nthread": re.compile(rb"nThread \d+ nGpus \d+[^\n]*"),
    "oob": re.compile(rb"Out of bounds values : *(\d+) *(\w+)"),
    "failure": re.compile(rb"Test (?:NCCL |CUDA )?failure[^\n]*"),
    "oom": re.compile(rb"ut of memory[^\n]*"),  # 'out of memory', 'Out of memory' ('ut': a literal, searched in C)
    "command": re.compile(rb"_perf(?:_mpi)?\b"),  # the binary's name: the word this ends (see _command_name)
}
# The fixed start of each keyword regex (what every match begins with).
LITERALS = {"header": b"busbw", "avg": b"Avg bus bandwidth", "start": b"Collective test starting:", "nthread": b"nThread ",
            "oob": b"Out of bounds values :", "failure": b"Test ", "oom": b"ut of memory", "command": b"_perf"}  # fmt: skip


class Line:
    """A line that matters: its kind, where it starts, its regex groups, and its text without prefixes (OpenMPI tags
    cut), made on first use (most lines need only their groups)."""

    __slots__ = ("kind", "start", "groups", "number", "_buffer", "_text")

    def __init__(self, kind: str, start: int, buffer: bytes, groups: tuple[str, ...] = ()) -> None:
        self.kind, self.start, self.groups, self._buffer, self._text = kind, start, groups, buffer, None
        self.number: int | None = None  # its 1-based line number, when the C helper counted it (else the table does)

    @property
    def text(self) -> str:
        """The line's text without its launchers' prefixes."""
        if self._text is None:
            self._text = line_text(self._buffer, self.start)
        return self._text


def strip_prefixes(line: bytes) -> bytes:
    """The line without its launchers' prefixes and without OpenMPI tags anywhere in it."""
    return launchprefix.strip(line)


def decode(raw: bytes) -> str:
    """Text of a line's bytes (never fails: bad bytes become U+FFFD), without a Windows line end."""
    return raw.decode("utf-8", "replace").rstrip("\r")


def line_text(buffer: bytes, start: int) -> str:
    """The line of BUFFER that starts at START, without its prefixes."""
    end = buffer.find(b"\n", start)
    return decode(strip_prefixes(buffer[start : end if end >= 0 else len(buffer)]))


def _command_name(buffer: bytes, at: int) -> tuple[bytes]:
    """The word ending in '_perf' at AT: the nccl-tests binary a command line or banner names."""
    word = re.search(rb"\w*$", buffer[max(0, at - 64) : at])
    return (word.group(0) + b"_perf",)


@dataclass
class WholeRows:
    """The rows found whole on their line, column by column in file order (flags: 1 a redop column, 2 a root)."""

    starts: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)  # 0 where the row has no root column (flags say)
    types: list[str] = field(default_factory=list)
    redops: list[str] = field(default_factory=list)  # '' where the row has no redop column
    numbers: list[list[float]] = field(default_factory=list)  # six columns: out time, algbw, busbw, in time, ...
    checks: list[list[str]] = field(default_factory=list)  # two columns: out-of-place, in-place


def _row_starts(buffer: bytes):
    """ROW_START's matches, the first line included (it has no newline before it): (line start, match)."""
    first_end = buffer.find(b"\n")
    first = ROW_START.match(b"\n" + buffer[: first_end if first_end >= 0 else len(buffer)])
    if first:
        yield 0, first
    for match in ROW_START.finditer(buffer):
        yield match.start() + 1, match


def _rows_by_regex(buffer: bytes) -> tuple[WholeRows, list[int]]:
    """(whole rows, starts of the other lines ROW_START matches): the reference the C helper gives the same as."""
    rows, others = WholeRows(), []
    numbers: list[list[float]] = [[] for _ in range(6)]
    checks: list[list[str]] = [[], []]
    line, counted = 1, 0
    for start, match in _row_starts(buffer):
        if match.group(1) is None:
            others.append(start)
            continue
        line += buffer.count(b"\n", counted, start)
        counted = start
        fields = match.groups()
        redop, root = fields[3].strip(), fields[4].strip()
        rows.starts.append(start)
        rows.lines.append(line)
        rows.flags.append((1 if redop else 0) | (2 if root else 0))
        rows.sizes.append(int(fields[0]))
        rows.counts.append(int(fields[1]))
        rows.roots.append(int(root) if root else 0)
        rows.types.append(fields[2].decode())
        rows.redops.append(redop.decode())
        for column, index in enumerate((5, 6, 7, 9, 10, 11)):
            numbers[column].append(float(fields[index]))
        checks[0].append(fields[8].decode())
        checks[1].append(fields[12].decode())
    rows.numbers, rows.checks = numbers, checks
    return rows, others


def _rows_by_c(buffer: bytes) -> tuple[WholeRows, list[int]] | None:
    """The same as _rows_by_regex from the C helper (native/rowscan.c); None where it cannot run here."""
    import numpy as np

    from nsyskit.native import rowscan

    found = rowscan.scan_rows(buffer)
    if found is None:
        return None
    flags = found["flags"]
    other = flags == rowscan.OTHER
    whole = ~other
    codes, nums, ints = found["codes"][whole], found["nums"][whole], found["ints"][whole]
    flags = flags[whole]
    texts = np.array([*found["texts"], ""], dtype=object)  # the last: no redop column
    redop_codes = np.where(flags & 1, codes[:, 1], len(texts) - 1)
    rows = WholeRows(
        starts=found["starts"][whole].tolist(),
        lines=found["lines"][whole].tolist(),
        flags=flags.tolist(),
        sizes=ints[:, 0].tolist(),
        counts=ints[:, 1].tolist(),
        roots=ints[:, 2].tolist(),
        types=texts[codes[:, 0]].tolist(),
        redops=texts[redop_codes].tolist(),
        numbers=nums.T.tolist(),
        checks=[texts[codes[:, 2]].tolist(), texts[codes[:, 3]].tolist()],
    )
    return rows, found["starts"][other].tolist()


def _keyword_offsets(buffer: bytes) -> dict[str, list[int]] | None:
    """Where each keyword's literal occurs (the C helper's memmem), or None where the helper is absent."""
    from nsyskit.native import rowscan

    found = {kind: rowscan.find(buffer, literal) for kind, literal in LITERALS.items()}
    return None if any(offsets is None for offsets in found.values()) else found


def _keyword_matches(buffer: bytes, pattern: re.Pattern, offsets: list[int] | None):
    """PATTERN's matches in BUFFER: at the offsets of its literal, else by the regex's own search."""
    if offsets is None:
        yield from pattern.finditer(buffer)
        return
    for offset in offsets:
        match = pattern.match(buffer, offset)
        if match:
            yield match


def scan(buffer: bytes, native: bool = True) -> tuple[list[Line], WholeRows]:
    """(the lines that matter but whole rows, in file order; the whole rows). NATIVE=False: the regex only.

    With the C helper, the keywords are looked for on a second thread while the rows are read (both C calls
    release the GIL): two cores cut the wall time of the two passes."""
    offsets: dict[str, list[int]] | None = None
    made = None
    if native:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            keywords = pool.submit(_keyword_offsets, buffer)
            made = _rows_by_c(buffer)
            offsets = keywords.result()
    rows, others = made if made is not None else _rows_by_regex(buffer)
    found: list[tuple[int, int, str, tuple[bytes, ...]]] = [(start, -1, "row", ()) for start in others]
    for order, (kind, pattern) in enumerate(KEYWORDS.items()):
        for match in _keyword_matches(buffer, pattern, offsets[kind] if offsets else None):
            line_start = buffer.rfind(b"\n", 0, match.start()) + 1
            groups = _command_name(buffer, match.start()) if kind == "command" else match.groups()
            found.append((line_start, order, kind, groups))
    found.sort()
    lines: list[Line] = []
    seen: set[tuple[int, str]] = set()
    for start, _, kind, groups in found:
        if (start, kind) not in seen:
            seen.add((start, kind))
            lines.append(Line(kind, start, buffer, tuple(decode(g or b"") for g in groups)))
    numbers = _line_numbers(buffer, [line.start for line in lines]) if native else None
    if numbers is not None:
        for line, number in zip(lines, numbers, strict=True):
            line.number = number
    return lines, rows


def _line_numbers(buffer: bytes, starts: list[int]) -> list[int] | None:
    """The line numbers of the lines that matter (their starts ascending), counted in C; None without the helper."""
    from nsyskit.native import rowscan

    return rowscan.line_numbers(buffer, starts)


def top_rank(buffer: bytes, start: int, end: int) -> int:
    """The rank of the last '#  Rank N ... Pid' line between START and END (nccl-tests lists the ranks in order, so
    this is the highest, also in lists cut to a few ranks); -1 where there is none."""
    at = buffer.rfind(b"Rank ", start, end)
    while at >= 0:
        match = RANK.match(buffer, at, end)
        if match:
            return int(match.group(1))
        at = buffer.rfind(b"Rank ", start, at)
    return -1
