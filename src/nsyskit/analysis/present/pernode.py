"""Thousands of ranks as nodes: which node each rank ran on, heat-map matrices with a column per node (or per group
of nodes) instead of one per rank, and the table naming each node's worst rank."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.leftout import rank_ranges
from nsyskit.analysis.read.records import factorize

PER_NODE_FROM = 512  # more ranks than this: the heat maps draw nodes (1,100 px hold 512 columns of 2 px at most)
MAX_CELLS = 512  # nodes a heat map draws one by one; beyond, each column holds a group of consecutive nodes
ASSUMED_PER_NODE = 8  # ranks per node when neither the reports' host names nor run.json say it (8 GPUs a node)
HOW = {"max": np.nanmax, "median": np.nanmedian, "mean": np.nanmean}


@dataclass(frozen=True)
class Nodes:
    """The run's ranks grouped by node: `node` per rank (of `ranks`, sorted), numbered in the order of their first
    rank; `names` per node; `source`: what told the grouping ('by the reports' host names'); `per_cell`: nodes a heat map's column holds."""

    ranks: np.ndarray
    node: np.ndarray
    names: list[str]
    source: str
    per_cell: int

    @property
    def cell(self) -> np.ndarray:
        """Per rank (of `ranks`): its heat-map column."""
        return self.node // self.per_cell

    @property
    def cells(self) -> int:
        """How many columns a heat map of every rank draws."""
        return int(self.cell.max()) + 1 if len(self.cell) else 0

    def label(self) -> str:
        """'node (8 ranks each)', 'group of 4 nodes (32 ranks each)': what one column of a heat map holds."""
        sizes = np.bincount(self.cell)
        low, high = int(sizes.min()), int(sizes.max())
        each = f"{low} ranks each" if low == high else f"{low}-{high} ranks each"
        return f"{self.one_cell()} ({each}, {self.source})"

    def one_cell(self) -> str:
        """'node', or 'group of 4 nodes' beyond MAX_CELLS nodes."""
        return "node" if self.per_cell == 1 else f"group of {self.per_cell} nodes"

    def cell_of_rank(self) -> np.ndarray:
        """An index array from rank number to heat-map column (-1 for a rank not in the run)."""
        lookup = np.full(int(self.ranks.max()) + 1 if len(self.ranks) else 0, -1, dtype=np.int64)
        lookup[self.ranks] = self.cell
        return lookup


def nodes_of(ranks_table: Table, ranks_per_node: int | None = None) -> Nodes:
    """The nodes of a run from its ranks table: the host names its reports hold, where they name more than one host
    for every rank (copies of one report share one); else rank // `ranks_per_node` (run.json's procs_per_node), else
    rank // ASSUMED_PER_NODE."""
    order = np.argsort(ranks_table["rank"], kind="stable")
    ranks = np.asarray(ranks_table["rank"][order], dtype=np.int64)
    hosts = [str(h) for h in ranks_table["host"][order]] if "host" in ranks_table else []
    if hosts and all(hosts) and len(set(hosts)) > 1:
        names, node = factorize(hosts)  # numbered in rank order: node 0 holds rank 0
        source = "by the reports' host names"
    else:
        per_node = ranks_per_node if ranks_per_node and ranks_per_node > 0 else ASSUMED_PER_NODE
        source = "by run.json's procs_per_node" if ranks_per_node else "assumed: no host names nor run.json"
        blocks, node = factorize((ranks // per_node).tolist())
        names = [f"ranks {b * per_node}-{b * per_node + per_node - 1}" for b in blocks]
    count = len(names)
    return Nodes(ranks, np.asarray(node, dtype=np.int64), names, source, max(1, -(-count // MAX_CELLS)))


def per_cell(matrix: np.ndarray, cells: np.ndarray, how: str) -> np.ndarray:
    """A matrix with a column per rank (`cells`: each column's heat-map cell) as one with a column per cell: each the
    `how` ('max', 'median', 'mean') of its ranks' columns, NaN left out (NaN where all are)."""
    count = int(cells.max()) + 1 if len(cells) else 0
    out = np.full((matrix.shape[0], count), np.nan)
    order = np.argsort(cells, kind="stable")
    bounds = np.searchsorted(cells[order], np.arange(count + 1))
    with np.errstate(all="ignore"):
        for cell in range(count):
            mine = matrix[:, order[bounds[cell] : bounds[cell + 1]]]
            if mine.shape[1] and np.isfinite(mine).any():
                out[:, cell] = HOW[how](np.where(np.isfinite(mine), mine, np.nan), axis=1)
    return out


def node_table(nodes: Nodes, ranks_table: Table, breakdown: Table | None) -> Table:
    """Per node: its name, ranks, its slowest rank (highest mean step) with that step time and the node's median, and
    its most idle GPU's rank with that idle share: the rows behind a heat map's node column."""
    by_rank = {int(r): i for i, r in enumerate(ranks_table["rank"])}
    step = np.array([ranks_table["step_mean_ns"][by_rank[int(r)]] for r in nodes.ranks], dtype=np.float64)
    idle = np.full(len(nodes.ranks), np.nan)
    if breakdown is not None and len(breakdown):
        position = np.searchsorted(nodes.ranks, breakdown["rank"])
        inside = np.minimum(position, len(nodes.ranks) - 1)
        known = (position < len(nodes.ranks)) & (nodes.ranks[inside] == breakdown["rank"])
        np.fmax.at(idle, position[known], np.asarray(breakdown["idle_pct"], dtype=np.float64)[known])
    rows = {"node": [], "rank_range": [], "rank_count": [], "slowest_rank": [], "step_mean_max_ns": [],
            "step_mean_median_ns": [], "most_idle_rank": [], "idle_max_pct": []}  # fmt: skip
    order = np.argsort(nodes.node, kind="stable")
    bounds = np.searchsorted(nodes.node[order], np.arange(len(nodes.names) + 1))
    for index, name in enumerate(nodes.names):
        mine = order[bounds[index] : bounds[index + 1]]
        ranks = nodes.ranks[mine]
        rows["node"].append(name)
        rows["rank_range"].append(rank_ranges(ranks.tolist()))
        rows["rank_count"].append(len(ranks))
        for values, rank_key, value_key in ((step[mine], "slowest_rank", "step_mean_max_ns"),
                                            (idle[mine], "most_idle_rank", "idle_max_pct")):  # fmt: skip
            worst = int(np.nanargmax(values)) if np.isfinite(values).any() else None
            rows[rank_key].append(int(ranks[worst]) if worst is not None else -1)
            rows[value_key].append(float(values[worst]) if worst is not None else np.nan)
        finite = step[mine][np.isfinite(step[mine])]
        rows["step_mean_median_ns"].append(float(np.median(finite)) if len(finite) else np.nan)
    text = {"node", "rank_range"}
    return Table({name: np.array(values, dtype=object if name in text else None) for name, values in rows.items()})

