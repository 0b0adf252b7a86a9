"""The lines of a nccl-tests output that matter, found over the whole buffer at once, with launcher prefixes cut.

A Python loop over every line of a 200 MB NCCL_DEBUG=INFO output would spend its time on INFO lines. Instead
each kind of line that matters is found by a regex that starts with a literal (Python's `re` then skips ahead
in C): row candidates start a line with a digit after the launchers' prefixes; the others hold a keyword.
The scanner (table.py) then walks only these lines, in file order.
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

# A row (or a piece of one) starts its line with a digit after the prefixes; '\n' first keeps the search in C.
ROW_START = re.compile(rb"\n" + PREFIXES.pattern + rb"[ \t]*\d")
KEYWORDS = {
    "header": re.compile(rb"busbw"),
    "avg": re.compile(rb"Avg bus bandwidth\s*:\s*(\S+)"),
    "start": re.compile(rb"Collective test starting: *(\S+)"),
    "nthread": re.compile(rb"nThread \d+ nGpus \d+[^\n]*"),
    "rank": re.compile(rb"Rank +\d+ (?:Group +\d+ )?Pid "),
    "oob": re.compile(rb"Out of bounds values : *(\d+) *(\w+)"),
    "failure": re.compile(rb"Test (?:NCCL |CUDA )?failure[^\n]*"),
    "oom": re.compile(rb"ut of memory[^\n]*"),  # 'out of memory', 'Out of memory' ('ut': a literal, searched in C)
    "command": re.compile(rb"_perf(?:_mpi)?\b"),  # the binary's name: the word this ends (see _command_name)
}


@dataclass(frozen=True)
class Line:
    """A line that matters: its kind, 1-based number, text without prefixes (OpenMPI tags cut) and regex groups."""

    kind: str
    number: int
    text: str
    groups: tuple[str, ...] = ()


def strip_prefixes(line: bytes) -> bytes:
    """The line without its launchers' prefixes and without OpenMPI tags anywhere in it."""
    line = line[PREFIXES.match(line).end() :]
    return TAGS.sub(b"", line) if b"]<std" in line else line


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


def _command_name(buffer: bytes, at: int) -> tuple[bytes]:
    """The word ending in '_perf' at AT: the nccl-tests binary a command line or banner names."""
    word = re.search(rb"\w*$", buffer[max(0, at - 64) : at])
    return (word.group(0) + b"_perf",)


def scan(buffer: bytes) -> list[Line]:
    """Every line that matters in BUFFER, in file order (a line holding two keywords comes once per kind)."""
    starts: dict[int, str] = {}  # line start -> kind, for rows
    found: list[tuple[int, int, str, tuple[str, ...]]] = []  # (line start, order, kind, groups)
    if buffer[:1]:
        first = PREFIXES.match(buffer)
        rest = buffer[first.end() : first.end() + 64].lstrip(b" \t")
        if rest[:1].isdigit():
            starts[0] = "row"
    for match in ROW_START.finditer(buffer):
        starts[match.start() + 1] = "row"
    for order, (kind, pattern) in enumerate(KEYWORDS.items()):
        for match in pattern.finditer(buffer):
            line_start = buffer.rfind(b"\n", 0, match.start()) + 1
            groups = _command_name(buffer, match.start()) if kind == "command" else match.groups()
            found.append((line_start, order, kind, tuple(_decode(g or b"") for g in groups)))
    found += [(start, -1, "row", ()) for start in starts]
    found.sort()
    lines: list[Line] = []
    number, counted_to = 1, 0
    seen: set[tuple[int, str]] = set()
    for start, _, kind, groups in found:
        if (start, kind) in seen:
            continue
        seen.add((start, kind))
        number += buffer.count(b"\n", counted_to, start)
        counted_to = start
        end = buffer.find(b"\n", start)
        raw = buffer[start : end if end >= 0 else len(buffer)]
        lines.append(Line(kind, number, _decode(strip_prefixes(raw)), groups))
    return lines
