"""The partial merge: a block of parts in one file of the part format, so that the merge of partial merges is the
merge of all their parts (a merge as a tree: blocks merged side by side on a cluster, then the final merge)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit import __version__
from nsyskit.analysis.compute.ncclfold import DurationFold
from nsyskit.analysis.mapreduce import partfile
from nsyskit.analysis.mapreduce.block import Block
from nsyskit.analysis.mapreduce.partfile import SUFFIX, part_headers, read_headers, read_listings, results_of
from nsyskit.analysis.mapreduce.partpack import encode_block, encode_fold
from nsyskit.analysis.mapreduce.reduce import JOINED_RANKS
from nsyskit.analysis.mapreduce.timelines import TIMELINE, read_timelines
from nsyskit.analysis.process import keep_freed_memory
from nsyskit.errors import AnalysisError, UsageError

PLACES = ("first", "count", "damaged", TIMELINE)  # where a part's results lie in a partial merge: redone by each merge


def block_name(index: int | None) -> str:
    """The partial merge's file name: block-00003.part.npz for block 3 (one file, block.part.npz, without blocks)."""
    return ("block" if index is None else f"block-{index:05d}") + SUFFIX


def _by_number(path: Path) -> list:
    """A part's place among the block's: its name with every run of digits compared as a number (rank_2 before
    rank_10), so a block holds consecutive ranks and the final merge, which takes the ranks in order, reads one
    partial merge at a time (by plain name order, rank_1, rank_10, rank_100 ... would spread every block over
    all ranks and hold every partial at once)."""
    return [int(piece) if piece.isdigit() else piece for piece in re.split(r"(\d+)", path.name)]


def _folded(fold: DurationFold, results: list[dict[str, Any]] | Block) -> list[dict[str, Any]] | Block:
    """A part's ranks with their NCCL durations folded into the block's `fold` and dropped (a partial merge's ranks
    come as a block, their durations folded already: its fold is folded in)."""
    if isinstance(results, Block):
        if results.fold is not None:
            fold.add_cells(*results.fold)
        return results
    for result in results:
        fold.add_digest(result["nccl"])
        result["nccl"] = result["nccl"].without_durations()
    return results


class _Pieces:
    """The block's ranks as their parts come, in order: a partial merge's as its block, parts' ranks joined
    JOINED_RANKS at a time (a block a part copied 11 tables a rank: 1 of a part's 4 ms)."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.loose: list[dict[str, Any]] = []

    def add(self, mine: list[dict[str, Any]] | Block) -> int:
        """Take a part's ranks; how many."""
        if isinstance(mine, Block):
            self._join()
            self.blocks.append(mine)
            return len(mine.results)
        self.loose += mine
        if len(self.loose) >= JOINED_RANKS:
            self._join()
        return len(mine)

    def _join(self) -> None:
        if self.loose:
            self.blocks.append(Block.of_results(self.loose))
            self.loose = []

    def joined(self) -> Block:
        self._join()
        return Block.joined(self.blocks)


def merge_block(
    folder: Path, out: Path, index: int | None = None, size: int | None = None, strict: bool = False
) -> Path:  # fmt: skip
    """Merge block `index` of `size` of the part files in `folder` (their names in order, numbers by value, cut into
    `size` runs of consecutive files, sizes differing by one at most) into one partial merge in `out`; its path.

    The partial keeps each part's header, and its ranks' results as one block (mapreduce.block: the tables joined
    over the block, each rank's row count beside; the final merge numbers the ranks over every part, as a merge of
    the parts themselves does), the ranks' NCCL durations folded over the block (compute.ncclfold: what the run's
    tables read, exactly), the reports' listings, the timelines when
    every part has one, and why a part could not be read: a failed map's error stays in its header, and an
    unreadable or damaged part is named, so the final merge leaves the same ranks out with the same lines.
    `strict` stops at the first.
    """
    if (index is None) != (size is None) or (size is not None and not 0 <= index < size):
        raise UsageError(f"--array-index {index} of --array-size {size}", fix="give both, with 0 <= index < size")
    paths = sorted(folder.glob("*" + SUFFIX), key=_by_number) if folder.is_dir() else []
    if not paths:
        raise AnalysisError(folder, "holds no part files (*.part.npz)", "map the reports first: 'invoke analyze-part'")
    keep_freed_memory()
    block = paths if size is None else paths[len(paths) * index // size : len(paths) * (index + 1) // size]
    kept: list[dict[str, Any]] = []
    listings: dict[str, dict[str, list]] = {}
    unreadable: dict[str, str] = {}
    pieces = _Pieces()
    taken = 0  # the block's ranks so far: where the next part's lie among them
    fold = DurationFold()  # the block's NCCL durations, folded as its ranks come: the partial holds no rank's own
    timelines: list | None = []
    where = str(folder)
    for path, header, data in read_headers(block, strict, unreadable):  # each file opened once
        if partfile.PARTIAL in header or header[partfile.LISTING] not in listings:  # a map's listing once, not per part
            listings.update(read_listings(path, header, data))
        where = header.get("parts_folder", where)  # a partial of partials names the parts' folder
        held: dict[Path, Block] = {}
        ranks = read_timelines(path, data) if timelines is not None else None
        for part in part_headers(header):
            own = {"file": str(path), **{key: value for key, value in part.items() if key not in PLACES}}
            try:
                mine = None if part.get("error") else _folded(fold, results_of(path, part, held, data))
            except AnalysisError as exc:
                if strict:
                    raise
                own["damaged"] = part.get("damaged") or exc.one_line()
                mine = None
            if "damaged" not in own:
                own["first"], own["count"] = taken, pieces.add(mine) if mine is not None else 0
                taken += own["count"]
            if part.get("error"):
                pass  # a failed map's part: no ranks, no timeline (left out of the final merge's, as of a merge's)
            elif ranks is None:
                timelines = None
            elif timelines is not None:
                span = part.get(TIMELINE) or [0, len(ranks)]
                own[TIMELINE] = [len(timelines), len(timelines) + span[1] - span[0]]
                timelines += ranks[span[0] : span[1]]
            kept.append(own)
    # A block with no readable part (all cut, or none: more blocks than parts) still writes its partial: the final
    # merge then names its unreadable files and merges every other block, as a merge of the parts does (a failed
    # array element would stop the final merge of thousands of ranks for a few files).
    if timelines is None:
        for own in kept:
            own.pop(TIMELINE, None)
    arrays = encode_block(pieces.joined()) | encode_fold(*fold.cells(), fold.shifts(), fold.totals())
    arrays[partfile.LISTING] = np.asarray(json.dumps(listings))
    if timelines is not None:
        arrays[TIMELINE] = np.asarray(json.dumps([[t.rank, t.events, t.total, t.note] for t in timelines]))
    header = {"format": partfile.PART_FORMAT, "nsyskit": __version__, partfile.PARTIAL: kept, "unreadable": unreadable,
              "parts_folder": where}  # fmt: skip
    arrays[partfile.HEADER] = np.asarray(json.dumps(header))
    return partfile.write_atomic(arrays, out / block_name(index))
