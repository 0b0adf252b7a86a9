"""busbw against message size as a PNG (matplotlib, headless): one line per test, log-scale size axis."""

from __future__ import annotations

import io

from nsyskit.nccltests.model import NcclTest

WIDTH_IN, DPI = 11.0, 100  # as the report's figures (analysis/present/plots.py): at most 1100 px wide
MAX_LINES = 24  # more tests than this in one figure: the first ones, and the count left out in the title


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


def busbw_plot(tests: list[NcclTest], baseline: list[NcclTest] | None = None) -> bytes | None:
    """Out-of-place busbw (GB/s) against size, a line per test (a baseline's dashed); None with no row to draw."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on build hosts and CI
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    sides = [("", tests, "-")] + ([("A: ", baseline, "--")] if baseline else [])
    drawn = [(side, t, style, every) for side, every, style in sides for t in every if any(r.size > 0 for r in t.rows)]
    if not drawn:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.2))
    for side, test, style, every in drawn[:MAX_LINES]:
        points = sorted((row.size, row.out_of_place.busbw) for row in test.rows if row.size > 0)
        ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", markersize=3,
                label=_label(test, every, side if baseline else ""))  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    ax.set_xlabel("message size (nccl-tests size column)")
    ax.set_ylabel("busbw, out-of-place (GB/s)")
    left = len(drawn) - MAX_LINES
    ax.set_title(
        "nccl-tests bus bandwidth by message size" + (f" (first {MAX_LINES}; {left} more)" if left > 0 else "")
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()
