"""An SQLite aggregate, int64s(x), that returns a column of integers as one BLOB of int64s: no text conversion.

`group_concat` spends most of a big read converting each integer to text (and numpy parsing it back); int64s copies
the 8 bytes. It is a tiny loadable extension compiled once per machine with the C compiler (`cc`) and SQLite's
extension header (`sqlite3ext.h`, package libsqlite3-dev), cached in ~/.cache/nsyskit. Without either, or with
NSYSKIT_SQLITE_EXTENSION=0, readers use group_concat: same results, slower.

int64s(x) is NULL as soon as one x is not an INTEGER (NULL, REAL, text, BLOB), so that the caller reads again with a
filter, exactly as when group_concat's text does not parse; an aggregate over no rows is an empty BLOB.
"""

from __future__ import annotations

import os

from nsyskit import native

ENTRY_POINT = "sqlite3_nsyskit_int64s_init"
DISABLE_VARIABLE = "NSYSKIT_SQLITE_EXTENSION"

C_SOURCE = r"""
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

typedef struct {
    sqlite3_int64 *values;
    sqlite3_int64 count, capacity;
    int failed; /* 1: a value that is not an INTEGER; 2: out of memory */
} Column;

static void int64s_step(sqlite3_context *context, int argc, sqlite3_value **argv) {
    Column *column = (Column *)sqlite3_aggregate_context(context, sizeof(Column));
    int i;
    if (column == 0) {
        sqlite3_result_error_nomem(context);
        return;
    }
    if (column->failed) return;
    if (column->count + argc > column->capacity) {
        sqlite3_int64 grown = column->capacity ? 2 * column->capacity : 65536;
        sqlite3_int64 *values;
        while (grown < column->count + argc) grown *= 2;
        values = (sqlite3_int64 *)sqlite3_realloc64(column->values, grown * sizeof(sqlite3_int64));
        if (values == 0) {
            column->failed = 2;
            return;
        }
        column->values = values;
        column->capacity = grown;
    }
    for (i = 0; i < argc; i++) {
        if (sqlite3_value_type(argv[i]) != SQLITE_INTEGER) {
            column->failed = 1;
            return;
        }
        column->values[column->count + i] = sqlite3_value_int64(argv[i]);
    }
    column->count += argc;
}

static void int64s_final(sqlite3_context *context) {
    Column *column = (Column *)sqlite3_aggregate_context(context, 0);
    if (column == 0 || (column->count == 0 && !column->failed)) {
        sqlite3_result_zeroblob(context, 0);
    } else if (column->failed == 2) {
        sqlite3_result_error_nomem(context);
    } else if (column->failed) {
        sqlite3_result_null(context);
    } else {
        /* SQLite takes the buffer (and frees it, also when the BLOB is too big) */
        sqlite3_result_blob64(context, column->values, (sqlite3_uint64)column->count * sizeof(sqlite3_int64),
                              sqlite3_free);
        column->values = 0;
    }
    sqlite3_free(column ? column->values : 0);
}

int sqlite3_nsyskit_int64s_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
    SQLITE_EXTENSION_INIT2(api);
    (void)error;
    return sqlite3_create_function_v2(db, "int64s", -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, 0, 0, int64s_step,
                                      int64s_final, 0);
}
"""

_library: list[str | None] = []  # the compiled library's path once looked for in this process (None: unavailable)


def library() -> str | None:
    """The compiled extension (built on first use and cached per machine), or None when it cannot be built here."""
    if not _library:
        _library.append(None if os.environ.get(DISABLE_VARIABLE) == "0" else _build())
    return _library[0]


def _build() -> str | None:
    """Compile the extension into the cache (None: no compiler or no sqlite3ext.h, i.e. libsqlite3-dev)."""
    return native.build("int64s", C_SOURCE, "sqlite-ext")


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
