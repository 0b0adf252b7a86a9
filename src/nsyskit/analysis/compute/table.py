"""Table: the named-column result every analyzer returns (numpy columns, JSON- and rich-friendly)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from nsyskit.analysis.read.records import factorize, refactorize


class Table:
    """An ordered set of equally long named columns; columns are numpy arrays (numbers) or object arrays (text)."""

    def __init__(
        self, columns: Mapping[str, Sequence[Any] | np.ndarray], units: Mapping[str, str] | None = None,
        coded: Mapping[str, tuple[list, np.ndarray]] | None = None,
    ) -> None:  # fmt: skip
        self.columns: dict[str, np.ndarray] = {}
        for name, values in columns.items():
            array = (
                values
                if isinstance(values, np.ndarray)
                else np.asarray(list(values), dtype=object if _texty(values) else None)
            )
            self.columns[name] = array
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal length: { {k: len(v) for k, v in self.columns.items()} }")
        self.units = dict(units or {})
        # Text columns an analyzer built from a few values, also as (those values, each row's index among them):
        # factorized() then needs no Python step per row.
        self.coded = dict(coded or {})

    @classmethod
    def empty(cls, names: Sequence[str]) -> Table:
        """A table with the given columns and no rows."""
        return cls({name: np.empty(0) for name in names})

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    @property
    def names(self) -> list[str]:
        """The column names in order."""
        return list(self.columns)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each row as a dict of plain Python values."""
        for i in range(len(self)):
            yield {name: _plain(col[i]) for name, col in self.columns.items()}

    def take(self, index: np.ndarray | Sequence[int] | slice) -> Table:
        """The rows at `index` (an index array, a boolean mask or a slice)."""
        coded = {name: (values, codes[index]) for name, (values, codes) in self.coded.items()}
        return Table({name: col[index] for name, col in self.columns.items()}, self.units, coded)

    def factorized(self, name: str) -> tuple[list, np.ndarray]:
        """(distinct values of a column in first-seen order, each row's index among them), as records.factorize."""
        if name in self.coded:
            return refactorize(*self.coded[name])
        return factorize(self.columns[name])

    def sorted_by(self, name: str, descending: bool = True) -> Table:
        """The rows ordered by one column (stable)."""
        order = np.argsort(self.columns[name], kind="stable")
        return self.take(order[::-1] if descending else order)

    def to_json(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready dicts (NaN and infinities become null)."""
        return list(self.rows())

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self.names)})"


def rows_by_rank(ranks: np.ndarray) -> dict[int, np.ndarray]:
    """The row indices of each rank in a rank column, each in the rows' order: one sort for all ranks (a mask per rank
    is a pass over every row for each rank: 1,024 ranks x 80M NCCL operations)."""
    if not len(ranks):
        return {}
    order = np.argsort(ranks, kind="stable")
    starts = np.flatnonzero(np.r_[True, ranks[order][1:] != ranks[order][:-1]])
    return {int(ranks[order[a]]): order[a:b] for a, b in zip(starts, np.r_[starts[1:], len(order)], strict=True)}


def _texty(values: Sequence[Any]) -> bool:
    return any(isinstance(v, str) or v is None for v in values)


def _plain(value: Any) -> Any:
    """A numpy scalar as the matching Python value; NaN and infinities as None (JSON has neither)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
