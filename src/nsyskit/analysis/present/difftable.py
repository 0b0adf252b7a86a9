"""The diff of two runs as a rich table for the terminal."""

from __future__ import annotations

from nsyskit.analysis.judge.diff import DiffResult


def diff_table(result: DiffResult):
    """The diff as a rich table for the terminal (A, B, change, threshold, verdict per metric)."""
    from rich.markup import escape
    from rich.table import Table as RichTable
    from rich.text import Text

    title = escape(f"A = {result.a.label}   B = {result.b.label}   (profiled window)")
    table = RichTable(title=title, title_justify="left")
    for name in ("metric", "A", "B", "change", "fail above", ""):
        table.add_column(name, justify="left" if name == "metric" else "right")
    for cells in result.rows():
        table.add_row(*(Text(cell) for cell in cells), style="bold red" if cells[-1] else "")  # no markup in data
    return table
