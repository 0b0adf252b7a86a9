"""The tables of a nccl-tests output: column layouts, rows (whole or cut in pieces by other output) and the tests.

nccl-tests prints a row in three pieces (the size columns, then each placement's columns once measured) and
a newline; whatever else writes to the same stream (NCCL INFO lines, OpenMPI's tags) can land between the
pieces. A row is therefore read as a head piece followed by placement pieces, on the same line or on the next
lines that start with one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nsyskit.nccltests.lines import Line, scan
from nsyskit.nccltests.model import FileResult, NcclTest, Placement, Problem, Row, canonical_op

NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf"
WRONG = r"N/A|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?\*?|-?nan\*?"
PLACEMENT = re.compile(rf"[ \t]*({NUM})[ \t]+({NUM})[ \t]+({NUM})[ \t]+({WRONG})")
HEAD_COLUMNS = {"size": r"(\d+)", "count": r"(\d+)", "type": r"([A-Za-z]\w*)", "redop": r"([A-Za-z]\w*)",
                "root": r"(-?\d+)"}  # fmt: skip
# The layouts tried, most columns first, for rows with no column header before them (an output cut by its author).
GUESSED_LAYOUTS = (("size", "count", "type", "redop", "root"), ("size", "count", "type", "redop"),
                   ("size", "count", "type", "root"), ("size", "count", "type"))  # fmt: skip
_HEADS: dict[tuple[str, ...], re.Pattern] = {}


def head_pattern(layout: tuple[str, ...]) -> re.Pattern:
    """The regex of a row's head piece (size, count, type and, where the layout has them, redop and root)."""
    if layout not in _HEADS:
        columns = r"[ \t]+".join(HEAD_COLUMNS.get(name, r"(\S+)") for name in layout)
        _HEADS[layout] = re.compile(r"[ \t]*" + columns)
    return _HEADS[layout]


def parse_header(text: str) -> tuple[tuple[str, ...], str, int] | None:
    """(head columns, the check column's name, placements) of a column header line, or None if TEXT is not one."""
    tokens = text.lstrip(" \t#").split()
    if tokens[:2] != ["size", "count"] or "busbw" not in tokens or "time" not in tokens:
        return None
    busbw = tokens.index("busbw")
    check = tokens[busbw + 1] if busbw + 1 < len(tokens) else "#wrong"
    return tuple(tokens[: tokens.index("time")]), check, tokens.count("busbw")


@dataclass
class _Pending:
    """A row whose head piece was read and whose placement pieces are still to come."""

    head: tuple[str, ...]
    line: int
    placements: list[Placement] = field(default_factory=list)


@dataclass
class _Preamble:
    """What the lines before a table said about the test to come."""

    name: str | None = None
    name_source: str = ""
    params: dict[str, str] = field(default_factory=dict)
    top_rank: int = -1


def _placements(text: str, at: int, wanted: int, into: list[Placement]) -> int:
    """Read placement pieces from TEXT at AT until WANTED are in INTO; the position after the last one read."""
    while len(into) < wanted:
        match = PLACEMENT.match(text, at)
        if not match:
            break
        time, algbw, busbw, wrong = match.groups()
        into.append(Placement(float(time), float(algbw), float(busbw), wrong))
        at = match.end()
    return at


class _Scanner:
    """Walks the lines that matter of one file and builds its tests."""

    def __init__(self, path: str) -> None:
        self.result = FileResult(path)
        self.path = path
        self.test: NcclTest | None = None  # the test whose table is open (no average line yet)
        self.placements = 2
        self.pending: _Pending | None = None
        self.pre = _Preamble()

    def problem(self, line: int, message: str) -> Problem:
        return Problem(self.path, line, message)

    def open_test(self, line: int, layout: tuple[str, ...], check: str, placements: int) -> NcclTest:
        """A new test with the preamble's facts; the open one (if any) ends here."""
        self.close_test()
        pre = self.pre
        test = NcclTest(self.path, pre.name, pre.name_source, layout=layout, wrong_column=check, params=pre.params)
        test.ranks = pre.top_rank + 1 if pre.top_rank >= 0 else None
        self.pre = _Preamble()
        self.result.tests.append(test)
        self.test, self.placements = test, placements
        return test

    def close_test(self) -> None:
        self.flush_pending()
        self.test = None

    def flush_pending(self) -> None:
        """Keep a row whose pieces stopped coming (the rows so far, never lost), with a warning."""
        pending, self.pending = self.pending, None
        if pending is None or self.test is None:
            return
        if not pending.placements:
            self.test.warnings.append(self.problem(pending.line, f"row of size {pending.head[0]} stops before its "
                                                   "measurements (the output was cut here): not read"))  # fmt: skip
            return
        self.add_row(pending.head, pending.placements, pending.line)
        self.test.warnings.append(self.problem(pending.line, f"row of size {pending.head[0]} has only its "
                                               "out-of-place columns (the output was cut here)"))  # fmt: skip

    def add_row(self, head: tuple[str, ...], placements: list[Placement], line: int) -> None:
        test = self.test
        values = dict(zip(test.layout, head, strict=True))
        root = values.get("root")
        test.rows.append(Row(int(values["size"]), int(values["count"]), values["type"], values.get("redop"),
                             int(root) if root is not None else None, placements[0],
                             placements[1] if len(placements) > 1 else None, line))  # fmt: skip

    def feed(self, line: Line) -> None:
        getattr(self, "on_" + line.kind)(line)

    def on_start(self, line: Line) -> None:
        self.close_test()
        self.pre = _Preamble(line.groups[0], "banner")

    def on_nthread(self, line: Line) -> None:
        if self.test is not None or self.pre.params:
            self.close_test()
            self.pre = _Preamble(self.pre.name, self.pre.name_source)
        self.pre.params = dict(re.findall(r"(\w+(?: iters)?):? +(\S+)", line.text.lstrip("# ")))

    def on_rank(self, line: Line) -> None:
        number = re.search(r"Rank +(\d+)", line.text)
        if number:
            self.pre.top_rank = max(self.pre.top_rank, int(number.group(1)))

    def on_command(self, line: Line) -> None:
        known = canonical_op(line.groups[0]) is not None  # not another program's '_perf' word (ofi_hook_perf)
        if self.pre.name_source != "banner" and known and "concluded" not in line.text:
            self.pre.name, self.pre.name_source = line.groups[0], "command"

    def on_header(self, line: Line) -> None:
        header = parse_header(line.text)
        if header is None:
            return
        layout, check, placements = header
        test = self.test
        if test is not None and test.layout == layout and not self.pre.params and self.pre.name_source != "banner":
            self.flush_pending()  # the header again inside the same table (several writers on one stream)
            return
        self.open_test(line.number, layout, check, placements).header_line = line.number

    def on_row(self, line: Line) -> None:
        text = line.text
        if self.test is None:
            self.guess_layout(line)
            return
        head = head_pattern(self.test.layout).match(text)
        if head:
            self.flush_pending()
            pending = _Pending(head.groups(), line.number)
            at = _placements(text, head.end(), self.placements, pending.placements)
            self.finish_row(pending, text, at)
        elif self.pending is not None:
            pending, self.pending = self.pending, None
            at = _placements(text, 0, self.placements, pending.placements)
            self.finish_row(pending, text, at)

    def finish_row(self, pending: _Pending, text: str, at: int) -> None:
        if len(pending.placements) == self.placements:
            self.add_row(pending.head, pending.placements, pending.line)
        else:
            self.pending = pending  # its other pieces come on a later line

    def guess_layout(self, line: Line) -> None:
        """A whole row with no column header before it (cut by its author): read it with the layout that fits."""
        for layout in GUESSED_LAYOUTS:
            head = head_pattern(layout).match(line.text)
            if not head:
                continue
            placements: list[Placement] = []
            at = _placements(line.text, head.end(), 2, placements)
            if len(placements) == 2 and not line.text[at:].strip():
                test = self.open_test(0, layout, "#wrong", 2)
                test.warnings.append(self.problem(line.number, "rows with no column header before them: read as "
                                                  f"the columns {' '.join(layout)} and two placements"))  # fmt: skip
                self.add_row(head.groups(), placements, line.number)
                return

    def on_avg(self, line: Line) -> None:
        try:
            value = float(line.groups[0])
        except ValueError:
            return
        test = self.test
        if test is None or not (test.rows or self.pending):
            self.result.stray_avg.append((line.number, value))
            return
        self.flush_pending()
        test.avg_busbw, test.avg_line = value, line.number
        self.close_test()

    def on_oob(self, line: Line) -> None:
        count, verdict = int(line.groups[0]), line.groups[1]
        target = self.test or (self.result.tests[-1] if self.result.tests else None)
        if target is not None:
            target.out_of_bounds = count
        if count or verdict != "OK":
            problem = self.problem(line.number, f"{line.text.lstrip('# ').strip()}: nccl-tests found wrong results")
            (target.failures if target is not None else self.result.failures).append(problem)

    def on_failure(self, line: Line) -> None:
        where = self.test.failures if self.test is not None else self.result.failures
        if where and where[-1].line == line.number:
            return  # 'Test CUDA failure ... out of memory': one failure, found by two keywords
        where.append(self.problem(line.number, " ".join(line.text.split())[:300]))

    on_oom = on_failure

    def finish(self) -> FileResult:
        self.close_test()
        for test in self.result.tests:
            _check_test(test, self.problem)
            if not test.rows:  # a header with nothing under it: kept as a line number for the no-table message
                self.result.empty_headers.append(test.header_line)
                self.result.failures += test.failures
        self.result.tests = [test for test in self.result.tests if test.rows]
        return self.result


def _check_test(test: NcclTest, problem) -> None:
    """A test's failed checks and signs of a cut or mixed output, as failures and warnings."""
    wrong = [row for row in test.rows if row.out_of_place.failed or (row.in_place and row.in_place.failed)]
    if wrong:
        first = wrong[0]
        cells = f"{first.out_of_place.wrong}/{first.in_place.wrong if first.in_place else '-'}"
        test.failures.append(problem(first.line, f"{test.label}: {test.wrong_column} {cells} (out-of-place/in-place) "
                                     f"at size {first.size}: wrong results in {len(wrong)} row(s)"))  # fmt: skip
    if test.rows and not test.avg_line:
        test.warnings.append(problem(test.rows[-1].line, f"{test.label}: no 'Avg bus bandwidth' line after the "
                                     f"table: the run or the file was cut short ({len(test.rows)} rows read)"))  # fmt: skip
    sizes = [row.size for row in test.rows]
    back = next((i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1]), None)
    if back is not None:
        test.warnings.append(problem(test.rows[back].line, f"{test.label}: sizes go back from {sizes[back - 1]} to "
                                     f"{sizes[back]}: rows of several runs mixed on one stream (a build without "
                                     "MPI=1 started by mpirun prints one table per process)"))  # fmt: skip


def read_buffer(buffer: bytes, path: str) -> FileResult:
    """The tests of one nccl-tests output (its bytes), with the failures and warnings found."""
    scanner = _Scanner(path)
    for line in scan(buffer):
        scanner.feed(line)
    return scanner.finish()
