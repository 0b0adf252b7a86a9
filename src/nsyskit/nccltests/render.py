"""The terminal tables of 'invoke nccl-tests': each test's rows as nccl-tests printed them, and the diff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsyskit.nccltests.diff import Diff
from nsyskit.nccltests.model import NcclTest, Placement

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

TEXT_COLUMNS = {"type", "redop"}


def number(value: float | None, digits: int = 2) -> str:
    """A bandwidth or time as nccl-tests shows it (fixed decimals), '-' where absent."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if abs(value) < 1e7 else f"{value:.3g}"


def _table(title: str, columns: list[str], rows: list[list[str]], caption: str = "") -> Table:
    """A rich table of text cells (never markup), text columns left-aligned."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left", caption=caption or None, caption_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in TEXT_COLUMNS else "right")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # file text is data, never rich markup
    return table


def _cells(placement: Placement | None) -> list[str]:
    """One placement's time, algbw, busbw and check cells ('-' where the row has none)."""
    if placement is None:
        return ["-", "-", "-", "-"]
    return [number(placement.time_us), number(placement.algbw), number(placement.busbw), placement.wrong]


def test_title(test: NcclTest) -> str:
    """'all_reduce_perf (all_reduce, 16 ranks): FILE:LINE'."""
    facts = [test.op or "operation unknown"]
    if test.ranks:
        facts.append(f"{test.ranks} ranks" if test.ranks > 1 else "1 rank: no link crossed, its busbw says nothing of the fabric")
    if test.name_source == "file name":
        facts.append("name from the file name")
    elif test.name_source == "inferred":
        facts.append("operation inferred from busbw/algbw, redop, root and checks")
    return f"{test.label} ({', '.join(facts)}): {test.path}:{test.first_line}"


def test_table(test: NcclTest) -> Table:
    """One test: size, count, type, redop, then time, algbw, busbw and the check column of both placements."""
    check = test.wrong_column
    columns = ["size (B)", "count", "type", "redop", "out time (us)", "algbw", "busbw", check,
               "in time (us)", "algbw", "busbw", check]  # fmt: skip
    rows = [[str(row.size), str(row.count), row.type, row.redop or "-", *_cells(row.out_of_place),
             *_cells(row.in_place)] for row in test.rows]  # fmt: skip
    average = f"{test.avg_busbw:g} GB/s (line {test.avg_line})" if test.avg_line else "none (the table was cut)"
    caption = f"Avg bus bandwidth: {average}; GB/s = 1e9 B/s"
    return _table(test_title(test), columns, rows, caption)


def diff_table(pair) -> Table:
    """The change per size of one pair of tests: busbw of the baseline (A), of B, and B against A."""
    columns = ["size (B)", "busbw A", "busbw B", "change", "in-place A", "in-place B"]
    rows = []
    for size in pair.sizes:
        change = size.change_pct
        rows.append([str(size.size), number(size.busbw_a), number(size.busbw_b),
                     "-" if change is None else f"{change:+.1f}%", number(size.in_place_a),
                     number(size.in_place_b)])  # fmt: skip
    average = pair.avg_change_pct
    notes = [f"Avg bus bandwidth A {number(pair.a.avg_busbw, 3)}, B {number(pair.b.avg_busbw, 3)} GB/s"
             + ("" if average is None else f" ({average:+.1f}%)")]  # fmt: skip
    if pair.only_a or pair.only_b:
        notes.append(f"sizes only in A: {len(pair.only_a)}, only in B: {len(pair.only_b)}")
    title = f"{pair.key}: A {pair.a.path}:{pair.a.first_line} -> B {pair.b.path}:{pair.b.first_line}"
    return _table(title, columns, rows, "; ".join(notes))


def print_tests(tests: list[NcclTest], console: Console) -> None:
    """Every test's table, in file order."""
    for test in tests:
        console.print(test_table(test))


def print_diff(diff: Diff, console: Console) -> None:
    """The pairs' tables, then the tests one side lacks."""
    for pair in diff.pairs:
        console.print(diff_table(pair))
    for side, tests in (("A (--diff)", diff.only_a), ("B", diff.only_b)):
        for test in tests:
            console.print(f"only in {side}: {test.label} ({test.path}:{test.first_line})")
