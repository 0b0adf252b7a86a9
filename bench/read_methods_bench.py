"""Ways to read a kernel table's integer columns into numpy, side by side in CPU seconds (what the reader chose and why).

Reads start, deviceId, end and the name id of every kernel of one export:
- `sum` of the columns: the scan alone, the floor any read pays;
- int64s (blobagg.py): a BLOB of int64s per column, or one BLOB of all columns (one call per row), no text;
- int64s_into: the columns written by SQLite straight into a numpy buffer (the reader's way when it can be built);
- pagescan (pagescan.py): the table's B-tree pages read by C from the mapped file, no SQLite at all;
- group_concat per column parsed by numpy (the reader's way without int64s);
- np.fromiter over the cursor's rows, and fetchall + np.array: Python objects per value.

With --table TABLE --columns A,B,... (e.g. CUPTI_ACTIVITY_KIND_RUNTIME with globalTid,start,end,correlationId:
the realistic rank's 1M runtime rows), the page reader against the maintained libraries that read SQLite into
columns, each when installed (pip install connectorx adbc-driver-sqlite pyarrow apsw; a missing one is named):
connectorx (Rust, Arrow), adbc-driver-sqlite (Arrow), apsw (SQLite's C API, rows), and sqlite3's fetchall.

With --texts TABLE.COLUMN (e.g. NVTX_EVENTS.text), the ways to read a text column of every row instead:
- `count` of the column: the scan alone;
- fetchall of (rowid, column): Python's sqlite3 decoding each value (the reader's way before pagescan read texts);
- pagescan texts: the values' bytes copied by C into one buffer, decoded and split once.

Usage: .venv/bin/python bench/read_methods_bench.py bench/out/synthetic_rank_0.sqlite [--repeat 3]
[--extra correlationId,globalPid] [--texts NVTX_EVENTS.text] (make the file first with bench/analyze_bench.py).
Prints the fastest of --repeat runs per way, and the load average.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import time
from pathlib import Path

import numpy as np

from nsyskit.analysis.read import blobagg, pagescan, sqlitefile
from nsyskit.analysis.read.reader import KERNEL_TABLES, ExportReader

COLUMNS = ("start", "deviceId", "end")


def cpu() -> float:
    """CPU seconds of this process so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ways(reader: ExportReader, table: str, name: str, extra: tuple[str, ...] = ()) -> dict:
    """The ways to read, each a function returning the columns."""
    con, cols = reader.con, (*COLUMNS, name, *extra)
    count = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def concat():
        row = con.execute(f"SELECT {', '.join(f'group_concat({c}, {chr(39)},{chr(39)})' for c in cols)} FROM {table}")
        return [np.fromstring(text, dtype=np.int64, sep=",") for text in row.fetchone()]

    def fromiter():
        rows = con.execute(f"SELECT {', '.join(cols)} FROM {table}")
        return np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(cols) * count)

    chosen = {
        "sum of the columns (the scan alone)": lambda: con.execute(
            f"SELECT {', '.join(f'sum({c})' for c in cols)} FROM {table}"
        ).fetchone(),
        "group_concat + np.fromstring": concat,
        "np.fromiter over the cursor": fromiter,
        "fetchall + np.array": lambda: np.array(con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()),
    }
    if reader.blob:
        chosen["int64s per column"] = lambda: [
            np.frombuffer(b, dtype=np.int64)
            for b in con.execute(f"SELECT {', '.join(f'int64s({c})' for c in cols)} FROM {table}").fetchone()
        ]
        chosen["int64s of all columns, one call a row"] = lambda: np.frombuffer(
            con.execute(f"SELECT int64s({', '.join(cols)}) FROM {table}").fetchone()[0], dtype=np.int64
        ).reshape(len(cols), -1)

        def into():  # the reader's way: SQLite writes into a numpy buffer of rows_bound rows
            bound = sqlitefile.rows_bound(con, table)
            return sqlitefile.packed_scan(reader.query, table, {c: c for c in cols}, blob=True, bound=bound)

        chosen["int64s_into a numpy buffer (the reader)"] = into
    if pagescan.functions() is not None:
        chosen["pagescan: the file's pages read by C"] = lambda: pagescan.read_columns(con, reader.path, table, cols)
    return chosen


def library_ways(reader: ExportReader, table: str, columns: tuple[str, ...]) -> dict:
    """The page reader, the kit's SQLite read and the maintained libraries on `columns` of `table` (when installed)."""
    con, path, select = reader.con, str(reader.path), f"SELECT {', '.join(columns)} FROM {table}"
    chosen = {
        "sum of the columns (the scan alone)": lambda: con.execute(
            f"SELECT {', '.join(f'total({c})' for c in columns)} FROM {table}"  # total: no overflow on ids
        ).fetchone(),
        "sqlite3 fetchall + np.array": lambda: np.array(con.execute(select).fetchall()),
    }
    if reader.blob:
        chosen["int64s_into a numpy buffer (the reader)"] = lambda: sqlitefile.packed_scan(
            reader.query, table, {c: c for c in columns}, blob=True, bound=sqlitefile.rows_bound(con, table)
        )
    if pagescan.functions() is not None:
        chosen["pagescan: the file's pages read by C"] = lambda: pagescan.read_columns(con, reader.path, table, columns)
    try:
        import connectorx

        chosen["connectorx (arrow)"] = lambda: connectorx.read_sql(f"sqlite://{path}", select, return_type="arrow")
    except ImportError:
        print("connectorx: not installed (pip install connectorx)")
    try:
        from adbc_driver_sqlite import dbapi as adbc

        def with_adbc():
            with adbc.connect(path) as connection, connection.cursor() as cursor:
                cursor.execute(select)
                return cursor.fetch_arrow_table()

        chosen["adbc-driver-sqlite (arrow)"] = with_adbc
    except ImportError:
        print("adbc-driver-sqlite: not installed (pip install adbc-driver-sqlite pyarrow)")
    try:
        import apsw

        chosen["apsw rows + np.array"] = lambda: np.array(list(apsw.Connection(path).execute(select)))
    except ImportError:
        print("apsw: not installed (pip install apsw)")
    return chosen


def text_ways(reader: ExportReader, table: str, column: str) -> dict:
    """The ways to read one text column of every row, each a function returning the texts."""
    con = reader.con
    chosen = {
        "count of the column (the scan alone)": lambda: con.execute(f"SELECT count({column}) FROM {table}").fetchone(),
        "fetchall of rowid, text": lambda: con.execute(f"SELECT rowid, {column} FROM {table}").fetchall(),
    }
    if pagescan.functions() is not None:
        chosen["pagescan texts: one buffer, one split"] = lambda: pagescan.read_columns(
            con, reader.path, table, ("rowid",), texts=(column,)
        )
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--extra", default="", help="more columns to read, comma-separated (e.g. correlationId,globalPid)"
    )
    parser.add_argument("--texts", default="", help="read this text column instead, as TABLE.COLUMN")
    parser.add_argument("--table", default="", help="compare the libraries on this table's --columns instead")
    parser.add_argument("--columns", default="globalTid,start,end,correlationId", help="with --table, comma-separated")
    args = parser.parse_args()
    reader = ExportReader(args.export)
    if args.table:
        chosen = library_ways(reader, args.table, tuple(args.columns.split(",")))
        floor_label, baseline = "sum of the columns (the scan alone)", "pagescan: the file's pages read by C"
    elif args.texts:
        chosen = text_ways(reader, *args.texts.split(".", 1))
        floor_label, baseline = "count of the column (the scan alone)", "fetchall of rowid, text"
    else:
        table, name = reader.table(KERNEL_TABLES), reader.kernel_name_column()
        chosen = ways(reader, table, name, tuple(c for c in args.extra.split(",") if c))
        floor_label, baseline = "sum of the columns (the scan alone)", "int64s_into a numpy buffer (the reader)"
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; int64s: {bool(blobagg.library())}")
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeat):
        for label, read in chosen.items():
            start_cpu, start = cpu(), time.perf_counter()
            read()
            spent = (cpu() - start_cpu, time.perf_counter() - start)
            best[label] = min(best.get(label, spent), spent)
    floor = best[floor_label][0]
    into = best.get(baseline, (floor, 0))[0]
    print(f"{'way':40} {'cpu':>8}   {'wall':>8}   {'x the scan':>10} {'x ' + baseline.split()[0]:>13}")
    for label, (cpu_s, wall_s) in best.items():
        print(f"{label:40} {cpu_s:6.3f} s  {wall_s:6.3f} s  {cpu_s / floor:9.2f}x {cpu_s / into:12.2f}x")


if __name__ == "__main__":
    main()
