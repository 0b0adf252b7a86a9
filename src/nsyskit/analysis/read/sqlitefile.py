"""Open an SQLite export read-only, after checking that it is a whole, readable SQLite file (no schema knowledge)."""

from __future__ import annotations

import os
import struct
import urllib.parse
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nsyskit.errors import ReportFileError

REEXPORT = "re-export the report with 'nsys export --type sqlite'"

try:  # a current SQLite (the wheel's 3.51) scans the big tables ~30% faster than Debian 12's system SQLite 3.40
    from pysqlite3 import dbapi2 as sqlite3
except ImportError:  # platforms without the wheel: the standard library's
    import sqlite3

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_BUFFER_VALUES = 1 << 31  # int64s_into's buffer: 16 GiB of address space at most (pages untouched stay free)


def decode_text(raw: bytes) -> str:
    """Text as shown to people: UTF-8, undecodable bytes replaced (exports hold binary blobs and foreign encodings)."""
    return raw.decode("utf-8", "replace")


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to a checked export (text decoded by C; see ExportFile.query for non-UTF-8 text)."""
    check_sqlite_file(path)
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise ReportFileError(path, f"cannot open it ({exc})", "check its permissions or copy it again") from None
    return con


def check_sqlite_file(path: Path) -> None:
    """Raise ReportFileError unless `path` is a complete, readable SQLite file (exists, not empty, not truncated)."""
    if not path.exists():
        raise ReportFileError(path, "no such file", "check the path")
    if path.is_dir():
        raise ReportFileError(path, "is a folder, not an export", "pass the run folder to 'invoke analyze' instead")
    if not os.access(path, os.R_OK):
        raise ReportFileError(
            path, "permission denied (not readable)", "make it readable (chmod a+r) or run as its owner"
        )
    size = path.stat().st_size
    if size == 0:
        raise ReportFileError(
            path, "is empty (0 bytes)", "the profile did not finish: re-run it or re-export the report"
        )
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise ReportFileError(path, f"cannot be read ({exc.strerror})", "check its permissions") from None
    if not header.startswith(SQLITE_MAGIC):
        raise ReportFileError(
            path, "not an SQLite file", "pass a .nsys-rep or the .sqlite 'nsys export --type sqlite' writes"
        )
    if len(header) < 100:
        raise ReportFileError(path, f"truncated ({size} bytes, shorter than an SQLite header)", "re-export the report")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    pages = struct.unpack(">I", header[28:32])[0]
    if pages and size < pages * page_size:
        raise ReportFileError(
            path,
            f"truncated ({size} of {pages * page_size} bytes)",
            "copy the file again or re-export it with 'nsys export --type sqlite'",
        )


def where_clause(condition: str) -> str:
    """' WHERE condition', or '' without one."""
    return f" WHERE {condition}" if condition else ""


def packed_scan(
    query: Callable[[str], list[tuple]],
    table: str,
    exprs: dict[str, str],
    where: str = "",
    checks: str = "",
    blob: bool = False,
    bound: int | None = None,
) -> dict[str, np.ndarray] | None:
    """Integer SQL expressions over the rows of `table` as int64 columns, in one scan (an aggregate per column).

    The aggregate is int64s (blobagg.py: the 8 bytes of each value, when `blob`: the connection has it), else
    group_concat (each value as text, parsed by numpy): same results, int64s without the text conversion.

    `checks` (see type_check) are aggregates in the same scan that say 'integer' unless a value is text or a BLOB,
    which SQLite's arithmetic would silently turn into a number. A NULL (group_concat skips it: the count differs),
    a REAL or an overflow (numpy cannot parse it as an integer) are caught on parsing. Then the result is None and
    the caller reads again with a filter. `bound` (at least the table's row count, see rows_bound) lets int64s_into
    write the columns straight into numpy memory.
    """
    if blob and bound is not None and 0 < bound * len(exprs) <= MAX_BUFFER_VALUES:
        try:  # a sparse rowid range may ask for more address space than the system grants: then the BLOB below
            buffer = np.empty((len(exprs), bound), dtype=np.int64)
        except MemoryError:
            buffer = None
        if buffer is not None:
            return _scan_into(query, table, exprs, where, checks, buffer)
    if blob:  # one call per row for all the columns, which come back one after the other in one BLOB
        aggregates, width = f"int64s({', '.join(exprs.values())})", 1
    else:
        aggregates, width = ", ".join(f"group_concat({expr}, ',')" for expr in exprs.values()), len(exprs)
    row = query(
        f"SELECT count(*), {aggregates}{', ' + checks if checks else ''} FROM {table} NOT INDEXED{where_clause(where)}"
    )[0]
    count, texts, flags = row[0], row[1 : 1 + width], row[1 + width :]
    if any(kind not in ("integer", "real", "null") for kind in flags):
        return None
    if blob:  # NULL: a value was not an INTEGER (see blobagg)
        data = texts[0]
        if data is None or len(data) != 8 * count * len(exprs):
            return None
        # Read-only views of the bytes SQLite returned: no copy (analyzers make new arrays, never write into these)
        columns = np.frombuffer(data, dtype=np.int64).reshape(len(exprs), count)
        return dict(zip(exprs, columns, strict=True))
    result = {}
    for name, text in zip(exprs, texts, strict=True):
        with warnings.catch_warnings():  # older numpy warns (and stops) where newer numpy raises
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                column = np.fromstring(text, dtype=np.int64, sep=",") if text else np.empty(0, dtype=np.int64)
            except ValueError:
                return None
        if len(column) != count:
            return None
        result[name] = column
    return result


def _scan_into(
    query: Callable[[str], list[tuple]], table: str, exprs: dict[str, str], where: str, checks: str, buffer: np.ndarray
) -> dict[str, np.ndarray] | None:
    """packed_scan through int64s_into: SQLite writes the columns straight into `buffer` (a row per expression).

    Pages of the buffer that no row reaches are never touched (nor counted in the resident memory).
    """
    address, bound = buffer.__array_interface__["data"][0], buffer.shape[1]
    row = query(
        f"SELECT count(*), int64s_into({address}, {bound}, {', '.join(exprs.values())})"
        f"{', ' + checks if checks else ''} FROM {table} NOT INDEXED{where_clause(where)}"
    )[0]
    count, written, flags = row[0], row[1], row[2:]
    if written is None or written != count or any(kind not in ("integer", "real", "null") for kind in flags):
        return None  # a value that is not an integer: the caller reads again with a filter
    return dict(zip(exprs, buffer[:, :count], strict=True))


def rows_bound(con: sqlite3.Connection, table: str) -> int | None:
    """At least the number of rows of `table` (rowids are distinct integers), from two B-tree descents; None for a
    view or a table without rowids."""
    try:  # two subqueries: SQLite descends the B-tree for a lone min() or max(), but scans every row for both at once
        low, high = con.execute(f"SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table})").fetchone()
    except sqlite3.Error:
        return None
    return high - low + 1 if isinstance(low, int) and isinstance(high, int) else None


def span(start: np.ndarray, end: np.ndarray, keep: bool = True) -> np.ndarray | None:
    """end - start, or None when a difference overflows int64 (SQLite's arithmetic would have turned it REAL).

    keep=False: only the check (the caller keeps start and end): an empty array when no difference overflows, and
    no difference is computed unless a value is negative.
    """
    # Two non-negative values cannot overflow: the sign test (temporaries of the column's size) only with negatives.
    negative = len(start) and min(int(start.min()), int(end.min())) < 0
    if not keep and not negative:
        return start[:0]
    duration = end - start
    if negative and (((end ^ start) & (end ^ duration)) < 0).any():
        return None
    return duration


def type_check(columns: tuple[str, ...]) -> str:
    """One aggregate over `columns` that is 'text' or 'blob' when any value is (SQLite sorts them above numbers).

    A per-row scalar max() feeding one aggregate costs far less than an aggregate per column.
    """
    inner = f"max({', '.join(columns)})" if len(columns) > 1 else columns[0]
    return f"typeof(max({inner}))"


def read_ints(
    query: Callable[[str], list[tuple]],
    warn: Callable[[str], None],
    path: Path,
    table: str,
    exprs: dict[str, str],
    raw: tuple[str, ...],
    where: str = "",
    blob: bool = False,
    bound: int | None = None,
) -> dict[str, np.ndarray]:
    """Integer SQL expressions over the rows of `table` as int64 columns (row order kept), read columnar.

    `raw` are the columns the expressions read: rows where one holds text, a BLOB, a REAL or NULL are left out
    (with a warning) instead of being turned into wrong numbers by SQLite's arithmetic.
    """
    # A column read as is checks itself (text or a BLOB does not parse as an integer); only those read inside
    # arithmetic, where SQLite would turn text into a number, need the aggregate check (it costs a scan's worth).
    hidden = tuple(c for c in raw if c not in exprs.values())
    columns = packed_scan(query, table, exprs, where, type_check(hidden) if hidden else "", blob, bound)
    if columns is not None:
        return columns
    valid = " AND ".join(f"typeof({c}) = 'integer'" for c in raw)
    total = query(f"SELECT count(*) FROM {table}{where_clause(where)}")[0][0]
    columns = packed_scan(query, table, exprs, f"({where}) AND {valid}" if where else valid, blob=blob, bound=bound)
    if columns is None:  # an expression overflowed (integer arithmetic turned REAL)
        raise ReportFileError(path, f"table {table} has values out of range in {', '.join(raw)}", REEXPORT)
    kept = len(next(iter(columns.values()))) if columns else 0
    if total > kept:
        warn(
            f"{path}: {total - kept} of {total} rows of {table} hold text, BLOBs or NULLs in {'/'.join(raw)}"
            f" and were left out; fix: {REEXPORT}"
        )
    return columns


def as_text(value: object) -> str:
    """A value shown as text: str as is, bytes decoded lossily, NULL as '', numbers as digits."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
