"""The diff of two runs for the terminal: the window metrics, then the kernels and NCCL operations that changed most."""

from __future__ import annotations

from nsyskit.analysis.judge.diff import NCCL_KEYS, DiffResult, change_text
from nsyskit.analysis.present.terminal import displayed, fmt, header


def diff_table(result: DiffResult, full_names: bool = False):
    """The diff as rich renderables: the metrics (A, B, change, threshold, verdict), then the changes tables."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table as RichTable
    from rich.text import Text

    title = escape(f"A = {result.a.label}   B = {result.b.label}   (profiled window)")
    table = RichTable(title=title, title_justify="left")
    for name in ("metric", "A", "B", "change", "fail above", ""):
        table.add_column(name, justify="left" if name == "metric" else "right")
    for cells in result.rows():
        table.add_row(*(Text(cell) for cell in cells), style="bold red" if cells[-1] else "")  # no markup in data
    shown = [table]
    for title, changes, keys in (("Kernels", result.kernels, ("name",)), ("NCCL operations", result.nccl, NCCL_KEYS)):
        if not len(changes):
            continue
        out = RichTable(title=f"{title} whose time changed most (B - A)", title_justify="left")
        columns = displayed(changes, list(keys), full_names)
        for name, values in columns:
            out.add_column(header(name), no_wrap=values == "short_name", overflow="ellipsis")
        for label in ("count A", "count B", "total A", "total B", "avg A", "avg B", "change"):
            out.add_column(label, justify="right")
        for row in changes.rows():
            cells = [fmt(row[values], name) for name, values in columns]
            cells += [fmt(row["count_a"], "count"), fmt(row["count_b"], "count"), fmt(row["total_a_ns"], "total_ns"),
                      fmt(row["total_b_ns"], "total_ns"), fmt(row["avg_a_ns"], "avg_ns"), fmt(row["avg_b_ns"], "avg_ns"),
                      change_text(row["change_ns"], row["change_pct"])]  # fmt: skip
            out.add_row(*(Text(cell) for cell in cells), style="red" if row["change_ns"] > 0 else "")
        shown.append(out)
    return Group(*shown)
