"""The change per size between two sets of nccl-tests runs: tests paired by operation, busbw side by side."""

from __future__ import annotations

from dataclasses import dataclass, field

from nsyskit.nccltests.model import NcclTest


@dataclass(frozen=True)
class SizeChange:
    """One size measured on both sides: out-of-place and in-place busbw (GB/s) of the baseline (a) and of b."""

    size: int
    busbw_a: float
    busbw_b: float
    in_place_a: float | None
    in_place_b: float | None

    @property
    def change_pct(self) -> float | None:
        """b against a in percent (None where a is 0: no share of nothing)."""
        return (self.busbw_b - self.busbw_a) * 100.0 / self.busbw_a if self.busbw_a else None

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {"size": self.size, "busbw_a_gbps": self.busbw_a, "busbw_b_gbps": self.busbw_b,
                "in_place_busbw_a_gbps": self.in_place_a, "in_place_busbw_b_gbps": self.in_place_b,
                "change_pct": self.change_pct}  # fmt: skip


@dataclass
class TestDiff:
    """A test of the baseline (a) and its counterpart (b): the sizes both have and those only one has."""

    key: str
    a: NcclTest
    b: NcclTest
    sizes: list[SizeChange] = field(default_factory=list)
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)

    @property
    def avg_change_pct(self) -> float | None:
        """The change of the 'Avg bus bandwidth' line in percent, where both sides have one."""
        if self.a.avg_busbw and self.b.avg_busbw is not None:
            return (self.b.avg_busbw - self.a.avg_busbw) * 100.0 / self.a.avg_busbw
        return None

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {"test": self.key, "a": f"{self.a.path}:{self.a.first_line}", "b": f"{self.b.path}:{self.b.first_line}",
                "avg_busbw_a_gbps": self.a.avg_busbw, "avg_busbw_b_gbps": self.b.avg_busbw,
                "avg_change_pct": self.avg_change_pct, "sizes": [s.to_dict() for s in self.sizes],
                "only_a": self.only_a, "only_b": self.only_b}  # fmt: skip


@dataclass
class Diff:
    """Every pair of tests, and the tests that one side has and the other lacks."""

    pairs: list[TestDiff] = field(default_factory=list)
    only_a: list[NcclTest] = field(default_factory=list)
    only_b: list[NcclTest] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        where = [f"{t.path}:{t.first_line}" for t in self.only_a], [f"{t.path}:{t.first_line}" for t in self.only_b]
        return {"pairs": [p.to_dict() for p in self.pairs], "only_a": where[0], "only_b": where[1]}


def _key(test: NcclTest) -> str:
    """What pairs tests across the two sides: the operation, else the label."""
    return test.op or test.label


def _by_size(test: NcclTest) -> dict[int, tuple[float, float | None]]:
    """busbw per size; where a size repeats (runs mixed on one stream), its first row."""
    sizes: dict[int, tuple[float, float | None]] = {}
    for row in test.rows:
        sizes.setdefault(row.size, (row.out_of_place.busbw, row.in_place.busbw if row.in_place else None))
    return sizes


def pair(a: NcclTest, b: NcclTest) -> TestDiff:
    """The change per size from test A (the baseline) to test B."""
    sizes_a, sizes_b = _by_size(a), _by_size(b)
    result = TestDiff(_key(a), a, b)
    for size in sorted(set(sizes_a) | set(sizes_b)):
        if size in sizes_a and size in sizes_b:
            (out_a, in_a), (out_b, in_b) = sizes_a[size], sizes_b[size]
            result.sizes.append(SizeChange(size, out_a, out_b, in_a, in_b))
        else:
            (result.only_a if size in sizes_a else result.only_b).append(size)
    return result


def diff_tests(baseline: list[NcclTest], tests: list[NcclTest]) -> Diff:
    """Tests paired by operation (the Nth all_reduce of one side with the Nth of the other), baseline first."""
    diff = Diff()
    remaining = list(tests)
    for a in baseline:
        match = next((b for b in remaining if _key(b) == _key(a)), None)
        if match is None:
            diff.only_a.append(a)
            continue
        remaining.remove(match)
        diff.pairs.append(pair(a, match))
    diff.only_b = remaining
    return diff
