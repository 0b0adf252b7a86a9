"""A part's numeric columns packed into one byte array: one member of the part's file to open and inflate, not one
per column (a merge of 1,024 parts spent 16 of its 20 s opening 150 members per part), and the per-rank results
of analyze_file encoded into that array and a JSON index, and decoded back."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np

from nsyskit.analysis.compute.nccldigest import NcclDigest
from nsyskit.analysis.compute.ncclfold import cell_table, keys_of
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.block import NCCL_GROUPS, TABLE_KEYS, Block

# A rank's NCCL durations as steps (_steps) in 16 bits, and the steps that do not fit (where a run begins: a fall or
# a leap; a rise past 65 us) at their places in the dtype of the durations. The 16 bits are two
# byte planes: the high bytes in the columns, the low ones in their own member, NCCL_LOW. On ranks whose durations
# jitter the low bytes are nearly random: deflate shrinks them little, so write_npz stores that member as it is, and
# the merge inflates a third of the bytes it did (inflating was most of its reading of such a part).
NCCL_DURATIONS, NCCL_WIDE_AT, NCCL_WIDE = "nccl_durations", "nccl_wide_at", "nccl_wide"
NCCL_LOW = "nccl_low_bytes"
# Each duration's kind as runs (the durations are ordered by group, kind, duration: a few runs a rank, not a code each)
NCCL_KINDS, NCCL_KIND_CODES, NCCL_KIND_RUNS = "nccl_kinds", "nccl_kind_codes", "nccl_kind_runs"
KIND_COLUMNS = ("size_bytes", "nranks", "gpu")  # NcclDigest.kinds (numbers exact as float64: sizes, ranks, 0/1)
# A partial merge's NCCL durations, folded over its ranks (ncclfold.DurationFold): the cells and how many distinct
# durations each holds, then per distinct duration (by cell, then duration) its step (_steps) and its count
FOLD_CELLS, FOLD_LENGTHS = "nccl_fold_cells", "nccl_fold_lengths"
FOLD_DURATIONS, FOLD_COUNTS = "nccl_fold_steps", "nccl_fold_counts"
FOLD_SHIFTS = "nccl_fold_shifts"  # per cell its unit, 2**shift ns (DurationFold.shifts(): 0 is exact)
FOLD_TOTALS = "nccl_fold_totals"  # per cell its durations' exact sum in ns (DurationFold.totals())
COLUMNS = "columns"  # every numeric column of the part's tables, packed (partpack.Packer)
# A partial merge's joined tables (mapreduce.block.Block): per name, each rank's row count and the table's columns,
# placed as a part's are; its "results" hold per rank only what is per rank.
JOINED = "joined"


class Packer:
    """Numeric arrays laid one after another in one byte array, each at an 8-byte boundary; add() gives the place
    [dtype, shape, offset] that unpack reads it back from."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.size = 0

    def add(self, values: np.ndarray) -> list:
        values = np.ascontiguousarray(values)
        place = [values.dtype.str, list(values.shape), self.size]
        data = values.tobytes()
        pad = -len(data) % 8
        self.pieces.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return place

    def bytes(self) -> np.ndarray:
        return np.frombuffer(b"".join(self.pieces), dtype=np.uint8)


def unpack(blob: np.ndarray, place: list) -> np.ndarray:
    """The array add() placed at `place` in `blob`, copied out (a view would keep every part's whole blob alive
    through the merge: 1.3 GB instead of 0.8 at 1,024 parts)."""
    shape = place[1]
    values = np.frombuffer(blob, _dtype(place[0]), math.prod(shape), place[2])  # a scalar's shape () holds one
    return (values if len(shape) == 1 else values.reshape(shape)).copy()


@functools.cache
def _dtype(name: str) -> np.dtype:
    """numpy's dtype of a place's name, parsed once (a merge unpacks ~110 arrays a rank: 0.44 -> 0.32 ms)."""
    return np.dtype(name)


def encode_results(results: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The per-rank results of one report as two arrays: every numeric column packed into one byte array (its
    place, dtype and shape indexed in the JSON), and the JSON of the texts, summaries and that index. A merge of
    1,024 parts then opens two members per part, not one per column (150 columns: 16 of a 20 s merge went to
    opening them)."""
    packed, low = Packer(), Packer()
    plain: list[dict[str, Any]] = []
    for result in results:
        tables: dict[str, dict[str, Any]] = {}
        digest = result["nccl"]
        numbers = {
            **_pack_steps(packed, low, _steps(digest.durations)),
            **_pack_runs(packed, digest.kind_codes),
            NCCL_KINDS: packed.add(np.column_stack([digest.kinds[c].astype(np.float64) for c in KIND_COLUMNS])),
        }
        for key, table in [*((k, result[k]) for k in TABLE_KEYS), (NCCL_GROUPS, digest.groups)]:
            tables[key] = _encode_table(packed, table)
        plain.append({
            "rank": result["rank"], "source": result["source"], "nsys_version": result["nsys_version"],
            "summary": result["summary"], "warnings": result.get("warnings"), "tables": tables, "nccl": digest.sums,
            "numbers": numbers,
        })  # fmt: skip
    return {"results": np.asarray(json.dumps(plain)), COLUMNS: packed.bytes(), NCCL_LOW: low.bytes()}


def _encode_table(packed: Packer, table: Table) -> dict[str, dict[str, Any]]:
    """A table's columns as the part stores them: numbers packed, texts as codes into their distinct values, and
    values that are not hashable as JSON."""
    kinds = {}
    for column, values in table.columns.items():
        if values.dtype != object:
            kinds[column] = {"array": packed.add(values)}
            continue
        listed = values.tolist()
        vocabulary: dict[Any, int] = {}
        try:  # texts: each distinct value once, and a code per row (one pass: a partial merge's block has 150k rows)
            codes = np.asarray([vocabulary.setdefault(v, len(vocabulary)) for v in listed], dtype=np.int64)
        except TypeError:  # a list or dict among them: not hashable, kept as JSON
            kinds[column] = {"json": [_plain(v) for v in listed]}
            continue
        kinds[column] = {"codes": packed.add(codes.astype(np.int32 if len(vocabulary) > 250 else np.uint8)),
                         "values": [_plain(v) for v in vocabulary]}  # fmt: skip
    return kinds


def _decode_table(blob: np.ndarray, kinds: dict[str, dict[str, Any]]) -> Table:
    """The table _encode_table stored."""
    columns = {}
    for column, stored in kinds.items():
        if "json" in stored:
            columns[column] = np.asarray(stored["json"], dtype=object)
        elif "codes" in stored:
            values = np.empty(len(stored["values"]), dtype=object)
            values[:] = stored["values"]
            columns[column] = values[unpack(blob, stored["codes"])]
        else:
            columns[column] = unpack(blob, stored["array"])
    return Table(columns)


def encode_block(block: Block) -> dict[str, np.ndarray]:
    """A partial merge's ranks (mapreduce.block.Block) as a file's members: the per-rank results as JSON, and each
    joined table once, its columns packed and each rank's row count beside."""
    packed = Packer()
    index = {name: {"rows": packed.add(block.row_counts(name)),
                    "columns": None if table is None else _encode_table(packed, table)}
             for name, table in block.tables.items()}  # fmt: skip
    return {"results": np.asarray(json.dumps(block.results)), JOINED: np.asarray(json.dumps(index)),
            COLUMNS: packed.bytes()}  # fmt: skip


def decode_block(data: Any) -> Block:
    """The block encode_block wrote, with the folded durations encode_fold wrote beside it."""
    blob = data[COLUMNS]
    index = json.loads(str(data[JOINED]))
    tables = {name: None if stored["columns"] is None else _decode_table(blob, stored["columns"])
              for name, stored in index.items()}  # fmt: skip
    rows = {name: unpack(blob, stored["rows"]) for name, stored in index.items()}
    return Block(json.loads(str(data["results"])), tables, rows, decode_fold(data))


def _steps(durations: np.ndarray) -> np.ndarray:
    """Durations ordered in sorted runs (a digest's: by group, kind, duration; a fold's: by cell, duration) as steps,
    each its rise over the one before, in their dtype: where a run begins lower than the one before ends, a fall that
    wraps, and _unsteps' modular sum undoes it exactly. Small numbers: the part compresses 30x better, in a tenth of
    the time (the map waits for it), and most fit 16 bits (_pack_steps)."""
    return np.diff(durations, prepend=np.zeros(1, dtype=durations.dtype))


def _unsteps(steps: np.ndarray) -> np.ndarray:
    """The durations of _steps: their running sum in their dtype, exact modulo 2**bits since each duration fits it (a
    uint32 sum moves half an int64's bytes: 0.9 -> 0.3 ms a rank of 80k durations)."""
    return np.cumsum(steps, dtype=steps.dtype)


def _pack_steps(packed: Packer, low: Packer, steps: np.ndarray) -> dict[str, list]:
    """The places of a rank's duration steps packed as NCCL_DURATIONS says: 16 bits each (the high bytes in `packed`,
    the low ones in `low`), the steps that do not fit apart."""
    wide = steps > 0xFFFF if steps.dtype.kind == "u" else (steps < 0) | (steps > 0xFFFF)
    at = np.flatnonzero(wide)
    narrow = np.where(wide, 0, steps).astype(np.uint16)
    return {NCCL_DURATIONS: packed.add((narrow >> 8).astype(np.uint8)), NCCL_LOW: low.add(narrow.astype(np.uint8)),
            NCCL_WIDE_AT: packed.add(at.astype(np.uint32)), NCCL_WIDE: packed.add(steps[at])}  # fmt: skip


def _unpack_steps(blob: np.ndarray, low: np.ndarray, numbers: dict[str, list]) -> np.ndarray:
    """The steps _pack_steps packed, in the durations' dtype."""
    wide = unpack(blob, numbers[NCCL_WIDE])
    steps = unpack(blob, numbers[NCCL_DURATIONS]).astype(wide.dtype)
    steps <<= wide.dtype.type(8)
    steps |= unpack(low, numbers[NCCL_LOW])
    steps[unpack(blob, numbers[NCCL_WIDE_AT])] = wide
    return steps


def _pack_runs(packed: Packer, codes: np.ndarray) -> dict[str, list]:
    """The places of a rank's kind codes packed as runs: each run's code, and its length."""
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.empty(0, dtype=np.int64)
    lengths = np.diff(np.r_[starts, len(codes)])
    return {NCCL_KIND_CODES: packed.add(codes[starts]), NCCL_KIND_RUNS: packed.add(lengths.astype(np.uint32))}


def _unpack_runs(blob: np.ndarray, numbers: dict[str, list]) -> np.ndarray:
    """The kind codes _pack_runs packed, one per duration."""
    return np.repeat(unpack(blob, numbers[NCCL_KIND_CODES]), unpack(blob, numbers[NCCL_KIND_RUNS]))


def encode_fold(
    cells: Table, cell: np.ndarray, durations: np.ndarray, counts: np.ndarray, shifts: np.ndarray, totals: np.ndarray
) -> dict[str, np.ndarray]:
    """A partial merge's folded NCCL durations (ncclfold.DurationFold.cells(), ordered by cell, its shifts() and
    totals()) as members of its file: the cells' keys as JSON, their units and how many distinct durations each
    holds, and per distinct duration the duration as a step from the one before, and its count."""
    lengths = np.bincount(cell, minlength=len(cells)) if len(cell) else np.zeros(len(cells), dtype=np.int64)
    return {FOLD_CELLS: np.asarray(json.dumps(keys_of(cells))), FOLD_LENGTHS: lengths,
            FOLD_DURATIONS: _steps(durations), FOLD_COUNTS: counts,
            FOLD_SHIFTS: np.asarray(shifts, dtype=np.int8), FOLD_TOTALS: np.asarray(totals, dtype=np.int64)}  # fmt: skip


def decode_fold(data: Any) -> tuple[Table, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The folded durations, the cells' shifts and totals encode_fold wrote (None in a file without them: a part)."""
    if FOLD_CELLS not in data:
        return None
    cells = cell_table([tuple(key) for key in json.loads(str(data[FOLD_CELLS]))])
    cell = np.repeat(np.arange(len(cells), dtype=np.int64), data[FOLD_LENGTHS])
    return (cells, cell, _unsteps(data[FOLD_DURATIONS]), data[FOLD_COUNTS], data[FOLD_SHIFTS].astype(np.int64),
            data[FOLD_TOTALS])  # fmt: skip


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def decode_results(data: Any, plain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blob, low = data[COLUMNS], data[NCCL_LOW]
    results = []
    for item in plain:
        result = {k: item[k] for k in ("rank", "source", "nsys_version", "summary")}
        for key, kinds in item["tables"].items():
            result[key] = _decode_table(blob, kinds)
        groups = result.pop(NCCL_GROUPS)
        numbers = item["numbers"]
        kinds = unpack(blob, numbers[NCCL_KINDS]).reshape(-1, len(KIND_COLUMNS))
        kinds = Table(
            {c: kinds[:, i].astype(np.float64 if c == "size_bytes" else np.int64) for i, c in enumerate(KIND_COLUMNS)}
        )
        result["nccl"] = NcclDigest(groups, _unsteps(_unpack_steps(blob, low, numbers)), item["nccl"],
                                    kinds, _unpack_runs(blob, numbers))  # fmt: skip
        if item["warnings"] is not None:
            result["warnings"] = item["warnings"]
        results.append(result)
    return results
