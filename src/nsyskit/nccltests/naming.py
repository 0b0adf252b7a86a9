"""A name for a test whose output never names its binary: from the file's name, else from what its rows show.

nccl-tests' busbw is algbw times the operation's factor (PERFORMANCE.md): 2(n-1)/n for all_reduce, (n-1)/n for
all_gather, reduce_scatter and alltoall, 1 for broadcast, reduce and sendrecv. With the redop and root columns
and which in-place cells are checked (in-place alltoall and sendrecv print N/A), the largest row tells most
operations apart; where it cannot (validation off, 2 ranks), the test stays unnamed.
"""

from __future__ import annotations

import re
from pathlib import Path

from nsyskit.nccltests.model import OPS, OTHER_TESTS, NcclTest

# Op names as file names spell them, longest first so 'reduce_scatter' wins over 'reduce'.
_NAME_WORDS = sorted(
    [(op, op) for op in (*OPS, *OTHER_TESTS)]
    + [("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
       ("all2all", "alltoall"), ("bcast", "broadcast")],
    key=lambda pair: -len(pair[0]),
)  # fmt: skip
TOLERANCE = 0.02  # busbw and algbw are printed with 2 decimals: their ratio on the largest row is this close


def name_from_file(test: NcclTest, path: Path) -> bool:
    """Name TEST after its file's name (all_reduce.out, nccl_alltoall.log) if that says an operation."""
    stem = path.name.lower().replace("-", "_")
    for word, op in _NAME_WORDS:
        if re.search(rf"(?<![a-z]){word}(?![a-z])", stem):
            test.name, test.name_source = f"{op}_perf", "file name"
            return True
    return False


def _checked(cell: str) -> bool | None:
    """Whether a check cell was checked (a number), not (N/A), or unknown."""
    return None if not cell else cell != "N/A"


def inferred_op(test: NcclTest) -> str | None:
    """The operation the rows show (busbw/algbw, redop, root, which in-place cells are checked), or None."""
    rows = [row for row in test.rows if row.out_of_place.algbw > 0 and row.out_of_place.busbw > 0]
    if not rows:
        return None
    row = max(rows, key=lambda r: (r.size, r.out_of_place.algbw))
    factor = row.out_of_place.busbw / row.out_of_place.algbw
    reduces = row.redop not in (None, "none")
    rooted = row.root is not None and row.root >= 0
    in_place_checked = _checked(row.in_place.wrong) if row.in_place else None
    out_checked = _checked(row.out_of_place.wrong)
    if factor > 1 + TOLERANCE:
        return "all_reduce" if not rooted else None
    if abs(factor - 1) <= TOLERANCE:
        if rooted:
            return "reduce" if reduces else "broadcast"
        if out_checked and in_place_checked is not None:
            return "all_reduce" if in_place_checked else "sendrecv"  # 2 ranks: all_reduce's factor is 1 too
        return None
    if factor < 1 - TOLERANCE and not rooted:
        if reduces:
            return "reduce_scatter"
        if out_checked and in_place_checked is not None:
            return "all_gather" if in_place_checked else "alltoall"
    return None


def name_tests(tests: list[NcclTest], path: Path) -> None:
    """Name the tests of one file its output leaves unnamed: a lone test after the file, else from its rows."""
    unnamed = [test for test in tests if test.name is None]
    if len(tests) == 1 and unnamed and name_from_file(unnamed[0], path):
        return
    for test in unnamed:
        op = inferred_op(test)
        if op:
            test.name, test.name_source = f"{op}_perf", "inferred"
