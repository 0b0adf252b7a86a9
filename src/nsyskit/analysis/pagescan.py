"""Integer columns of an SQLite rowid table read from the file's B-tree pages by C (pagescan.c), past SQLite's VDBE.

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
from importlib import resources
from pathlib import Path

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_PAGE_SCAN"
MAX_COLUMNS = 64  # columns read at once (MAX_SLOTS in the C code)
ROWID_NAMES = ("rowid", "_rowid_", "oid")
KIND_CODES = {"null": 0, "integer": 1, "real": 2, "text": 3, "blob": 4}  # the uint8 of "<name>:kind"
WANT_KINDS, NULL_DEFAULT, REAL_AFFINITY = 1, 2, 4  # a column's flags (pagescan.c)
NOT_INTEGER = -2

_loaded: list = []  # [(count, read) or None] once looked for in this process


def source() -> str:
    """The C source shipped with the package."""
    return resources.files("nsyskit.analysis").joinpath("pagescan.c").read_text()


def functions():
    """The compiled (nsk_count_rows, nsk_read_rows), built and cached on first use, or None when they cannot be."""
    if not _loaded:
        found = None
        path = native.build("pagescan", source(), "sqlite-pages")
        if path is not None:
            try:
                library = ctypes.CDLL(path)  # CDLL: the GIL is released during each call
                count, read = library.nsk_count_rows, library.nsk_read_rows
            except (OSError, AttributeError):
                count = read = None
            if count is not None:
                pointer, size, int32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
                count.restype = read.restype = size
                count.argtypes = [pointer, size, size]
                read.argtypes = [pointer, size, size, size, pointer, pointer, pointer, pointer, int32, pointer,
                                 pointer, size]  # fmt: skip
                found = (count, read)
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


def _layout(con, table: str, columns: tuple[str, ...], kinds: tuple[str, ...]):
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
    wanted = {name.casefold() for name in kinds}
    layout = []
    for name in columns:
        row = by_name.get(name.casefold())
        flags = WANT_KINDS if name.casefold() in wanted else 0
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
    con, path: Path, table: str, columns: tuple[str, ...], kinds: tuple[str, ...] = ()
) -> dict[str, np.ndarray] | None:
    """The int64 values of `columns` (names of the table's columns, or "rowid") for every row in rowid order,
    read from the file's pages; None when this reader cannot be sure (then the caller reads through SQLite).

    For each column named in `kinds` also "<name>:kind", a uint8 per row (KIND_CODES: SQLite's storage class), the
    value being 0 where it is not INTEGER; a value that is not an INTEGER in any other column gives None.
    """
    if os.environ.get(DISABLE_VARIABLE) == "0" or not columns:
        return None
    names = list(dict.fromkeys(columns))
    if len(names) > MAX_COLUMNS or not {k.casefold() for k in kinds} <= {n.casefold() for n in names}:
        return None
    compiled = functions()
    if compiled is None:
        return None
    try:
        layout = _layout(con, table, tuple(names), kinds)
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
        return _read(compiled, mapped, path, root, names, slots, kinds)
    finally:
        mapped.close()


def _read(compiled, mapped: mmap.mmap, path: Path, root: int, names: list[str], slots, kinds) -> dict | None:
    """The two passes of read_columns over the mapped file: count the rows, then decode them into numpy."""
    count_rows, read_rows = compiled
    view = np.frombuffer(mapped, dtype=np.uint8)
    try:
        if _pending_log(path, bytes(view[:32])):
            return None
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
        values = np.empty((len(slots), rows), dtype=np.int64)
        kind_values = np.empty((max(len(kind_names), 1), rows), dtype=np.uint8)
        done = read_rows(
            address, size, root, len(slots), position.ctypes.data, flags.ctypes.data, kind_slot.ctypes.data,
            slot_of.ctypes.data, max_position, values.ctypes.data, kind_values.ctypes.data, rows,
        )  # fmt: skip
        if done != rows:
            return None
    finally:
        del view  # the mapping closes only once no array looks at it
    result = dict(zip(names, values, strict=True))
    for index, name in enumerate(kind_names):
        result[f"{name}:kind"] = kind_values[index]
    return result
