"""A part's file: its members written (deflated, or stored where deflate does not pay), written atomically, and read
back (each file opened once, its header checked against this nsyskit's part format, a file cut short named)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit import __version__
from nsyskit.analysis.mapreduce.block import Block
from nsyskit.analysis.mapreduce.partpack import decode_block, decode_results
from nsyskit.errors import AnalysisError

# 2: a rank's NCCL operations as their digest (nsyskit.analysis.compute.nccldigest), not a table; 3: the digest's
# sorted durations as steps (_steps); 4: each rank's evidence for the findings (compute.evidence); 5: each NCCL
# duration's kind (message and communicator size: the bandwidths); 6: each rank's sampled counters: their stats,
# time-bin sums and per-step totals (compute.counters); 7: the numeric columns packed in one array (partpack.Packer);
# 8: the run's report list in its own member, named in the header by its hash (LISTING); 9: a partial merge, the
# parts of a block in one file (PARTIAL); 10: a partial merge's NCCL durations folded over its ranks
# (partpack.encode_fold); 11: a rank's NCCL durations by group, kind, duration (each cell one sorted run: ncclfold),
# a partial merge's ranks as a block (block.Block: tables joined, per rank only what is), each part's file in it;
# 12: a partial merge's folded NCCL durations with each cell's unit (ncclfold.DISTINCT_PER_CELL: partpack.FOLD_SHIFTS);
# 13: a rank's NCCL duration steps in 16 bits where they fit, the low bytes in a member stored where deflate does
# not pay, its kind codes as runs (partpack.NCCL_DURATIONS); a partial merge's fold: its cells' lengths, not a cell
# per duration; steps over every run, not restarted per group
PART_FORMAT = 13
SUFFIX = ".part.npz"
HEADER = "header"
# The run's reports, their ranks and whether each rank is named, as the map saw them: the same in every part of a map,
# so the header names them by a hash and the merge reads them once per map (in every header, they made the merge's
# reading of headers grow as ranks x ranks: 4,096 parts held 1.6 GB of copies of one list)
LISTING = "listing"
LISTED = ("reports", "ranks", "named")
# A partial merge's header (mapreduce/partial.py): the headers of the parts it holds, each with the place of its
# results among the file's ("first", "count"), or why they could not be read ("damaged"). Its LISTING member holds
# every listing its parts named, by hash.
PARTIAL = "partial"


def part_name(report: Path) -> str:
    """The part file of a report: its name with the part suffix (one part per report)."""
    return report.name + SUFFIX


def write_atomic(arrays: dict[str, np.ndarray], target: Path) -> Path:
    """Write a part file (its members `arrays`) as `target` atomically: a reader never sees half of it; its path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = target.parent
    # Not named *.part.npz until whole: a merge or a progress count never takes half a part (or a killed map's).
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            write_npz(out, arrays)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def listing_member(listing: dict[str, list]) -> tuple[str, np.ndarray]:
    """(its hash, the member) of a map's listing of the run (LISTED's lists)."""
    text = json.dumps(listing)
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest(), np.asarray(text)


def read_listing(path: Path, data: Any = None) -> dict[str, list]:
    """The run's listing (LISTED's lists) the map of this part saw (from its members `data` when open)."""
    with members(path, data) as data:
        return json.loads(str(data[LISTING]))


def read_listings(path: Path, header: dict[str, Any], data: Any = None) -> dict[str, dict[str, list]]:
    """{hash: listing} of every map whose parts the file holds: a part's one, a partial merge's all."""
    listed = read_listing(path, data)
    return listed if PARTIAL in header else {header[LISTING]: listed}


def read_headers(
    paths: list[Path], strict: bool, unreadable: dict[str, str]
) -> Iterator[tuple[Path, dict[str, Any], Any]]:
    """(path, header, members) of each file that reads (a part or a partial merge), in order, its members (np.load's
    NpzFile) open until the next file is taken: its results and timelines are read without opening it again. One that
    does not read is named in `unreadable` with why (as are the parts a partial merge names), unless `strict`: then
    its error stops."""
    for path in paths:
        try:
            with _opened(path) as data:
                header = _checked(path, json.loads(str(data[HEADER])))
                unreadable.update(header.get("unreadable", {}))
                yield path, header, data
        except AnalysisError as exc:
            if strict:
                raise
            unreadable[path.name] = exc.one_line()


def part_headers(header: dict[str, Any]) -> list[dict[str, Any]]:
    """The headers of the parts a file holds: a part's own, or those a partial merge kept."""
    return header.get(PARTIAL, [header])


def results_of(
    path: Path, header: dict[str, Any], held: dict[Path, Block], data: Any = None
) -> list[dict[str, Any]] | Block:
    """The results of the part `header` names in `path` (its members `data` when read_headers has them open): a
    part's own (its ranks' results), or its ranks of a partial merge's block (read once for all its parts into
    `held`; the block's folded NCCL durations go with the first ranks taken); a damaged part's is one AnalysisError."""
    if header.get("damaged"):
        message, _sep, fix = header["damaged"].partition("; fix: ")
        raise AnalysisError(path, f"holds a part that could not be read ({message})", fix)
    if "first" not in header:
        return read_results(path, data)
    if path not in held:
        held[path] = read_block(path, data)
    block = held[path]
    taken = block.take(header["first"], header["count"])
    taken.fold, block.fold = block.fold, None
    return taken


def write_npz(out, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed's file (np.load reads it), at zlib level 1: a part crosses the shared file system (KB-MB,
    not the rows' bytes), and level 1 makes it within 1% of level 6's size in half the time (the map waits for it).
    A numeric member whose first MB deflate shrinks by less than a quarter (partpack.NCCL_LOW of jittered ranks) is
    stored as it is: inflating it would cost a merge more time than reading the bytes it saves."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, values in arrays.items():
            values = np.asanyarray(values)
            if _random_like(values):
                member = io.BytesIO()
                np.lib.format.write_array(member, values, allow_pickle=False)
                archive.writestr(f"{name}.npy", member.getbuffer(), compress_type=zipfile.ZIP_STORED)
                continue
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, values, allow_pickle=False)


def _random_like(values: np.ndarray) -> bool:
    """Whether deflate shrinks the numeric array's first MB by less than a quarter (texts always deflate)."""
    if values.dtype.kind not in "biuf" or values.nbytes < 4096:
        return False
    sample = np.ascontiguousarray(values.reshape(-1)[: (1 << 20) // values.itemsize]).view(np.uint8)
    return len(zlib.compress(sample, 1)) > len(sample) * 3 // 4


def read_part(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, per-rank results) of a part (of a partial merge: its ranks' own results, their tables joined in its
    block: read_block); a truncated part, or one of another format or version, is one error."""
    header = read_header(path)
    return header, read_block(path).results if PARTIAL in header else read_results(path)


def read_header(path: Path) -> dict[str, Any]:
    """A part's header alone (its results stay on disk: the merge reads those one part at a time); a truncated
    part, or one of another format or version, is one error."""
    with _opened(path) as data:
        return _checked(path, json.loads(str(data[HEADER])))


def _checked(path: Path, header: dict[str, Any]) -> dict[str, Any]:
    """The header of the part `path`, when its format and version are this nsyskit's; else one error."""
    if header.get("format") != PART_FORMAT or header.get("nsyskit") != __version__:
        raise AnalysisError(
            path, f"is a part of nsyskit {header.get('nsyskit')} (part format {header.get('format')}), "
            f"not of this nsyskit {__version__} (format {PART_FORMAT})",
            "map the report again with this version ('invoke analyze-part'), or merge with the version that wrote it",
        )  # fmt: skip
    return header


def read_results(path: Path, data: Any = None) -> list[dict[str, Any]]:
    """The per-rank results of a part whose header read_header took (from its members `data` when open)."""
    with members(path, data) as data:
        return decode_results(data, json.loads(str(data["results"])))


def read_block(path: Path, data: Any = None) -> Block:
    """The ranks of a partial merge whose header read_header took, as the block it stores (joined tables)."""
    with members(path, data) as data:
        return decode_block(data)


@contextmanager
def members(path: Path, data: Any = None):
    """The part's members: `data` when read_headers has them open (their errors named as _opened names them), else
    the file opened."""
    if data is None:
        with _opened(path) as data:
            yield data
        return
    with _named(path):
        yield data


@contextmanager
def _opened(path: Path):
    """The part's members (np.load's NpzFile); a part cut short or damaged is one AnalysisError naming it."""
    with _named(path), np.load(path, allow_pickle=False) as data:
        yield data


@contextmanager
def _named(path: Path):
    """A part's reading, whose failure (cut short, damaged) is one AnalysisError naming it."""
    try:
        yield
    except AnalysisError:
        raise
    # zlib.error: a member whose deflated bytes were damaged (not cut short) on the way or on the shared file system
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise AnalysisError(
            path, f"is not a whole part file ({type(exc).__name__}: {exc})",
            "map its report again ('invoke analyze-part REPORT --out PARTS_DIR'): it was cut short or damaged",
        ) from None  # fmt: skip
