"""Render tables for the terminal (rich): cells in the unit that fits, at most N rows with a note of how many more.

The sections (nsyskit.analysis.present.sections) print with these; kept apart from the HTML side so that printing needs
neither matplotlib nor Jinja2 (a fast --no-html).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.table import Table

if TYPE_CHECKING:  # rich is imported when a table is printed: JSON output does without it
    from rich.table import Table as RichTable

BREAKDOWN_SHOWN = [
    "rank", "device", "window_ns", "busy_pct", "compute_pct", "comm_pct", "memory_pct", "idle_pct",
    "compute_comm_overlap_pct", "compute_memory_overlap_pct", "comm_memory_overlap_pct", "exposed_comm_pct",
]  # fmt: skip
TEXT_COLUMNS = ("name", "kind", "op", "bucket", "host", "origin", "metric", "node", "rank_range")
SIZE_COLUMNS = ("bytes", "avg_bytes", "size_bytes")


def fmt(value, name: str) -> str:
    """A cell: durations and sizes in the unit that fits (ns/us/ms/s, B..GB), percentages with one decimal."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, str):  # already in its unit (a counter's '3.71 GB/s') or a name
        return value
    if isinstance(value, bool):
        return "yes" if value else ""
    if name.endswith("_ns"):
        return units.duration(value)
    if name in SIZE_COLUMNS:
        return units.size(value)
    if name.endswith("_pct"):
        return units.fixed(value, 1)
    if isinstance(value, float):
        return units.fixed(value, 2)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def header(name: str) -> str:
    """A column heading: 'total_ns' -> 'total' (the cells carry their unit), 'busy_pct' -> 'busy %'."""
    return name.removesuffix("_ns").replace("_pct", " %").replace("_gbps", " GB/s").replace("_", " ")


def displayed(table: Table, columns: list[str] | None, full_names: bool = False) -> list[tuple[str, str]]:
    """(heading column, value column) of each column shown: a kernel table's `name` shows its short name unless
    `full_names` (the full one stays in JSON and on hover in report.html); `short_name` is never a column of its own."""
    short = "short_name" in table and not full_names
    return [(c, "short_name" if short and c == "name" else c) for c in (columns or table.names)
            if c in table and c != "short_name"]  # fmt: skip


def rich_table(
    title: str, table: Table, columns: list[str] | None = None, limit: int | None = None, full_names: bool = False
) -> RichTable:
    """A rich table of some columns of a Table (units that fit); at most `limit` rows, the rest counted in the caption."""
    shown_columns = displayed(table, columns, full_names)
    from rich.table import Table as RichTable
    from rich.text import Text

    out = RichTable(title=title, title_justify="left")
    shown = table if limit is None or len(table) <= limit else table.take(slice(0, limit))
    rows = [([fmt(row[values], name) for name, values in shown_columns], row.get("straggler")) for row in shown.rows()]
    for at, (name, values) in enumerate(shown_columns):
        text = name in TEXT_COLUMNS  # numbers never wrap nor shrink: a narrow terminal shortens the names instead
        # a number's column is as wide as its widest value (or header word): its heading wraps, its values never do
        widest = max([*(len(word) for word in header(name).split()), *(len(cells[at]) for cells, _ in rows)])
        # A short name's column stays wrapable to rich (so it is the one that gives up width) while its cells
        # never wrap: one line each, cut with an ellipsis
        out.add_column(header(name), justify="left" if text else "right",
                       overflow="ellipsis" if values == "short_name" else "fold",
                       min_width=None if text else widest)  # fmt: skip
    one_line = [values == "short_name" for _, values in shown_columns]
    for cells, straggler in rows:
        # Text, not markup: kernel names hold brackets ("[lambda() (instance 3)]") that rich would take for tags
        out.add_row(*(Text(cell, no_wrap=cut, overflow="ellipsis" if cut else None) for cell, cut in zip(cells, one_line, strict=True)),
                    style="bold red" if straggler else "")  # fmt: skip
    if len(shown) < len(table):
        out.caption = f"{len(table) - len(shown):,} more rows (--top N shows more; --json has the first 100)"
        out.caption_justify = "left"
    return out
