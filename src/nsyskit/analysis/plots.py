"""The report's figures as PNG bytes (matplotlib, headless): breakdown per rank, NCCL sizes, top kernels, steps."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # headless: no display on build hosts and CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from nsyskit.analysis.analyzers import SIZE_BUCKETS, UNKNOWN_SIZE  # noqa: E402
from nsyskit.analysis.table import Table  # noqa: E402

CATEGORY_COLORS = {"compute": "#4C72B0", "exposed comm": "#DD8452", "memory only": "#55A868", "idle": "#C8C8C8"}


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def breakdown_per_rank(breakdown: Table) -> bytes | None:
    """Stacked bars per rank/GPU: compute, communication not hidden by compute, memory only, idle (% of window)."""
    if breakdown is None or not len(breakdown):
        return None
    labels = [f"r{r}:gpu{d}" for r, d in zip(breakdown["rank"], breakdown["device"], strict=True)]
    span = np.maximum(breakdown["window_ns"], 1)
    compute = breakdown["compute_ns"] * 100.0 / span
    exposed = breakdown["exposed_comm_ns"] * 100.0 / span
    memory_only = (breakdown["busy_ns"] - breakdown["compute_ns"] - breakdown["exposed_comm_ns"]) * 100.0 / span
    idle = breakdown["idle_ns"] * 100.0 / span
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels) + 3), 4))
    bottom = np.zeros(len(labels))
    for (name, color), values in zip(CATEGORY_COLORS.items(), (compute, exposed, memory_only, idle), strict=True):
        ax.bar(labels, values, bottom=bottom, color=color, label=name)
        bottom += values
    overlap = breakdown["compute_comm_overlap_ns"] * 100.0 / span
    ax.scatter(labels, overlap, marker="_", s=300, color="black", label="compute&comm overlap", zorder=3)
    ax.set_ylabel("% of profiled window")
    ax.set_ylim(0, 100)
    ax.set_title("GPU time breakdown per rank")
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1), fontsize=8)
    ax.tick_params(axis="x", rotation=45 if len(labels) > 8 else 0)
    return _png(fig)


def nccl_size_histograms(ops: Table) -> bytes | None:
    """One histogram of NCCL operation durations per message-size bucket (as in the AWS nsys guide)."""
    if ops is None or not len(ops):
        return None
    labels = [label for label, _, _ in SIZE_BUCKETS] + [UNKNOWN_SIZE]
    present = [label for label in labels if (ops["bucket"] == label).any()]
    fig, axes = plt.subplots(1, len(present), figsize=(3.2 * len(present) + 1, 3.2), squeeze=False)
    for ax, label in zip(axes[0], present, strict=True):
        mask = ops["bucket"] == label
        durations_us = ops["duration_ns"][mask] / 1000.0
        ax.hist(durations_us, bins=min(30, max(5, int(np.sqrt(mask.sum())))), color="#DD8452")
        ax.set_title(f"{label} ({int(mask.sum())} ops)", fontsize=9)
        ax.set_xlabel("duration (µs)")
    axes[0][0].set_ylabel("operations")
    fig.suptitle("NCCL operation durations per message size")
    return _png(fig)


def top_kernels(kernels: Table, count: int = 12) -> bytes | None:
    """Horizontal bars of the kernels with the most total GPU time (all ranks)."""
    if kernels is None or not len(kernels):
        return None
    top = kernels.take(slice(0, count))
    names = [_short(n) for n in top["name"]][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(names) + 1.5))
    ax.barh(names, (top["total_ns"] / 1e6)[::-1], color="#4C72B0")
    ax.set_xlabel("total time (ms, all ranks)")
    ax.set_title("Top kernels")
    ax.tick_params(axis="y", labelsize=8)
    return _png(fig)


def step_times_per_rank(steps: Table) -> bytes | None:
    """Step duration over the steps, one line per rank."""
    if steps is None or not len(steps):
        return None
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for rank in np.unique(steps["rank"]):
        mask = steps["rank"] == rank
        ax.plot(steps["step"][mask], steps["duration_ns"][mask] / 1e6, marker="o", markersize=3, label=f"rank {rank}")
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_title("Step time per rank")
    ax.legend(fontsize=8, ncol=2)
    return _png(fig)


def _short(name: str, width: int = 60) -> str:
    name = name.split("(")[0]
    return name if len(name) <= width else name[: width - 1] + "…"
