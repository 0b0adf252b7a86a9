"""The report's section on the counters sampled beside the trace: one terminal table, heat maps over time per
device (like NVIDIA's gpu_metric_util_map and network_map_aws recipes) and the bytes each network device moved per
step in report.html, the tables unrounded in analysis.json."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.counters import heat_map
from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.present.pernode import Nodes
from nsyskit.analysis.read.records import factorize

if TYPE_CHECKING:
    from rich.console import Console

TITLE = "Counters sampled beside the trace (GPU, EFA, NIC metrics)"
SHOWN = ["rank", "kind", "device", "metric", "unit", "mean", "p50", "p95", "max", "total", "busy_mean", "nccl_mean"]
SUMMARY_SHOWN = ["kind", "metric", "unit", "devices", "mean", "lowest_mean", "lowest", "highest_mean", "highest", "max"]
STEP_SHOWN = ["rank", "step", "kind", "device", "metric", "total", "unit"]
# The values a person reads in their row's unit ('3.71 GB/s', '65.1%', '1.41 GHz'); the unit column then only says
# 'value' where no unit is known. analysis.json keeps the raw numbers and their unit fields.
VALUE_COLUMNS = ("mean", "p50", "p95", "max", "busy_mean", "nccl_mean", "lowest_mean", "highest_mean")
NONE = ("none in these reports: record GPU metrics with nsys --gpu-metrics-devices=all, EFA metrics with "
        "--enable efa_metrics (nsys 2024.4+), NIC metrics with --nic-metrics")  # fmt: skip
# The metrics drawn as heat maps, in this order, when sampled: utilization first, then the network
MAPPED = (r"^SMs? Active", r"^Tensor (Pipe )?Active", r"^DRAM Read", r"^NVLink (RX|TX)", r"^PCIe (RX|TX)",
          r"^rdma_(read|write)_bytes per second", r"Bytes (sent|received|transmitted)")  # fmt: skip
MAX_MAPS = 6
MAX_MAP_ROWS = 64  # devices drawn per heat map; the others are in the bins of analysis.json's tables


def _key_order(table: Table) -> np.ndarray:
    """Network counters first, then the metrics the maps draw, then the rest; by rank and device within."""
    first = (table["kind"] == "gpu").astype(np.int64)
    metrics, code = factorize(table["metric"].tolist())  # each distinct metric matched once, not each row
    mapped = np.array([_mapped_place(m) for m in metrics], dtype=np.int64)[code] if len(code) else code
    return np.lexsort((table["metric"].astype(str), table["device"].astype(str), table["rank"], mapped, first))


def _mapped_place(metric: str) -> int:
    """The metric's place among MAPPED (len(MAPPED) for one no map draws)."""
    return next((i for i, pattern in enumerate(MAPPED) if re.search(pattern, metric)), len(MAPPED))


def summary(table: Table) -> Table:
    """One row per (kind, metric) over every rank and device: the mean of their means, the lowest and highest device."""
    keys = list(dict.fromkeys(zip(table["kind"], table["metric"], table["unit"], strict=True)))
    rows = []
    for kind, metric, unit in keys:
        mine = table.take((table["kind"] == kind) & (table["metric"] == metric) & (table["unit"] == unit))
        low, high = int(np.argmin(mine["mean"])), int(np.argmax(mine["mean"]))
        label = [f"rank {r} {d}" for r, d in zip(mine["rank"], mine["device"], strict=True)]
        rows.append((kind, metric, unit, len(mine), float(mine["mean"].mean()), float(mine["mean"][low]), label[low],
                     float(mine["mean"][high]), label[high], float(mine["max"].max())))  # fmt: skip
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in SUMMARY_SHOWN]
    text = {"kind", "metric", "unit", "lowest", "highest"}
    return Table(
        {n: np.array(c, dtype=object if n in text else None) for n, c in zip(SUMMARY_SHOWN, columns, strict=True)}
    )


def device_bytes(table: Table) -> Table:
    """Per rank and network device (EFA, NIC): the bytes its byte-rate counters moved in the window, all directions."""
    keep = np.isin(table["kind"], ("efa", "nic")) & np.isin(table["total_unit"], ("B", "bytes", "Bytes", "byte"))
    mine = table.take(keep)
    keys, codes = factorize(
        list(zip(mine["rank"].tolist(), mine["kind"].tolist(), mine["device"].tolist(), strict=True))
    )
    moved = np.bincount(codes, weights=mine["total"].astype(np.float64), minlength=len(keys))
    return Table({"rank": np.array([k[0] for k in keys], dtype=np.int64), "kind": np.array([k[1] for k in keys], dtype=object),
                  "device": np.array([k[2] for k in keys], dtype=object), "bytes": moved})  # fmt: skip


def in_units(table: Table) -> Table:
    """A counters table as a person reads it: each value in its row's unit, a total in its own (bytes for a rate), a
    device's bytes in kB/MB/GB (10^3 steps, three significant digits); the unit column left empty where the cells
    say it."""
    columns = dict(table.columns)
    unit = table["unit"] if "unit" in table else np.full(len(table), "", dtype=object)
    for name in VALUE_COLUMNS:
        if name in columns:
            columns[name] = _cells(columns[name], unit)
    if "total" in columns:
        columns["total"] = _cells(columns["total"], columns.get("total_unit", unit))
    if "bytes" in columns:
        columns["bytes"] = _cells(columns["bytes"], np.full(len(table), "B", dtype=object))
    if "unit" in columns:
        known = np.array([units.base_unit(u)[1] != "" for u in unit], dtype=bool)
        columns["unit"] = np.where(known, "", unit).astype(object)
    return Table(columns)


def _cells(values: np.ndarray, unit: np.ndarray) -> np.ndarray:
    return np.array([units.quantity(v, u) for v, u in zip(values.tolist(), unit.tolist(), strict=True)], dtype=object)


def terminal_table(table: Table, top: int) -> tuple[Table, list[str], str]:
    """The one terminal table: every device's row when they fit in `top` rows or each metric has one device, else
    the per-metric summary."""
    whole = summary(table)
    if len(table) <= top or len(whole) == len(table):
        return in_units(table.take(_key_order(table))), _shown(table, SHOWN), ""
    shown = in_units(whole.take(_key_order_summary(whole)))
    return shown, _shown(whole, SUMMARY_SHOWN), f"{len(table):,} device rows: per metric here"


def _shown(table: Table, columns: list[str]) -> list[str]:
    """COLUMNS, without 'unit' where every row's cells carry their unit."""
    unknown = "unit" in table and any(units.base_unit(u)[1] == "" for u in table["unit"].tolist())
    return [c for c in columns if c != "unit" or unknown]


def _key_order_summary(table: Table) -> np.ndarray:
    """The per-metric rows: network counters first, then the mapped metrics, then the rest."""
    first = (table["kind"] == "gpu").astype(np.int64)
    mapped = np.array([_mapped_place(m) for m in table["metric"].tolist()], dtype=np.int64)
    return np.lexsort((table["metric"].astype(str), mapped, first))


def mapped_metrics(table: Table, flat: set[str] = frozenset()) -> list[str]:
    """The metrics to draw (the first sampled of each MAPPED pattern that is not FLAT, in its order, at most
    MAX_MAPS)."""
    names = [n for n in dict.fromkeys(table["metric"].tolist()) if n not in flat]
    chosen = [next((n for n in names if re.search(pattern, n)), None) for pattern in MAPPED]  # one per pattern
    return [n for n in dict.fromkeys(chosen) if n is not None][:MAX_MAPS]


def flat_metrics(table: Table, bins: Table | None) -> dict[str, float]:
    """The metrics a map would draw in one colour: the same value in every bin of every device over the window (an
    NVLink never used, a constant clock), each with that value."""
    flat: dict[str, float] = {}
    if bins is None or not len(bins):
        return flat
    for metric in dict.fromkeys(table["metric"].tolist()):
        _names, _width, means = heat_map(bins, metric)
        finite = means[np.isfinite(means)]
        if len(finite) and finite.min() == finite.max():
            flat[metric] = float(finite[0])
    return flat


def left_out_line(flat: dict[str, float], table: Table) -> str:
    """One line under the maps naming the metrics left out and their one value ('' when none)."""
    if not flat:
        return ""
    unit = {m: u for m, u in zip(table["metric"].tolist(), table["unit"].tolist(), strict=True)}
    named = ", ".join(f"{metric} ({units.quantity(value, unit.get(metric, ''))})" for metric, value in flat.items())
    return f"Not drawn, the same value on every device over the whole window: {named}."


def counter_png(bins: Table, metric: str, unit: str, nodes: Nodes | None = None) -> bytes | None:
    """One metric over time: a heat map of its devices (with `nodes`, a row per node), or a line plot where there is
    one device (a one-rank run)."""
    if nodes is None and len(heat_map(bins, metric)[0]) == 1:
        return line_plot_png(bins, metric, unit)
    return heat_map_png(bins, metric, unit, nodes)


def node_rows(nodes: Nodes) -> tuple[np.ndarray, list[str]]:
    """heat_map's groups for a row per node (or group of nodes): each row labelled with its first node's name."""
    first = {}
    for node, cell in zip(nodes.node.tolist(), nodes.cell.tolist(), strict=True):
        first.setdefault(cell, nodes.names[node])
    return nodes.cell_of_rank(), [first[cell] for cell in range(nodes.cells)]


def line_plot_png(bins: Table, metric: str, unit: str) -> bytes | None:
    """One device's metric against time (a one-row heat map would show the same as colours nobody reads)."""
    names, width, means = heat_map(bins, metric)
    if len(names) != 1:
        return None
    from nsyskit.analysis.present import plots

    plt = plots.plt
    multiplier, label = units.axis(np.nanmax(means) if np.isfinite(means).any() else None, unit)
    seconds = (np.arange(means.shape[1]) + 0.5) * width / 1e9
    fig, ax = plt.subplots(figsize=(plots.WIDTH_IN, 2.8))
    ax.plot(seconds, means[0] * multiplier, marker=".", linewidth=1.2, label=names[0])
    ax.set_xlabel(f"time into the rank's window (s), bins of {width / 1e6:g} ms")
    ax.set_ylabel(label)
    ax.set_title(f"{metric} ({names[0]})")
    ax.set_ylim(bottom=0)
    return plots.png_of(fig)


def heat_map_png(bins: Table, metric: str, unit: str, nodes: Nodes | None = None) -> bytes | None:
    """One metric's heat map: a row per rank and device (at most MAX_MAP_ROWS), or with `nodes` a row per node (the
    mean over its devices, every node), time along x."""
    names, width, means = heat_map(bins, metric, node_rows(nodes) if nodes is not None else None)
    if not names:
        return None
    import io

    from nsyskit.analysis.present import plots

    plt = plots.plt
    multiplier, label = units.axis(np.nanmax(means) if np.isfinite(means).any() else None, unit)
    shown = (means if nodes is not None else means[:MAX_MAP_ROWS]) * multiplier
    fig, ax = plt.subplots(figsize=(plots.WIDTH_IN, min(1.2 + 0.22 * len(shown), 8.0)))
    seconds = width * shown.shape[1] / 1e9
    image = ax.imshow(np.ma.masked_invalid(shown), aspect="auto", cmap="viridis", interpolation="nearest",
                      extent=(0, seconds, len(shown) - 0.5, -0.5))  # fmt: skip
    if len(shown) <= 32:
        ax.set_yticks(range(len(shown)), names[: len(shown)])
    else:  # row names too small to read: the rows' order (rank order) says which is which
        ax.set_yticks([] if nodes is not None else range(len(shown)), [] if nodes is not None else [""] * len(shown))
    more = f" (first {MAX_MAP_ROWS} of {len(names)} devices)" if nodes is None and len(names) > MAX_MAP_ROWS else ""
    ax.set_xlabel(f"time into each rank's window (s), bins of {width / 1e6:g} ms{more}")
    if nodes is not None:
        ax.set_ylabel(f"{len(shown):,} rows in rank order, a row per {nodes.label()}", fontsize=8)
    ax.set_title(metric if nodes is None else f"{metric} per {nodes.one_cell()}: the mean over its devices")
    fig.colorbar(image, ax=ax, label=label)
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=plots.DPI)
    plt.close(fig)
    return buffer.getvalue()


def section(analysis: Analysis, data: Callable[[], dict], nodes: Nodes | None = None):
    """The counters section: the terminal table, report.html's heat maps (with `nodes`, a row per node) and tables,
    analysis.json's tables."""
    from nsyskit.analysis.present.sections import Section, figure, table_data

    table = analysis.counters if analysis.counters is not None else Table({})
    steps = analysis.counter_steps

    def terminal(console: Console, top: int) -> None:
        """The one table, or the line saying how to record counters."""
        if not len(table):
            console.print(f"{TITLE}: {NONE}", markup=False)
            return
        from nsyskit.analysis.present.terminal import rich_table

        shown, columns, note = terminal_table(table, top)
        title = f"{TITLE}, time-weighted over each rank's window" + (f" ({note})" if note else "")
        console.print(rich_table(title, shown, columns, top))

    def html(folder: Path, top: int) -> dict[str, Any]:
        """The heat maps (written beside report.html too) and the tables."""
        if not len(table):
            return {"note": f"Counters: {NONE}"}
        figures = []
        flat = flat_metrics(table, analysis.counter_bins)
        for index, metric in enumerate(mapped_metrics(table, set(flat))):
            unit = str(table["unit"][np.flatnonzero(table["metric"] == metric)[0]])
            png = counter_png(analysis.counter_bins, metric, unit, nodes)
            per = f"{nodes.one_cell()} (the mean over its devices)" if nodes is not None else "device"
            figures += figure(f"{metric} over time per {per}", png, folder, f"counters_{index}.png")
        ordered = table.take(_key_order(table))
        tables = [table_data(ordered, _shown(table, SHOWN), top, title="Per device (time-weighted)", cells=in_units)]
        whole = summary(table)
        if len(table) > top and len(whole) < len(table):  # several devices per metric: their spread first
            spread = in_units(whole.take(_key_order_summary(whole)))
            tables.insert(0, table_data(spread, _shown(whole, SUMMARY_SHOWN), top, title="Per metric, over every device"))
        moved = device_bytes(table)
        if len(moved):
            tables.append(table_data(moved, None, top, cells=in_units,
                                     title="Bytes each network device moved in the window (all directions)"))  # fmt: skip
        if steps is not None and len(steps):
            tables.append(table_data(steps, _shown(steps, STEP_SHOWN), top, cells=in_units,
                                     title="What each network device moved per step"))  # fmt: skip
        return {"figures": figures, "figures_note": left_out_line(flat, table), "tables": tables}

    def json() -> dict:
        """analysis.json's counters and counter_steps."""
        whole = data()
        return {name: whole[name] for name in ("counters", "counter_steps") if name in whole}

    return Section("counters", TITLE, terminal, html, json)
