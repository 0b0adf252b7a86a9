"""The tables of a nccl-tests output: column layouts, rows (whole or cut in pieces by other output) and the tests.

nccl-tests prints a row in three pieces (the size columns, then each placement's columns once measured) and
a newline; whatever else writes to the same stream (NCCL INFO lines, OpenMPI's tags) can land between the
pieces. A row is therefore read as a head piece followed by placement pieces, on the same line or on the next
lines that start with one.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import re
from dataclasses import dataclass, field

from nsyskit.nccltests.lines import NUM, WRONG, Line, WholeRows, scan, top_rank
from nsyskit.nccltests.model import FileResult, NcclTest, Placement, Problem, Row, canonical_op

_NUM, _WRONG = NUM.decode(), WRONG.decode()
PLACEMENT = re.compile(rf"[ \t]*({_NUM})[ \t]+({_NUM})[ \t]+({_NUM})[ \t]+({_WRONG})")
HEAD_COLUMNS = {"size": r"(\d+)", "count": r"(\d+)", "type": r"([A-Za-z]\w*)", "redop": r"([A-Za-z]\w*)",
                "root": r"(-?\d+)"}  # fmt: skip
# The layouts tried, most columns first, for rows with no column header before them (an output cut by its author).
GUESSED_LAYOUTS = (("size", "count", "type", "redop", "root"), ("size", "count", "type", "redop"),
                   ("size", "count", "type", "root"), ("size", "count", "type"))  # fmt: skip
STANDARD_TAILS = ((), ("redop",), ("root",), ("redop", "root"))  # layouts the whole-row search splits
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

    def __init__(self, path: str, buffer: bytes) -> None:
        self.result = FileResult(path)
        self.path, self.buffer = path, buffer
        self.test: NcclTest | None = None  # the test whose table is open (no average line yet)
        self.placements = 2
        self.shape = -1  # the open table's whole-row flags (1: redop, 2: root column), if whole rows' fields fit it
        # (size count type [redop] [root], two placements); -1: every row the slow way
        self.pending: _Pending | None = None
        self.pre = _Preamble()
        self.region = 0  # where the open test's preamble starts: its '#  Rank' lines lie between here and its table
        self.at = 0  # the line number of the line being read
        self.counted = (0, 1)  # (offset, line number there): line numbers are counted forward only
        kinds = ("start", "nthread", "command", "header", "row", "avg", "oob", "failure", "oom")
        self.handlers = {kind: getattr(self, "on_" + kind) for kind in kinds}

    def number(self, start: int) -> int:
        """The 1-based line number of the line starting at START (lines come in file order)."""
        offset, line = self.counted
        line += self.buffer.count(b"\n", offset, start)
        self.counted = (start, line)
        return line

    def whole_rows(self, rows: WholeRows, first: int, last: int) -> None:
        """Rows FIRST to LAST found whole on their line (most rows): straight into the open table where their
        columns fit it, one at a time through on_row where not (no table open, a row's pieces pending)."""
        index = first
        while index < last:
            if self.test is None or self.pending is not None or rows.flags[index] != self.shape:
                start = rows.starts[index]
                self.at = self.number(start)
                self.on_row(Line("row", start, self.buffer))
                index += 1
                continue
            index = self._append_rows(rows, index, last)

    def _append_rows(self, rows: WholeRows, index: int, last: int) -> int:
        """Append whole rows from INDEX while their columns fit the open table; the index of the first left."""
        shape, flags = self.shape, rows.flags
        stop = index
        while stop < last and flags[stop] == shape:
            stop += 1
        part = slice(index, stop)
        absent = itertools.repeat(None)  # a column the layout does not have
        numbers = [column[part] for column in rows.numbers]
        out = map(Placement, numbers[0], numbers[1], numbers[2], rows.checks[0][part])
        inplace = map(Placement, numbers[3], numbers[4], numbers[5], rows.checks[1][part])
        redops = rows.redops[part] if shape & 1 else absent
        roots = rows.roots[part] if shape & 2 else absent
        # map, not a generator: no Python frame per row (a third of the time of 150,000 rows)
        self.test.rows.extend(map(Row, rows.sizes[part], rows.counts[part], rows.types[part], redops, roots, out, inplace,
                                  rows.lines[part]))  # fmt: skip
        self.counted = (rows.starts[stop - 1], rows.lines[stop - 1])
        return stop

    def problem(self, line: int, message: str) -> Problem:
        """A problem of this file at LINE."""
        return Problem(self.path, line, message)

    def open_test(self, start: int, layout: tuple[str, ...], check: str, placements: int) -> NcclTest:
        """A new test, its table starting at START, with the preamble's facts; the open one (if any) ends here."""
        self.close_test(start)
        pre = self.pre
        test = NcclTest(self.path, pre.name, pre.name_source, layout=layout, wrong_column=check, params=pre.params)
        top = top_rank(self.buffer, self.region, start)
        test.ranks = top + 1 if top >= 0 else None
        self.pre = _Preamble()
        self.result.tests.append(test)
        self.test, self.placements = test, placements
        standard = layout[:3] == ("size", "count", "type") and layout[3:] in STANDARD_TAILS
        self.shape = ("redop" in layout) | 2 * ("root" in layout) if standard and placements == 2 else -1
        return test

    def close_test(self, start: int | None = None) -> None:
        """End the open test (its pending row kept); its successor's preamble starts at START."""
        self.flush_pending()
        if self.test is not None and start is not None:
            self.region = start
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
        """Append a row read the slow way (head texts by the layout, one or two placements)."""
        test = self.test
        values = dict(zip(test.layout, head, strict=True))
        root = values.get("root")
        test.rows.append(Row(int(values["size"]), int(values["count"]), values["type"], values.get("redop"),
                             int(root) if root is not None else None, placements[0],
                             placements[1] if len(placements) > 1 else None, line))  # fmt: skip

    def feed(self, line: Line) -> None:
        """Read one line that matters (its number counted forward, unless the C helper counted it)."""
        if line.number is None:
            self.at = self.number(line.start)
        else:
            self.at, self.counted = line.number, (line.start, line.number)
        self.handlers[line.kind](line)

    def on_start(self, line: Line) -> None:
        """'# Collective test starting: X': a new test's preamble, named by the banner."""
        self.close_test()
        self.pre, self.region = _Preamble(line.groups[0], "banner"), line.start

    def on_nthread(self, line: Line) -> None:
        """'# nThread ...': the settings of the test to come (a second one starts another test)."""
        if self.test is not None or self.pre.params:
            self.close_test()
            self.pre = _Preamble(self.pre.name, self.pre.name_source)
        self.region = line.start
        self.pre.params = dict(re.findall(r"(\w+(?: iters)?):? +(\S+)", line.text.lstrip("# ")))

    def on_command(self, line: Line) -> None:
        """A line naming a nccl-tests binary (a command line): the next test's name unless a banner names it."""
        known = canonical_op(line.groups[0]) is not None  # not another program's '_perf' word (ofi_hook_perf)
        if self.pre.name_source != "banner" and known and "concluded" not in line.text:
            self.pre.name, self.pre.name_source = line.groups[0], "command"

    def on_header(self, line: Line) -> None:
        """A column header: a new table, or the same one's header printed again."""
        header = parse_header(line.text)
        if header is None:
            return
        layout, check, placements = header
        test = self.test
        if test is not None and test.layout == layout and not self.pre.params and self.pre.name_source != "banner":
            self.flush_pending()  # the header again inside the same table (several writers on one stream)
            return
        self.open_test(line.start, layout, check, placements).header_line = self.at

    def on_row(self, line: Line) -> None:
        """A line starting with a digit, read the slow way: a row, the rest of a cut row, or noise."""
        text = line.text
        if self.test is None:
            self.guess_layout(line)
            return
        head = head_pattern(self.test.layout).match(text)
        if head:
            self.flush_pending()
            pending = _Pending(head.groups(), self.at)
            _placements(text, head.end(), self.placements, pending.placements)
            self.finish_row(pending)
        elif self.pending is not None:
            pending, self.pending = self.pending, None
            _placements(text, 0, self.placements, pending.placements)
            self.finish_row(pending)

    def finish_row(self, pending: _Pending) -> None:
        """A row whose placements are all read goes in; else it waits for its other pieces."""
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
                test = self.open_test(line.start, layout, "#wrong", 2)
                test.warnings.append(self.problem(self.at, "rows with no column header before them: read as "
                                                  f"the columns {' '.join(layout)} and two placements"))  # fmt: skip
                self.add_row(head.groups(), placements, self.at)
                return

    def on_avg(self, line: Line) -> None:
        """'# Avg bus bandwidth : X': the open test's average, which closes it (or a stray one)."""
        try:
            value = float(line.groups[0])
        except ValueError:
            return
        test = self.test
        if test is None or not (test.rows or self.pending):
            self.result.stray_avg.append((self.at, value))
            return
        self.flush_pending()
        test.avg_busbw, test.avg_line = value, self.at
        self.close_test(line.start)

    def on_oob(self, line: Line) -> None:
        """'# Out of bounds values : N OK|FAILED': the test's count, a failure when not 0 OK."""
        count, verdict = int(line.groups[0]), line.groups[1]
        target = self.test or (self.result.tests[-1] if self.result.tests else None)
        if target is not None:
            target.out_of_bounds = count
        if count or verdict != "OK":
            problem = self.problem(self.at, f"{line.text.lstrip('# ').strip()}: nccl-tests found wrong results")
            (target.failures if target is not None else self.result.failures).append(problem)

    def on_failure(self, line: Line) -> None:
        """'Test NCCL failure', out of memory: a failure of the open test, else of the file."""
        where = self.test.failures if self.test is not None else self.result.failures
        if where and where[-1].line == self.at:
            return  # 'Test CUDA failure ... out of memory': one failure, found by two keywords
        where.append(self.problem(self.at, " ".join(line.text.split())[:300]))

    on_oom = on_failure

    def finish(self) -> FileResult:
        """The file's result: tests checked for failures and cuts, headers without rows set aside."""
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
    passed = ("0", "N/A")  # most cells: no need to look closer
    wrong = [row for row in test.rows
             if (row.out_of_place.wrong not in passed and row.out_of_place.failed)
             or (row.in_place is not None and row.in_place.wrong not in passed and row.in_place.failed)]  # fmt: skip
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


def read_buffer(buffer: bytes, path: str, native: bool = True) -> FileResult:
    """The tests of one nccl-tests output (its bytes), with the failures and warnings found (NATIVE=False: the
    whole rows found by the regex, not the C helper: the same result)."""
    collecting = gc.isenabled()
    gc.disable()  # 100,000s of new rows, none in a cycle: the collector's passes over them cost a third of the time
    try:
        return _read(buffer, path, native)
    finally:
        if collecting:
            gc.enable()


def _read(buffer: bytes, path: str, native: bool) -> FileResult:
    """read_buffer with the collector off: the lines that matter fed in file order, whole rows merged in."""
    scanner = _Scanner(path, buffer)
    lines, rows = scan(buffer, native)
    done = 0
    for line in lines:  # whole rows merged in, in file order
        upto = bisect.bisect_left(rows.starts, line.start, done)
        scanner.whole_rows(rows, done, upto)
        done = upto
        scanner.feed(line)
    scanner.whole_rows(rows, done, len(rows.starts))
    return scanner.finish()
