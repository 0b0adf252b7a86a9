"""busbw against message size as a PNG (matplotlib, headless): one line per nccl-tests test, log-scale size axis;
with a training run's collectives (analyze --fabric), the run's points on the same axes against that ceiling."""

from __future__ import annotations

import io
from dataclasses import dataclass

from nsyskit.nccltests.model import NcclTest, canonical_op

WIDTH_IN, DPI = 11.0, 100  # as the report's figures (analysis/present/plots.py): at most 1100 px wide
MAX_LINES = 24  # more tests than this in one figure: the first ones, and the count left out in the title


@dataclass(frozen=True)
class RunPoint:
    """One size bucket of a training run's collective: its operation (NCCL's name), its average size in nccl-tests'
    convention, its median busbw and p10-p90 range (GB/s), and its median over nccl-tests' busbw at that size."""

    op: str
    nranks: int
    size: float
    median: float
    low: float
    high: float
    ratio: float | None


def _size_label(size: float, _position=None) -> str:
    """Sizes as nccl-tests users read them: 8 B, 1 KiB, 16 MiB, 2 GiB (powers of two)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def _label(test: NcclTest, tests: list[NcclTest], side: str) -> str:
    """A line's legend: the test, with its file and line where two tests share a name."""
    named = [t for t in tests if t.label == test.label]
    where = f" ({test.path.rsplit('/', 1)[-1]}:{test.first_line})" if len(named) > 1 else ""
    return f"{side}{test.label}{where}"


def _ceiling_label(test: NcclTest) -> str:
    """A measured line's legend beside a run: what was measured, in which file, on how many ranks."""
    ranks = f", {test.ranks} ranks" if test.ranks else ""
    return f"nccl-tests {test.label} ({test.path.rsplit('/', 1)[-1]}:{test.first_line}{ranks})"


def busbw_plot(
    tests: list[NcclTest], baseline: list[NcclTest] | None = None, run: list[RunPoint] | None = None
) -> bytes | None:
    """busbw_figure as PNG bytes; None with nothing to draw."""
    fig = busbw_figure(tests, baseline, run)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def busbw_figure(tests: list[NcclTest], baseline: list[NcclTest] | None = None, run: list[RunPoint] | None = None):
    """Out-of-place busbw (GB/s) against size, a line per test (a baseline's dashed); with RUN, the run's buckets
    as points with their p10-p90 range, each in its operation's colour and with its ratio to the measured line
    written beside it. A matplotlib Figure, or None with nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on build hosts and CI
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    sides = [("", tests, "-")] + ([("A: ", baseline, "--")] if baseline else [])
    drawn = [(side, t, style, every) for side, every, style in sides for t in every if any(r.size > 0 for r in t.rows)]
    if not drawn and not run:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.6 if run else 4.2))
    colours: dict[str | None, str] = {}
    for side, test, style, every in drawn[:MAX_LINES]:
        points = sorted((row.size, row.out_of_place.busbw) for row in test.rows if row.size > 0)
        label = _ceiling_label(test) if run else _label(test, every, side if baseline else "")
        (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", markersize=3,
                          label=label, alpha=0.85 if run else 1.0)  # fmt: skip
        colours.setdefault(test.op, line.get_color())
    for point in run or []:
        _run_point(ax, point, colours)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    ax.set_xlabel("message size (nccl-tests size column)" if not run else
                  "message size (nccl-tests' size: AllGather's whole output, ReduceScatter's whole input)")  # fmt: skip
    ax.set_ylabel("busbw, out-of-place (GB/s)" if not run else "busbw (GB/s)")
    left = len(drawn) - MAX_LINES
    title = ("The run's collectives against the busbw nccl-tests measured on the fabric" if run
             else "nccl-tests bus bandwidth by message size")  # fmt: skip
    ax.set_title(title + (f" (first {MAX_LINES}; {left} more)" if left > 0 else ""))
    ax.grid(True, which="major", alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def _run_point(ax, point: RunPoint, colours: dict[str | None, str]) -> None:
    """One run bucket: its median with the p10-p90 range as an error bar, in its operation's colour, one legend
    entry per operation, and its ratio to the ceiling beside it."""
    op = canonical_op(point.op)
    label = f"run {point.op} (n={point.nranks}): median, p10-p90"
    first = f"run:{op}:{point.nranks}" not in colours
    colour = colours.setdefault(op, colours.get(op) or f"C{len(colours) % 10}")
    colours[f"run:{op}:{point.nranks}"] = colour
    below, above = max(point.median - point.low, 0.0), max(point.high - point.median, 0.0)
    ax.errorbar([point.size], [point.median], yerr=[[below], [above]], fmt="D", color=colour, markersize=6,
                markeredgecolor="black", capsize=4, label=label if first else None, zorder=3)  # fmt: skip
    if point.ratio is not None:
        ax.annotate(f"{point.ratio * 100:.0f}% of nccl-tests", (point.size, point.median), xytext=(8, -3),
                    textcoords="offset points", fontsize=8, color="black")  # fmt: skip
