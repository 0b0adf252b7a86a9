"""The report's figures as PNG bytes (matplotlib, headless), readable from 2 to 16,384 ranks.

Up to PER_RANK_LIMIT ranks a chart draws one bar or line per rank; beyond, it draws a heatmap (ranks along x), so
the chart keeps its size and an outlier rank still stands out; beyond pernode.PER_NODE_FROM ranks, a column per node
(its slowest rank's step time, its median GPU's breakdown). Durations use the unit that fits (ns/us/ms/s).
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")  # headless: no display on build hosts and CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from nsyskit.analysis.compute import units  # noqa: E402
from nsyskit.analysis.compute.analyzers import SIZE_BUCKETS, UNKNOWN_SIZE  # noqa: E402
from nsyskit.analysis.compute.nccldigest import NcclRollup  # noqa: E402
from nsyskit.analysis.compute.ncclfold import histogram  # noqa: E402
from nsyskit.analysis.compute.ncclsizes import bucket_durations  # noqa: E402
from nsyskit.analysis.compute.table import Table  # noqa: E402
from nsyskit.analysis.present.pernode import Nodes, per_cell  # noqa: E402

CATEGORY_COLORS = {"compute": "#4C72B0", "exposed comm": "#DD8452", "memory only": "#55A868", "idle": "#C8C8C8"}
PER_RANK_LIMIT = 16  # more ranks than this: heatmaps instead of one bar/line per rank
WIDTH_IN, DPI = 11.0, 100  # at most 1100 px wide: fits a 1400 px window with the page margins


def png_of(fig) -> bytes:
    """The figure as PNG bytes (laid out tight), closed after."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def _shares(breakdown: Table) -> dict[str, np.ndarray]:
    span = np.maximum(breakdown["window_ns"], 1)
    memory_only = breakdown["busy_ns"] - breakdown["compute_ns"] - breakdown["exposed_comm_ns"]
    values = (breakdown["compute_ns"], breakdown["exposed_comm_ns"], memory_only, breakdown["idle_ns"])
    return {name: v * 100.0 / span for name, v in zip(CATEGORY_COLORS, values, strict=True)}


def breakdown_grid(breakdown: Table, nodes: Nodes | None = None) -> np.ndarray:
    """The breakdown heatmap's matrix: a row per category (CATEGORY_COLORS), a column per GPU in rank order, or with
    `nodes` a column per node (or group of nodes): its GPUs' median share."""
    order = np.lexsort((breakdown["device"], breakdown["rank"]))
    breakdown = breakdown.take(order)
    grid = np.vstack(list(_shares(breakdown).values()))
    return grid if nodes is None else per_cell(grid, nodes.cell_of_rank()[breakdown["rank"]], "median")


def breakdown_per_rank(breakdown: Table | None, nodes: Nodes | None = None) -> bytes | None:
    """Compute / exposed communication / memory only / idle (% of the window) per GPU: stacked bars or a heatmap
    (with `nodes`, a column per node)."""
    if breakdown is None or not len(breakdown):
        return None
    order = np.lexsort((breakdown["device"], breakdown["rank"]))
    breakdown = breakdown.take(order)
    shares = _shares(breakdown)
    labels = [
        f"r{r}" if d == 0 else f"r{r}:gpu{d}" for r, d in zip(breakdown["rank"], breakdown["device"], strict=True)
    ]
    if len(labels) > PER_RANK_LIMIT:
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.2))
        grid = breakdown_grid(breakdown, nodes)
        image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest")
        ax.set_yticks(range(len(shares)), list(shares))
        _name_axes(ax, nodes, grid.shape[1], f"{len(labels):,} GPUs",
                   (f"GPU (rank order, {len(labels)} GPUs)", "GPU time breakdown per GPU"),
                   f"GPU time breakdown per {nodes.one_cell() if nodes else 'node'}: its median GPU "
                   "(the Nodes table names its most idle rank)")  # fmt: skip
        fig.colorbar(image, ax=ax, label="% of profiled window")
        return png_of(fig)
    fig, ax = plt.subplots(figsize=(min(WIDTH_IN, max(6.0, 0.55 * len(labels) + 4)), 3.8))
    bottom = np.zeros(len(labels))
    for (name, color), values in zip(CATEGORY_COLORS.items(), shares.values(), strict=True):
        ax.bar(labels, values, bottom=bottom, color=color, label=name)
        bottom += values
    overlap = breakdown["compute_comm_overlap_ns"] * 100.0 / np.maximum(breakdown["window_ns"], 1)
    ax.scatter(labels, overlap, marker="_", s=300, color="black", label="compute&comm overlap", zorder=3)
    ax.set_ylabel("% of profiled window")
    ax.set_ylim(0, 100)
    ax.set_title("GPU time breakdown per rank")
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1), fontsize=8)
    return png_of(fig)


def _name_axes(ax, nodes: Nodes | None, columns: int, whole: str, per_rank: tuple[str, str], per_node: str) -> None:
    """A heatmap's x label and title: `per_rank` (label, title) with a column per rank, else the nodes' label, the
    columns drawn for the `whole` ('4,096 ranks') and the `per_node` title."""
    label, title = per_rank if nodes is None else (f"{nodes.label()}: {columns:,} columns for {whole}", per_node)
    ax.set_xlabel(label)
    ax.set_title(title)


def step_grid(steps: Table, nodes: Nodes | None = None) -> np.ndarray:
    """The step-time heatmap's matrix (ns): a row per step from the first, a column per rank in rank order, or with
    `nodes` a column per node (or group of nodes): its slowest rank's step time; NaN where no rank has the step."""
    ranks = np.unique(steps["rank"])
    first, last = int(steps["step"].min()), int(steps["step"].max())
    grid = np.full((last - first + 1, len(ranks)), np.nan)
    grid[steps["step"] - first, np.searchsorted(ranks, steps["rank"])] = steps["duration_ns"]
    return grid if nodes is None else per_cell(grid, nodes.cell_of_rank()[ranks], "max")


def step_times_per_rank(steps: Table | None, window: Table | None = None, nodes: Nodes | None = None) -> bytes | None:
    """Step time over the steps: a line per rank (profiled window shaded, warm-up off the scale) or a heatmap (with
    `nodes`, a column per node: its slowest rank)."""
    if steps is None or not len(steps):
        return None
    window = window if window is not None and len(window) else steps
    scale, unit = units.duration_axis(float(np.max(window["duration_ns"])))
    ranks = np.unique(steps["rank"])
    low, high = int(window["step"].min()), int(window["step"].max())
    if len(ranks) > PER_RANK_LIMIT:
        first, last = int(steps["step"].min()), int(steps["step"].max())
        grid = step_grid(steps, nodes) / scale
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.8))
        # Colors capped so that warm-up steps do not wash out the window: at its 99th percentile per rank; per node
        # at the window's slowest node (one slow node among 512 lies above any percentile a cap could take)
        in_window = grid[low - first : high - first + 1]
        top = np.nanpercentile(window["duration_ns"] / scale, 99) if nodes is None else np.nanmax(in_window)
        image = ax.imshow(grid, aspect="auto", cmap="magma_r", vmax=top, interpolation="nearest",
                          extent=(-0.5, grid.shape[1] - 0.5, last + 0.5, first - 0.5))  # fmt: skip
        ax.axhspan(low - 0.5, high + 0.5, fill=False, edgecolor="#2a7", linewidth=1.5, label="profiled window")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("step")
        fig.colorbar(image, ax=ax, label=f"step time ({unit})")
        ax.legend(loc="lower right", fontsize=8)
        _name_axes(ax, nodes, grid.shape[1], f"{len(ranks):,} ranks",
                   (f"rank ({len(ranks)} ranks)", "Step time per rank and step (colors capped at the window's 99th percentile)"),
                   f"Step time per {nodes.one_cell() if nodes else 'node'} and step: its slowest rank "
                   "(the Nodes table names it)")  # fmt: skip
        return png_of(fig)
    fig, ax = plt.subplots(figsize=(min(WIDTH_IN, 9.0), 3.8))
    for rank in ranks:
        mask = steps["rank"] == rank
        ax.plot(steps["step"][mask], steps["duration_ns"][mask] / scale, marker="o", markersize=3, label=f"rank {rank}")
    ax.axvspan(low - 0.5, high + 0.5, color="#2a7", alpha=0.08, label="profiled window")
    in_window = window["duration_ns"] / scale
    spread = max(float(in_window.max() - in_window.min()), float(in_window.max()) * 0.05)
    ax.set_ylim(max(0.0, float(in_window.min()) - spread), float(in_window.max()) + spread)
    outside = steps["duration_ns"] / scale > float(in_window.max()) + spread
    if outside.any():
        ax.annotate(f"{int(outside.sum())} step(s) above the scale (warm-up, up to "
                    f"{units.duration(float(steps['duration_ns'][outside].max()))})",
                    xy=(0.01, 0.97), xycoords="axes fraction", va="top", fontsize=8, color="#a33")  # fmt: skip
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(f"step time ({unit})")
    ax.set_title(f"Step time per rank (profiled window: steps {low}-{high})")
    ax.legend(fontsize=8, ncol=4, loc="lower right")
    return png_of(fig)


def nccl_size_histograms(total: NcclRollup | None) -> bytes | None:
    """One histogram of NCCL operation durations per message-size bucket (as in the AWS nsys guide), counted from the
    run's folded durations (a run of 1,024 ranks has tens of millions of operations)."""
    by_bucket = bucket_durations(total) if total is not None else {}
    if not by_bucket:
        return None
    labels = [label for label, _, _ in SIZE_BUCKETS] + [UNKNOWN_SIZE]
    present = [label for label in labels if label in by_bucket]
    fig, axes = plt.subplots(1, len(present), figsize=(min(WIDTH_IN, 3.2 * len(present) + 1), 3.2), squeeze=False)
    for ax, label in zip(axes[0], present, strict=True):
        durations, times = by_bucket[label]
        count = int(times.sum())
        scale, unit = units.duration_axis(float(durations.max()))
        counts, edges = histogram(durations, times, scale, min(30, max(5, int(np.sqrt(count)))))
        ax.hist(edges[:-1], bins=edges, weights=counts, color="#DD8452")
        ax.set_title(f"{label} ({count:,} ops)", fontsize=9)
        ax.set_xlabel(f"duration ({unit})")
    axes[0][0].set_ylabel("operations")
    fig.suptitle("NCCL operation durations per message size")
    return png_of(fig)


def nccl_busbw(by_size: Table | None) -> bytes | None:
    """Median bus bandwidth (GB/s, 10^9 bytes/s) against message size (nccl-tests' size, log scale), one line per
    collective and communicator size, as nccl-tests' own plots draw them."""
    if by_size is None or not len(by_size):
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.6))
    lines = sorted({(str(op), int(n)) for op, n in zip(by_size["op"], by_size["nranks"], strict=True)})
    for op, n in lines:
        mine = by_size.take((by_size["op"] == op) & (by_size["nranks"] == n))
        label = f"{op} (n={n})" if len({line[1] for line in lines}) > 1 else op
        ax.plot(mine["size_bytes"], mine["busbw_median_gbps"], marker="o", markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda value, _pos: units.size(value)))
    ax.set_xlabel("message size (nccl-tests' size: AllGather's whole output, ReduceScatter's whole input)")
    ax.set_ylabel("busbw (GB/s, median)")
    ax.set_title("NCCL bus bandwidth against message size (operations timed on the GPU)")
    ax.legend(fontsize=8)
    return png_of(fig)


def nccl_busbw_against_fabric(sizes: Table | None, ceiling) -> bytes | None:
    """With --fabric: the busbw nccl-tests measured on the fabric (its tests' own points joined) and the run's size
    buckets (median, p10-p90, the ratio written beside) on the same axes, drawn by nccltests.plot.busbw_plot, the
    one function 'invoke nccl-tests --plot' draws with too."""
    from nsyskit.nccltests.plot import busbw_plot

    points = run_points(sizes)
    return busbw_plot(ceiling.tests, run=points) if points and ceiling is not None else None


def run_points(sizes: Table | None) -> list:
    """The run's size buckets with a busbw (nccltests.plot.RunPoint): where each sits on nccl-tests' size axis, its
    median and p10-p90 busbw, and its ratio to the ceiling (None where the fabric measured no such operation)."""
    from nsyskit.analysis.compute.ncclbandwidth import nccl_tests_size
    from nsyskit.nccltests.plot import RunPoint

    points = []
    for row in sizes.rows() if sizes is not None else ():
        median, ratio = row["busbw_median_gbps"], row.get("fabric_ratio")
        if not row["bw_count"] or not row["count"] or median is None or not math.isfinite(median):
            continue
        known = ratio is not None and math.isfinite(ratio)
        points.append(RunPoint(str(row["op"]), int(row["nranks"]), nccl_tests_size(row), median,
                               row["busbw_p10_gbps"], row["busbw_p90_gbps"], ratio if known else None))  # fmt: skip
    return points


def top_kernels(kernels: Table | None, count: int = 12) -> bytes | None:
    """Horizontal bars of the kernels with the most total GPU time (all ranks)."""
    if kernels is None or not len(kernels):
        return None
    top = kernels.take(slice(0, count))
    # The table's short names (told apart where they collide: equal labels would share one bar)
    names = [_short(n) for n in (top["short_name"] if "short_name" in top else top["name"])][::-1]
    scale, unit = units.duration_axis(float(top["total_ns"].max()))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.35 * len(names) + 1.5))
    ax.barh(names, (top["total_ns"] / scale)[::-1], color="#4C72B0")
    ax.set_xlabel(f"total time ({unit}, all ranks)")
    ax.set_title("Top kernels")
    ax.tick_params(axis="y", labelsize=8)
    return png_of(fig)


def _short(name: str, width: int = 80) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
