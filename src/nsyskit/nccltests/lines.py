"""The lines of a nccl-tests output that matter, found over the whole buffer at once, with launcher prefixes cut.

A Python loop over every line of a 200 MB NCCL_DEBUG=INFO output would spend its time on INFO lines. Instead
each kind of line that matters is found by a regex that starts with a literal (Python's `re` then skips ahead
in C). Rows start a line with a digit after the launchers' prefixes: a whole row on one line comes back with its
13 fields split by the same search (most rows); any other line that starts with a digit comes back as text (a
piece of a row cut by other output, or noise) for the scanner (table.py) to judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Launcher prefixes seen in front of nccl-tests lines, any of them stacked: OpenMPI --tag-output ('[1,0]<stdout>:'),
# srun -l ('0: '), SkyPilot/Ray job logs ('(head, rank=0, pid=3808) ', '(RayTrainWorker pid=1, ip=10.0.0.1) '),
# kubectl logs --prefix ('[pod/name/container] '), Intel MPI / MPICH -prepend-rank ('[0] '), ISO time stamps
# (kubectl --timestamps, CloudWatch), and a fork that prints the source location ('run(), common.cu:967, ').
TAG = rb"\[\d+,\d+\]<std(?:out|err)>:"
PREFIX = (
    rb"(?:" + TAG + rb"|\d+: |\([^()\n]{1,200}\) |\[pod/[^\]\n]{1,250}\] |\[\d+\] "
    rb"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? |\w+\(\), \w+\.cu:\d+, )"
)
PREFIXES = re.compile(rb"(?:" + PREFIX + rb")*")
TAGS = re.compile(TAG)  # OpenMPI cuts rows at each flush: its tag can stand in the middle of a row

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
ROW_START = re.compile(rb"\n(?=[ \t\d\[(])" + PREFIXES.pattern + rb"[ \t]*(?:" + WHOLE_ROW + rb"|(?=\d))")
RANK = re.compile(rb"Rank +(\d+) (?:Group +\d+ )?Pid ")
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


@dataclass(frozen=True)
class Line:
    """A line that matters: its kind, where it starts, its text without prefixes (OpenMPI tags cut) and groups."""

    kind: str
    start: int
    text: str
    groups: tuple[str, ...] = ()


def strip_prefixes(line: bytes) -> bytes:
    """The line without its launchers' prefixes and without OpenMPI tags anywhere in it."""
    line = line[PREFIXES.match(line).end() :]
    return TAGS.sub(b"", line) if b"]<std" in line else line


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


def _row_starts(buffer: bytes):
    """ROW_START's matches, the first line included (it has no newline before it): (line start, match)."""
    first_end = buffer.find(b"\n")
    first = ROW_START.match(b"\n" + buffer[: first_end if first_end >= 0 else len(buffer)])
    if first:
        yield 0, first
    for match in ROW_START.finditer(buffer):
        yield match.start() + 1, match


def scan(buffer: bytes) -> tuple[list[Line], list[tuple[int, tuple[bytes, ...]]]]:
    """(the lines that matter but whole rows, in file order; whole rows as (line start, their 13 fields))."""
    rows: list[tuple[int, tuple[bytes, ...]]] = []
    found: list[tuple[int, int, str, tuple[bytes, ...]]] = []  # (line start, order, kind, groups)
    for start, match in _row_starts(buffer):
        if match.group(1) is None:
            found.append((start, -1, "row", ()))
        else:
            rows.append((start, match.groups()))
    for order, (kind, pattern) in enumerate(KEYWORDS.items()):
        for match in pattern.finditer(buffer):
            line_start = buffer.rfind(b"\n", 0, match.start()) + 1
            groups = _command_name(buffer, match.start()) if kind == "command" else match.groups()
            found.append((line_start, order, kind, groups))
    found.sort()
    lines: list[Line] = []
    seen: set[tuple[int, str]] = set()
    for start, _, kind, groups in found:
        if (start, kind) not in seen:
            seen.add((start, kind))
            lines.append(Line(kind, start, line_text(buffer, start), tuple(decode(g or b"") for g in groups)))
    return lines, rows


def top_rank(buffer: bytes, start: int, end: int) -> int:
    """The highest rank number of the '#  Rank N ... Pid' lines between START and END (-1 where none)."""
    numbers = RANK.findall(buffer, start, end)
    return max(map(int, numbers)) if numbers else -1
