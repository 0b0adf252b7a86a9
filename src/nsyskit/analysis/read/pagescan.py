"""Columns of an SQLite rowid table read from the file's B-tree pages by C (pagescan.c), past SQLite's VDBE.

SQLite spends most of a big integer read in its virtual machine (a call per value); reading the table's leaf pages
directly costs a fraction of that. The C code is compiled once per machine (nsyskit.native) and checks every offset
of the file it reads: anything it does not expect (a damaged page, a WAL file with pending frames, a column with a
non-NULL default missing from old rows...) gives None, and the caller reads through SQLite. Without a compiler, or
with NSYSKIT_PAGE_SCAN=0, read_columns is always None.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_PAGE_SCAN"
MAX_COLUMNS = 64  # columns read at once (MAX_SLOTS in the C code)
ROWID_NAMES = ("rowid", "_rowid_", "oid")
KIND_CODES = {"null": 0, "integer": 1, "real": 2, "text": 3, "blob": 4}  # the uint8 of "<name>:kind"
WANT_KINDS, NULL_DEFAULT, REAL_AFFINITY, WANT_TEXT, WANT_SPAN = 1, 2, 4, 8, 16  # a column's flags (pagescan.c)
NOT_IN_PLACE = -5  # a WANT_SPAN value spills to overflow pages (pagescan.c)
NOT_INTEGER = -2
UNMAP_ASIDE_BYTES = 32 << 20  # a mapping whose texts were all read is unmapped in a thread from this size (~3 ms
# per 80 MB of pages, the GIL released): the caller goes on meanwhile
UTF8_ENCODINGS = (0, 1)  # the header's text encoding (offset 56): 1 UTF-8; 0 a file without a schema yet

_loaded: list = []  # [(count, read) or None] once looked for in this process


def source() -> str:
    """The C source shipped with the package."""
    return native.source("pagescan")


def bind(path: str):
    """(nsk_count_rows, nsk_read_rows, nsk_free) of the library compiled from pagescan.c at `path`, typed."""
    library = ctypes.CDLL(path)  # CDLL: the GIL is released during each call
    count, read, free = library.nsk_count_rows, library.nsk_read_rows, library.nsk_free
    pointer, size, int32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    count.restype = read.restype = size
    free.restype = None
    count.argtypes = [pointer, size, size]
    read.argtypes = [pointer, size, size, size, pointer, pointer, pointer, pointer, int32, pointer, pointer, size,
                     pointer, pointer, pointer, pointer]  # fmt: skip
    free.argtypes = [pointer]
    return count, read, free


def functions():
    """The compiled (nsk_count_rows, nsk_read_rows, nsk_free), built and cached on first use, or None when they
    cannot be."""
    if not _loaded:
        found = None
        path = native.build("pagescan", source(), "sqlite-pages")
        if path is not None:
            try:
                found = bind(path)
            except (OSError, AttributeError):
                found = None
        _loaded.append(found)
    return _loaded[0]


def real_affinity(declared: str) -> bool:
    """Whether a column of this declared type has REAL affinity (SQLite's rules, in their order)."""
    kind = declared.upper()
    if "INT" in kind or any(word in kind for word in ("CHAR", "CLOB", "TEXT")) or "BLOB" in kind or not kind:
        return False
    return any(word in kind for word in ("REAL", "FLOA", "DOUB"))


def as_text(value: str | bytes) -> str:
    """Schema text as str (a connection may return bytes: text_factory)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _layout(con, table: str, columns: tuple[str, ...], kinds: tuple[str, ...], texts: tuple[str, ...] = ()):
    """(root page, per requested column: record position (-1 rowid) and flags), or None when unsupported."""
    found = con.execute(
        "SELECT type, rootpage, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')",
        (table,),
    ).fetchall()
    if len(found) != 1 or as_text(found[0][0]) != "table" or not isinstance(found[0][1], int) or found[0][1] < 1:
        return None
    root, sql = found[0][1], as_text(found[0][2] or "")
    if re.search(r"WITHOUT\s+ROWID", sql, re.IGNORECASE):
        return None
    # cid, name, type, notnull, dflt_value, pk, hidden (names and types as text whatever the connection's text_factory)
    info = [
        (cid, as_text(name), as_text(kind or ""), notnull, default, pk, hidden)
        for cid, name, kind, notnull, default, pk, hidden in con.execute(
            f'PRAGMA table_xinfo("{table.replace(chr(34), chr(34) * 2)}")'
        )
    ]
    if not info or any(row[6] != 0 for row in info):
        return None
    keys = [row for row in info if row[5]]
    alias = None
    if len(keys) == 1 and keys[0][2].upper() == "INTEGER":  # only this exact type makes the rowid alias
        if re.search(r"\bDESC\b", sql, re.IGNORECASE):  # `INTEGER PRIMARY KEY DESC` is not a rowid alias
            return None
        alias = keys[0][0]
    by_name = {row[1].casefold(): row for row in info}
    wanted, as_texts = {name.casefold() for name in kinds}, {name.casefold() for name in texts}
    layout = []
    for name in columns:
        row = by_name.get(name.casefold())
        flags = (WANT_KINDS if name.casefold() in wanted else 0) | (WANT_TEXT if name.casefold() in as_texts else 0)
        if row is None:
            if name.casefold() not in ROWID_NAMES:
                return None
            layout.append((-1, flags))
        elif row[0] == alias:
            layout.append((-1, flags))
        else:
            flags |= (NULL_DEFAULT if row[4] is None else 0) | (REAL_AFFINITY if real_affinity(row[2]) else 0)
            layout.append((row[0], flags))
    return root, layout


def _pending_log(path: Path, header: bytes) -> bool:
    """Whether changes of the file may lie outside it: a non-empty WAL file (WAL mode) or a hot rollback journal."""
    sizes = []
    for suffix in ("-wal", "-journal"):
        try:
            sizes.append(os.path.getsize(f"{path}{suffix}"))
        except OSError:
            sizes.append(0)
    wal = header[18] == 2 or header[19] == 2
    return (wal and sizes[0] > 0) or sizes[1] > 0


def read_columns(
    con, path: Path, table: str, columns: tuple[str, ...], kinds: tuple[str, ...] = (), texts: tuple[str, ...] = (),
    raw: Callable | None = None,
) -> dict[str, np.ndarray] | None:  # fmt: skip
    """The int64 values of `columns` (names of the table's columns, or "rowid") for every row in rowid order,
    read from the file's pages; None when this reader cannot be sure (then the caller reads through SQLite).

    For each column named in `kinds` also "<name>:kind", a uint8 per row (KIND_CODES: SQLite's storage class). Its
    value is the INTEGER; for a REAL the IEEE-754 bits of the double SQLite returns (`values.view(np.float64)`; an
    integer stored in a REAL-affinity column gives the bits of float(integer)); 0 for NULL, TEXT and BLOB. A NaN on
    disk is NULL, as SQLite returns it. A value that is not an INTEGER in a column not named in `kinds` gives None.

    Each column named in `texts` is read as a column named in `kinds` (it need not be in `columns`) and also gives
    "<name>:text": an object ndarray holding, per row, the str Python's sqlite3 and nsyskit make of the value: TEXT
    and BLOB bytes decoded as UTF-8 with errors replaced (sqlitefile.decode_text, as_text), str(int) of an INTEGER,
    str(float) of a REAL, None for NULL. Texts are read only from a UTF-8 file (else None).

    With `raw`, no str is made: the result is raw(columns, address, size, starts, ends) (None when the pages cannot
    say), called while the `size` bytes at `address` live (read-only): value i of text column k is the bytes
    [starts[k, i], ends[k, i]) there, empty for NULL, INTEGER and REAL (the "<name>:kind" says which). They lie in the
    mapped file itself, else (a value spilling to overflow pages) in a copy of the texts made by C.
    """
    if os.environ.get(DISABLE_VARIABLE) == "0" or not (columns or texts):
        return None
    names = list(dict.fromkeys((*columns, *texts)))
    kinds = (*kinds, *texts)
    if len(names) > MAX_COLUMNS or not {k.casefold() for k in kinds} <= {n.casefold() for n in names}:
        return None
    compiled = functions()
    if compiled is None:
        return None
    try:
        layout = _layout(con, table, tuple(names), kinds, texts)
    except Exception:  # noqa: BLE001 - any SQLite error (closed connection, odd schema): SQLite's path decides
        return None
    if layout is None:
        return None
    root, slots = layout
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size < 512:
                return None
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        if raw is not None:  # the texts where they lie, else copied (an overflow page in the way)
            spans = [(p, f & ~WANT_TEXT | WANT_SPAN if f & WANT_TEXT else f) for p, f in slots]
            found = _read(compiled, mapped, path, root, names, spans, kinds, raw)
            if not (type(found) is int and found == NOT_IN_PLACE):
                return found
        found = _read(compiled, mapped, path, root, names, slots, kinds, raw)
        return None if type(found) is int else found
    finally:
        if raw is not None and len(mapped) >= UNMAP_ASIDE_BYTES:  # raw() has read every row's text: most pages
            threading.Thread(target=mapped.close, name="nsyskit-unmap", daemon=True).start()
        else:
            mapped.close()


def _read(compiled, mapped: mmap.mmap, path: Path, root: int, names: list[str], slots, kinds, raw=None) -> dict | None:
    """The two passes of read_columns over the mapped file: count the rows, then decode them into numpy."""
    count_rows, read_rows, free = compiled
    text_names = [n for n, (_, f) in zip(names, slots, strict=True) if f & (WANT_TEXT | WANT_SPAN)]
    view = np.frombuffer(mapped, dtype=np.uint8)
    try:
        header = bytes(view[:100])
        if _pending_log(path, header):
            return None
        if text_names and int.from_bytes(header[56:60], "big") not in UTF8_ENCODINGS:
            return None  # UTF-16 text: Python's sqlite3 hands it over as UTF-8, converted by SQLite
        address, size = view.ctypes.data, len(view)
        rows = count_rows(address, size, root)
        if rows < 0:
            return None
        position = np.array([p for p, _ in slots], dtype=np.int32)
        flags = np.array([f for _, f in slots], dtype=np.int32)
        kind_slot = np.full(len(slots), -1, dtype=np.int32)
        kind_names = [n for n, (_, f) in zip(names, slots, strict=True) if f & WANT_KINDS]
        for index, (_, f) in enumerate(slots):
            if f & WANT_KINDS:
                kind_slot[index] = int((flags[:index] & WANT_KINDS != 0).sum())
        max_position = int(position.max())
        slot_of = np.full(max(max_position + 1, 1), -1, dtype=np.int32)
        for index, p in enumerate(position):
            if p >= 0:
                if slot_of[p] >= 0:  # two names of one column (case differs): read it once
                    return None
                slot_of[p] = index
        # An array per column (not one block of them all): up to 4M rows each stays under malloc's mmap threshold
        # and reuses freed memory (analysis/process.py), where a block of five columns would be faulted in afresh
        values = [np.empty(rows, dtype=np.int64) for _ in slots]
        columns = (ctypes.c_void_p * len(values))(*(column.ctypes.data for column in values))
        kind_values = np.empty((max(len(kind_names), 1), rows), dtype=np.uint8)
        text_ends = np.empty((max(len(text_names), 1), rows), dtype=np.int64)
        text, text_size, text_nuls = ctypes.c_void_p(), ctypes.c_int64(), ctypes.c_int64()
        done = read_rows(
            address, size, root, len(slots), position.ctypes.data, flags.ctypes.data, kind_slot.ctypes.data,
            slot_of.ctypes.data, max_position, columns, kind_values.ctypes.data, rows,
            text_ends.ctypes.data, ctypes.byref(text), ctypes.byref(text_size), ctypes.byref(text_nuls),
        )  # fmt: skip
        if done != rows:
            return NOT_IN_PLACE if done == NOT_IN_PLACE else None  # (the C code freed its text buffer)
        result = dict(zip(names, values, strict=True))
        for index, name in enumerate(kind_names):
            result[f"{name}:kind"] = kind_values[index]
        try:
            if raw is not None:  # the bytes handed over where they lie, no str per value
                ends = text_ends[: len(text_names)]
                mapped_at = (view.ctypes.data, len(view))
                return _hand_over(raw, result, text_names, slots, mapped_at, text.value, text_size.value, ends)
            buffer = ctypes.string_at(text.value, text_size.value) if text.value else b""
        finally:
            free(text)
    finally:
        del view  # the mapping closes only once no array looks at it
    if text_names:
        pieces = _split_texts(buffer, text_ends[: len(text_names)], text_nuls.value)
        if pieces is None:
            return None
        for index, name in enumerate(text_names):
            column = pieces if len(text_names) == 1 else pieces[index :: len(text_names)]
            result[f"{name}:text"] = _texts(column, result[name], result[f"{name}:kind"])
    return result


def _hand_over(raw: Callable, result: dict, text_names: list[str], slots, mapped_at: tuple[int, int],
               text: int | None, size: int, ends: np.ndarray):  # fmt: skip
    """read_columns' raw(...): spans of the mapped file (WANT_SPAN) or of the C text buffer (WANT_TEXT)."""
    if any(f & WANT_SPAN for _, f in slots):  # a text's value is where it starts; any other value's span is empty
        kinds = np.array([result[f"{name}:kind"] for name in text_names])
        is_text = (kinds == KIND_CODES["text"]) | (kinds == KIND_CODES["blob"])
        starts = np.where(is_text, np.array([result[name] for name in text_names]), ends)
        for name, texts in zip(text_names, is_text, strict=True):  # a TEXT or BLOB value is 0, as read_columns says
            result[name] = np.where(texts, 0, result[name])
        return raw(result, *mapped_at, starts, ends)  # (no array of the mapping: it closes whatever raw raises)
    stops = ends.T.reshape(-1)  # the buffer's order: row by row, each value's bytes then a NUL
    starts = np.concatenate(([0], stops[:-1] + 1)).reshape(ends.T.shape).T if stops.size else ends
    return raw(result, text or 0, size, starts, ends)


def _split_texts(buffer: bytes, ends: np.ndarray, nuls: int) -> list[str] | None:
    """The decoded pieces of the text buffer, row by row and each row's text columns in order (see nsk_read_rows).

    One decode of the whole buffer and one split at the NULs that end the pieces when no value holds a NUL (a NUL
    byte ends any invalid UTF-8 sequence, so each piece decodes as it would alone); else one decode per piece.
    """
    count = ends.size
    if nuls == 0:
        pieces = buffer.decode("utf-8", "replace").split("\0")
        if len(pieces) != count + 1 or pieces[-1]:
            return None
        del pieces[-1]
        return pieces
    stops = ends.T.reshape(-1)  # the buffer's order: row by row
    starts = np.concatenate(([0], stops[:-1] + 1))
    if count and (stops[-1] != len(buffer) - 1 or (stops < starts).any()):
        return None
    return [buffer[a:b].decode("utf-8", "replace") for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]


def _texts(pieces: list[str], values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """One column's texts as an object ndarray: the decoded pieces; str of INTEGER and REAL values; None for NULL."""
    texts = np.fromiter(pieces, dtype=object, count=len(pieces))  # (no look into each str for a sequence)
    for code, convert in ((KIND_CODES["integer"], int), (KIND_CODES["real"], float)):
        rows = np.flatnonzero(kinds == code)
        if len(rows):
            numbers = values[rows] if convert is int else values[rows].view(np.float64)
            texts[rows] = [str(number) for number in numbers.tolist()]
    texts[kinds == KIND_CODES["null"]] = None
    return texts
