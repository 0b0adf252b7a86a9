"""An SQLite aggregate, int64s(x, ...), that returns columns of integers as one BLOB of int64s: no text conversion.

`group_concat` spends most of a big read converting each integer to text (and numpy parsing it back); int64s copies
the 8 bytes. It is a tiny loadable extension compiled once per machine with the C compiler (`cc`) and SQLite's
extension header (`sqlite3ext.h`, package libsqlite3-dev), cached in ~/.cache/nsyskit. Without either, or with
NSYSKIT_SQLITE_EXTENSION=0, readers use group_concat: same results, slower.

int64s(x1, ..., xk) holds the k columns one after the other (all x1, then all x2...): one call per row reads them
all, and each column is a contiguous slice of the BLOB. It is NULL as soon as one value is not an INTEGER (NULL,
REAL, text, BLOB), so that the caller reads again with a filter, exactly as when group_concat's text does not parse;
an aggregate over no rows is an empty BLOB. int64s_into(address, capacity, x1, ..., xk) writes the same columns
into a buffer the caller owns (a numpy array) and returns the row count: no copy of the values at all.
"""

from __future__ import annotations

import os

from nsyskit import native

ENTRY_POINT = "sqlite3_nsyskit_int64s_init"
DISABLE_VARIABLE = "NSYSKIT_SQLITE_EXTENSION"


_library: list[str | None] = []  # the compiled library's path once looked for in this process (None: unavailable)


def library() -> str | None:
    """The compiled extension (built on first use and cached per machine), or None when it cannot be built here."""
    if not _library:
        _library.append(None if os.environ.get(DISABLE_VARIABLE) == "0" else _build())
    return _library[0]


def _build() -> str | None:
    """Compile the extension into the cache (None: no compiler or no sqlite3ext.h, i.e. libsqlite3-dev)."""
    return native.build("int64s", native.source("int64s"), "sqlite-ext")


def load(con) -> bool:
    """Make int64s() available on the connection; False (and nothing changed) when the extension is unavailable."""
    path = library()
    if path is None:
        return False
    try:
        con.enable_load_extension(True)
        try:
            con.execute("SELECT load_extension(?, ?)", (path, ENTRY_POINT))
        finally:
            con.enable_load_extension(False)
    except Exception:  # a SQLite built without extension loading (AttributeError, OperationalError): group_concat
        return False
    return True
