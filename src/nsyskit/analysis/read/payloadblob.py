"""NVTX extended payloads exported as blobs (NVTX_EVENTS.binaryData) decoded through the export's schema tables.

NCCL (2.16+) states each call's message size, communicator and, on its init calls, the communicator's size as a
schema-based payload. `nsys export --include-blobs=true` writes each value as raw bytes in binaryData (a TEXT column):
a 32-byte header (four 8-byte fields: domain, schema id, payload size, and one whose meaning public decoders disagree
on, never read here) then the C struct the schema describes. The schema's rows (NVTX_PAYLOAD_SCHEMAS and _ENTRIES)
repeat once per profiled process and carry no process id; the first entry's offset is NULL (0). A blob whose schema
is unknown or whose length disagrees with it is skipped and counted: never a wrong number.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass

import numpy as np

HEADER_BYTES = 32
BLOB_COLUMN = "binaryData"  # NVTX_EVENTS' column of the payloads' bytes (declared TEXT)
SCHEMA_TABLE, ENTRY_TABLE, ENUM_TABLE = "NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES", "NVTX_PAYLOAD_ENUMS"
LINK_TABLE = "NVTX_EVENTS_PAYLOAD_SCHEMAS"  # nsys 2026.4 --dynamic-tables: the payloads as tables (payloadtables.py)
# NVTX's payload entry types (nvToolsExtPayload.h) as numpy types on the LP64 hosts nsys records (little-endian).
ENTRY_TYPES = {
    1: "i1", 2: "u1", 3: "<i2", 4: "<u2", 5: "<i4", 6: "<u4", 7: "<i8", 8: "<u8", 9: "<i8", 10: "<u8",
    11: "i1", 12: "u1", 13: "<i2", 14: "<u2", 15: "<i4", 16: "<u4", 17: "<i8", 18: "<u8",
    19: "<f4", 20: "<f8", 22: "<u8", 23: "<u8",
}  # fmt: skip
FIRST_SCHEMA_ID = 1 << 24  # ids from here on are registered schemas and enums: an entry of such a type is an enum
ENUM_BYTES = 4  # a C enum (ncclRedOp_t) where the export does not state the enum's size
# The entries the NCCL tables read, by name (NCCL's nvtx_payload_schemas.h; other tools' spellings too). The jsonText
# route (compute/nccl.py) matches the same names, so both forms of one payload give the same numbers.
SIZE_KEY = re.compile(r"size|bytes", re.IGNORECASE)  # "Message size [bytes]" (2.25+), "Bytes" (2.16-2.24 bcast/p2p)
NRANKS_KEY = re.compile(r"^(?:no\.?\s*of\s*ranks|n_?ranks|num_?ranks|world_?size|group_?size|comm_?size)$", re.IGNORECASE)
COMM_KEY = re.compile(r"^(?:nccl\s*)?communicator(?:\s*id)?$|^comm(?:_?hash|_?id)?$", re.IGNORECASE)
NCCL_API = re.compile(r"^nccl[A-Z]")  # ncclAllReduce, ncclCommInitRank... (PyTorch's are 'nccl:all_reduce')
NO_COMM = 0  # the payload names no communicator (NCCL 2.16-2.24) or there is no payload


@dataclass(frozen=True)
class Entry:
    """One field of a schema: its name, where it lies in the payload and its numpy type (None: not a number)."""

    name: str
    offset: int
    dtype: str | None


@dataclass(frozen=True)
class Schema:
    """A payload layout: its size in bytes and its fields."""

    size: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class BlobValues:
    """What the blobs state, one value per blob: message size (NaN none), communicator (NO_COMM none), its size
    (0 none); and how many blobs were skipped (schema unknown, length not the schema's)."""

    size: np.ndarray
    comm: np.ndarray
    nranks: np.ndarray
    skipped: int


def read_schemas(reader) -> dict[int, Schema]:
    """The export's payload schemas by schema id; ids whose repeated rows disagree (two domains' own schemas under
    one id) are left out, so their blobs count as unknown rather than decode with the wrong layout."""
    if SCHEMA_TABLE not in reader.tables or ENTRY_TABLE not in reader.tables:
        return {}
    sizes: dict[int, set[int]] = {}
    for schema, size in reader.query(f"SELECT DISTINCT schemaId, payloadSize FROM {SCHEMA_TABLE}"):
        if isinstance(schema, int) and isinstance(size, int):
            sizes.setdefault(schema, set()).add(size)
    enum_bytes = _enum_sizes(reader)
    rows: dict[int, set[tuple]] = {}
    for schema, idx, kind, name, offset in reader.query(
        f"SELECT DISTINCT schemaId, idx, type, name, offset FROM {ENTRY_TABLE}"
    ):
        rows.setdefault(schema, set()).add((idx, kind, name, offset))
    schemas = {}
    for schema, entries in rows.items():
        ordered = sorted(entries, key=lambda row: row[0])
        if len(sizes.get(schema, ())) != 1 or len({row[0] for row in ordered}) != len(ordered):
            continue  # no size, or one index stated twice differently: not one layout
        schemas[schema] = Schema(next(iter(sizes[schema])), _entries(ordered, enum_bytes))
    return schemas


def _enum_sizes(reader) -> dict[int, int]:
    """Each enum type's size in bytes, where the export states it (NVTX_PAYLOAD_ENUMS.size)."""
    if ENUM_TABLE not in reader.tables or "size" not in reader.columns(ENUM_TABLE):
        return {}
    return {s: n for s, n in reader.query(f"SELECT DISTINCT schemaId, size FROM {ENUM_TABLE}") if isinstance(n, int)}


def _entries(rows: list[tuple], enum_bytes: dict[int, int]) -> tuple[Entry, ...]:
    """The fields of (idx, type, name, offset) rows in index order; a NULL offset is the next naturally aligned one
    (the first entry's is always NULL: 0)."""
    entries, end = [], 0
    for _idx, kind, name, offset in rows:
        dtype = ENTRY_TYPES.get(kind) if isinstance(kind, int) else None
        width = np.dtype(dtype).itemsize if dtype else enum_bytes.get(kind, ENUM_BYTES) if _is_enum(kind) else 0
        if not isinstance(offset, int):
            offset = -(-end // width) * width if width else end
        entries.append(Entry(str(name or ""), offset, dtype))
        end = offset + width
    return tuple(entries)


def _is_enum(kind: object) -> bool:
    """Whether an entry type is a registered enum (its id moves between NCCL releases: only its range is known)."""
    return isinstance(kind, int) and kind >= FIRST_SCHEMA_ID


def decode(blobs: list[bytes], schemas: dict[int, Schema]) -> BlobValues:
    """The message size, communicator and communicator size each blob (bytes) states (see BlobValues)."""
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))

    def rows_of(at: np.ndarray, length: int) -> np.ndarray:
        return np.frombuffer(b"".join([blobs[i] for i in at.tolist()]), dtype=np.uint8).reshape(len(at), length)

    return _decode(lengths, rows_of, schemas)


def decode_spans(buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray, schemas: dict[int, Schema]) -> BlobValues:
    """decode() of the blobs at [starts[i], ends[i]) of `buffer` (uint8: pagescan's mapped pages), read where they
    lie: no bytes object per blob."""
    lengths = ends - starts
    windows: dict[int, np.ndarray] = {}

    def rows_of(at: np.ndarray, length: int) -> np.ndarray:
        # every `length` bytes of the buffer as a row (a view, no copy): a blob is the row at its start, copied whole
        if length not in windows:
            windows[length] = np.lib.stride_tricks.sliding_window_view(buffer, length)
        return windows[length][starts[at]]

    return _decode(lengths, rows_of, schemas)


CHUNK_ROWS = 1 << 18  # blobs gathered into one array at a time (56-byte blobs: 15 MB per chunk)


def _decode(lengths: np.ndarray, rows_of, schemas: dict[int, Schema]) -> BlobValues:
    """Blobs of one length share a layout: each such group, a chunk at a time, is one array of rows (rows_of(at,
    length)) whose fields are read column-wise."""
    count = len(lengths)
    size, comm, nranks = np.full(count, np.nan), np.full(count, NO_COMM, np.int64), np.zeros(count, np.int64)
    decoded = np.zeros(count, dtype=bool)
    for length in np.unique(lengths).tolist():
        fitting = {sid: schema for sid, schema in schemas.items() if schema.size + HEADER_BYTES == length}
        if not fitting:
            continue  # no schema of this length: every such blob is skipped
        same = np.flatnonzero(lengths == length)
        for first in range(0, len(same), CHUNK_ROWS):
            at = same[first : first + CHUNK_ROWS]
            rows = rows_of(at, length)
            header = np.ascontiguousarray(rows[:, :HEADER_BYTES]).view("<u8")
            ids, stated = header[:, 1], header[:, 2]
            columns: dict[tuple[int, str], np.ndarray] = {}
            for schema_id, schema in fitting.items():  # a blob of an unknown schema id matches none: skipped
                mine = (ids == schema_id) & (stated == schema.size)  # the header agrees with the schema's size
                if not mine.any():
                    continue
                every = mine.all()
                where = at if every else at[mine]
                decoded[where] = True
                # a field at one offset and type is read once for the chunk's rows, whichever schemas share it
                fields = {kind: _first(schema, rows, pattern, columns) for kind, pattern in
                          (("size", SIZE_KEY), ("comm", COMM_KEY), ("nranks", NRANKS_KEY))}  # fmt: skip
                fields = {kind: v if v is None or every else v[mine] for kind, v in fields.items()}
                if fields["size"] is not None:
                    size[where] = fields["size"].astype(np.float64)
                if fields["comm"] is not None:
                    comm[where] = fields["comm"].astype(np.uint64).view(np.int64)  # an id: its 64 bits, not its value
                if fields["nranks"] is not None:
                    nranks[where] = np.where(fields["nranks"] > 0, fields["nranks"], 0).astype(np.int64)
    return BlobValues(size, comm, nranks, int(count - decoded.sum()))


def paged_blobs(reader, table: str, rowids: np.ndarray) -> tuple[np.ndarray, BlobValues] | None:
    """(the positions in `rowids` (ascending) whose rows hold a blob, what those blobs state), read from the file's
    pages where they lie (pagescan's spans); None where the pages cannot say (SQLite then fetches the blobs)."""
    from nsyskit.analysis.read import pagescan

    schemas = read_schemas(reader)

    def spans(found: dict, address: int, size: int, starts: np.ndarray, ends: np.ndarray):
        kind = found[f"{BLOB_COLUMN}:kind"]
        held = (kind == pagescan.KIND_CODES["text"]) | (kind == pagescan.KIND_CODES["blob"])
        rows = found["rowid"][held]
        at = np.searchsorted(rowids, rows)
        mine = (at < len(rowids)) & (rowids[np.minimum(at, len(rowids) - 1)] == rows)  # the ranges' rows only
        buffer = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))  # read-only while raw runs
        return at[mine], decode_spans(buffer, starts[0][held][mine], ends[0][held][mine], schemas)

    if not len(rowids):
        return None
    return pagescan.read_columns(reader.con, reader.path, table, ("rowid",), (), (BLOB_COLUMN,), raw=spans)


def _first(schema: Schema, rows: np.ndarray, pattern: re.Pattern, columns: dict) -> np.ndarray | None:
    """The values of the schema's first numeric entry whose name `pattern` finds (search for sizes, match for the
    others, as the jsonText route), from each row's payload; None when the schema has no such entry. `columns`:
    the fields read from these rows so far, by (offset, type)."""
    for entry in schema.entries:
        named = pattern.search(entry.name) if pattern is SIZE_KEY else pattern.match(entry.name.strip())
        if not named or entry.dtype is None:
            continue
        width = np.dtype(entry.dtype).itemsize
        start = HEADER_BYTES + entry.offset
        if start + width > rows.shape[1]:
            return None
        if (start, entry.dtype) not in columns:
            columns[(start, entry.dtype)] = np.ascontiguousarray(rows[:, start : start + width]).view(entry.dtype)[:, 0]
        return columns[(start, entry.dtype)]
    return None


def fix_command(path) -> str:
    """The export command that writes the payload values, for the report beside this export."""
    return f"nsys export --type sqlite --include-blobs=true --force-overwrite=true {path.with_suffix('.nsys-rep').name}"


def held_no_values(reader, ranges) -> bool:
    """Whether an export has NCCL ranges and payload schemas but no payload value on any NCCL range: exported without
    --include-blobs (or json), so every size is unknown. The schema tables and an all-NULL binaryData column are
    there even then: only values prove payloads."""
    if SCHEMA_TABLE not in reader.tables or not len(ranges):
        return False
    if ranges.comm is not None and ((ranges.comm != NO_COMM) | (ranges.nranks > 0)).any():
        return False  # blobs were exported and decoded
    # NCCL's API ranges: in its domain, or named ncclX where a derived file cut off the domain's create event
    # (ncclGroupStart/End carry no payload in any export: they prove nothing)
    texts, codes = ranges.texts
    named = np.asarray([NCCL_API.match(t) is not None for t in texts], dtype=bool)[codes]
    grouping = np.asarray([t.startswith("ncclGroup") for t in texts], dtype=bool)[codes]
    nccl = (named | (ranges.domain == "NCCL")) & ~grouping
    if not nccl.any():
        return False
    if not reader.query(f"SELECT 1 FROM {SCHEMA_TABLE} LIMIT 1"):
        return False
    stated = ~np.isnan(ranges.payload[nccl]) | np.not_equal(ranges.json[nccl], None)
    if ranges.comm is not None:
        stated |= (ranges.comm[nccl] != NO_COMM) | (ranges.nranks[nccl] > 0)
    return not stated.any()


def exported_without_values(reader) -> bool:
    """Whether an export has payload schemas but no payload value in any NVTX event (binaryData, jsonText): made
    without --include-blobs. Two probes, each stopping at the first row it finds (a whole scan only when none)."""
    if SCHEMA_TABLE not in reader.tables or "NVTX_EVENTS" not in reader.tables:
        return False
    if not reader.query(f"SELECT 1 FROM {SCHEMA_TABLE} LIMIT 1"):
        return False
    if LINK_TABLE in reader.tables and reader.query(f"SELECT 1 FROM {LINK_TABLE} LIMIT 1"):
        return False  # the values are in the payload tables
    columns = [c for c in (BLOB_COLUMN, "jsonText") if c in reader.columns("NVTX_EVENTS")]
    held = " OR ".join(f"{c} IS NOT NULL" for c in columns)
    return not columns or not reader.query(f"SELECT 1 FROM NVTX_EVENTS WHERE {held} LIMIT 1")
