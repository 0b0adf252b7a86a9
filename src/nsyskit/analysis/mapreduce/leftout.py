"""The reports a merge leaves out, named in one line with their ranks as ranges, whatever their number."""

from __future__ import annotations

from pathlib import Path

DETAILED = 5  # reports left out for their own reasons (a failed map, an unreadable part) given a line each
NO_PART = "no part (its map failed or has not run)"  # why a report whose part is missing is left out


def rank_ranges(ranks: list[int]) -> str:
    """Ranks as runs of consecutive numbers: [96, 97, ..., 127, 2051] -> '96-127, 2051'."""
    runs: list[list[int]] = []
    for rank in sorted(set(ranks)):
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


def left_out_lines(left_out: list[tuple[int, str, str]], reports: int, folder: Path) -> list[str]:
    """The analysis' first lines for the reports left out ((rank, report, why) each): one line naming every one of
    them by rank and counting them by cause, then the reasons of the first DETAILED that are not a missing part
    (their reasons differ: a report or a part cut short, a failed map), and how many more there are."""
    if not left_out:
        return []
    missing = [(rank, report) for rank, report, why in left_out if why == NO_PART]
    other = [(rank, why) for rank, _report, why in left_out if why != NO_PART]
    named = ", ".join(Path(report).name for _rank, report in missing) + ": " if len(missing) <= DETAILED else ""
    causes = [f"{len(missing):,} with no part in {folder} ({named}their map failed or has not run)"] if missing else []
    causes += [f"{len(other):,} that could not be analyzed"] if other else []  # a report, its map or its part
    ranks = [rank for rank, _report, _why in left_out]
    lines = [f"{len(left_out):,} of {reports:,} reports left out: ranks {rank_ranges(ranks)} ({'; '.join(causes)}); "
             f"this analysis covers the others"]  # fmt: skip
    lines += [f"rank {rank} left out: {why}" for rank, why in other[:DETAILED]]
    if len(other) > DETAILED:
        more = [rank for rank, _why in other[DETAILED:]]
        lines.append(f"{len(more):,} more left out for their own reasons: ranks {rank_ranges(more)} "
                     f"('analyze-merge --strict' stops at the first with why)")  # fmt: skip
    return lines
