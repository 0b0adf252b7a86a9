"""What a nccl-tests output holds: rows of both placements, the tests they form, and the operations' names."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

# nccl-tests' collective names (the binary without `_perf`), as the ceiling and the JSON name them.
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
# Other tests nccl-tests (and rccl-tests) ship: read and shown, but no NCCL collective of a training run maps to them.
OTHER_TESTS = ("scatter", "gather", "hypercube", "alltoallv")
_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall",
    "all_to_all": "alltoall",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
    "send_recv": "sendrecv",
    "alltoallv": "alltoallv",
}


@functools.lru_cache(maxsize=256)  # a file names its binary on many lines
def canonical_op(name: str | None) -> str | None:
    """nccl-tests' op name for a binary (`all_reduce_perf`, `all_reduce_perf_mpi`) or an NCCL op (`AllReduce`)."""
    if not name:
        return None
    text = re.sub(r"(_perf)(_mpi)?$", "", name.strip().split("/")[-1]).removeprefix("nccl").removeprefix(":")
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text).lower()  # AllReduce -> all_reduce; all_reduce stays
    if key in OPS or key in OTHER_TESTS:
        return key
    return _ALIASES.get(key.replace("_", "")) or _ALIASES.get(key)


@dataclass(slots=True)  # slots, not frozen: a frozen dataclass costs 5x to build, and a file holds 100,000s of rows
class Placement:
    """One placement's measurement (out-of-place or in-place): time in us, bandwidths in GB/s (1e9 B/s)."""

    time_us: float
    algbw: float
    busbw: float
    wrong: str  # the cell as printed: '0', '96', 'N/A', or the old layout's max error ('2e-07'), maybe with '*'

    @property
    def wrong_count(self) -> int | None:
        """The #wrong count (None where the cell is N/A or the old layout's error value)."""
        text = self.wrong.rstrip("*")
        return int(text) if text.isdigit() else None

    @property
    def failed(self) -> bool:
        """Whether this cell reports a failed check: #wrong above 0, or rccl-tests' asterisk (over the threshold)."""
        return self.wrong.endswith("*") or bool(self.wrong_count)

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {"time_us": self.time_us, "algbw_gbps": self.algbw, "busbw_gbps": self.busbw, "wrong": self.wrong}


@dataclass(slots=True)
class Row:
    """One message size of a test: what the row says, and the line it came from (1-based)."""

    size: int  # bytes, nccl-tests' size column (for gather/scatter-like ops the whole buffer: n x per-rank chunk)
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Placement
    in_place: Placement | None
    line: int

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {
            "size": self.size,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            "out_of_place": self.out_of_place.to_dict(),
            "in_place": self.in_place.to_dict() if self.in_place else None,
            "line": self.line,
        }


@dataclass(frozen=True)
class Problem:
    """Something wrong in a file, at a line: a failure of the run, or a warning about what could be read."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class NcclTest:
    """One run of one nccl-tests binary: its rows in file order, the average line and where the name came from."""

    path: str
    name: str | None = None  # the binary's name as printed ('all_reduce_perf'), or None where the file never says
    name_source: str = ""  # banner | command | file name | inferred | ''
    header_line: int = 0
    layout: tuple[str, ...] = ()  # the head columns: ('size', 'count', 'type', 'redop', 'root') or fewer
    wrong_column: str = "#wrong"  # '#wrong', or 'error' in the 2.0-era layout
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    avg_line: int = 0
    out_of_bounds: int | None = None
    ranks: int | None = None  # '#  Rank' lines before the table, where printed
    params: dict[str, str] = field(default_factory=dict)  # the '# nThread' line's settings
    failures: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def op(self) -> str | None:
        """nccl-tests' op name (all_reduce, ...), or None where the test's name is unknown."""
        return canonical_op(self.name)

    @property
    def crosses_no_link(self) -> bool:
        """Whether the test ran on one rank: no link crossed, it times the GPU's own copy (busbw is 0 for AllReduce by
        definition, 2(n-1)/n). Told by its one '#  Rank' line, or where none is printed by a busbw of 0 beside a
        positive algbw at every size."""
        if self.ranks is not None:
            return self.ranks == 1
        measured = [row.out_of_place for row in self.rows if row.size > 0]
        return bool(measured) and all(m.busbw == 0 for m in measured) and any(m.algbw > 0 for m in measured)

    @property
    def label(self) -> str:
        """A name to show: the binary, else 'nccl-tests' with its file."""
        return self.name or "unnamed test"

    @property
    def first_line(self) -> int:
        """The first line of the test's table (header, else first row, else the average line)."""
        return self.header_line or (self.rows[0].line if self.rows else self.avg_line)

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {
            "path": self.path,
            "name": self.name,
            "op": self.op,
            "name_source": self.name_source,
            "line": self.first_line,
            "layout": list(self.layout),
            "wrong_column": self.wrong_column,
            "ranks": self.ranks,
            "params": self.params,
            "avg_busbw_gbps": self.avg_busbw,
            "avg_line": self.avg_line or None,
            "out_of_bounds": self.out_of_bounds,
            "rows": [row.to_dict() for row in self.rows],
            "failures": [str(p) for p in self.failures],
            "warnings": [str(p) for p in self.warnings],
        }


@dataclass
class FileResult:
    """Everything one file gave: its tests, and the failures and warnings outside any test."""

    path: str
    tests: list[NcclTest] = field(default_factory=list)
    failures: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    stray_avg: list[tuple[int, float]] = field(default_factory=list)  # average lines with no row before them
    empty_headers: list[int] = field(default_factory=list)  # column headers with no row under them

    def all_failures(self) -> list[Problem]:
        """This file's failures, its tests' included, in line order."""
        return sorted([*self.failures, *(p for t in self.tests for p in t.failures)], key=lambda p: p.line)

    def all_warnings(self) -> list[Problem]:
        """This file's warnings, its tests' included, in line order."""
        return sorted([*self.warnings, *(p for t in self.tests for p in t.warnings)], key=lambda p: p.line)

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {
            "path": self.path,
            "tests": [test.to_dict() for test in self.tests],
            "failures": [str(p) for p in self.failures],
            "warnings": [str(p) for p in self.warnings],
            "avg_lines_without_table": [{"line": line, "avg_busbw_gbps": value} for line, value in self.stray_avg],
        }
