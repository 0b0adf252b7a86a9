"""The fabric's measured ceiling: nccl-tests' out-of-place busbw per operation, interpolated on log(size)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

from nsyskit.nccltests.model import OPS, NcclTest, canonical_op


class Ceiling:
    """Measured out-of-place busbw (GB/s) per operation and size, from nccl-tests runs.

    Where several runs measured the same operation and size, the best busbw counts (a ceiling). Sizes are
    nccl-tests' size column in bytes; rows of size 0 and non-finite busbw are left out, and so are tests run on one
    rank (they cross no link: busbw 0 for AllReduce, a local copy's for the others), listed in `one_rank` as 'FILE:LINE'.
    """

    def __init__(self, tests: Iterable[NcclTest]) -> None:
        best: dict[str, dict[int, float]] = {}
        self.sources: dict[str, list[str]] = {}
        self.one_rank: list[str] = []
        self.tests: list[NcclTest] = []  # the tests measured across links: what a plot of the ceiling draws
        for test in tests:
            op = test.op
            if test.crosses_no_link:
                self.one_rank.append(f"{test.path}:{test.first_line}")
                continue
            if op is None:
                continue
            self.tests.append(test)
            points = best.setdefault(op, {})
            for row in test.rows:
                busbw = row.out_of_place.busbw
                if row.size > 0 and math.isfinite(busbw):
                    points[row.size] = max(busbw, points.get(row.size, busbw))
            if test.path not in self.sources.setdefault(op, []):
                self.sources[op].append(test.path)
        self.points = {op: sorted(points.items()) for op, points in best.items() if points}

    @property
    def ops(self) -> tuple[str, ...]:
        """The operations measured, in nccl-tests' names (all_reduce, all_gather, ...), in OPS order first."""
        return tuple(sorted(self.points, key=lambda op: (OPS.index(op) if op in OPS else len(OPS), op)))

    def has(self, op: str) -> bool:
        """Whether OP (nccl-tests' name, the binary's, or NCCL's: AllReduce) was measured."""
        return canonical_op(op) in self.points

    def busbw_at(self, op: str, size_bytes: float) -> float:
        """Out-of-place busbw (GB/s) of OP at SIZE_BYTES: linear in log(size) between the nearest measured sizes.

        Outside the measured range, the nearest end's value. KeyError (naming the ops there are) for an op
        without a test.
        """
        key = canonical_op(op)
        if key not in self.points:
            raise KeyError(f"no nccl-tests measurement of {op!r}; measured: {', '.join(self.ops) or 'none'}")
        points = self.points[key]
        sizes = [size for size, _ in points]
        if size_bytes <= sizes[0]:
            return points[0][1]
        if size_bytes >= sizes[-1]:
            return points[-1][1]
        right = bisect.bisect_left(sizes, size_bytes)
        (s0, b0), (s1, b1) = points[right - 1], points[right]
        if s1 == size_bytes:
            return b1
        share = (math.log(size_bytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
        return b0 + share * (b1 - b0)
