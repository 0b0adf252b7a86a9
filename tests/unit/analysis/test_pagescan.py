"""pagescan: integer columns read from the file's B-tree pages equal SQLite's reads, or are None, never wrong."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from native_built import require_built
from pagescan_check import compare_file, connect
from real_exports import NAMES, decompress

from nsyskit.analysis.read import pagescan, sqlitefile

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "bench")]
from realistic_export import make_realistic_rank  # noqa: E402
from synthetic_export import make_rank  # noqa: E402

# a value of every width of each integer serial type, both signs (1, 2, 3, 4, 6 and 8 bytes), and the constants 0, 1
INTEGERS = [0, 1, -1, 2, 127, -128, 32767, -32768, 2**23 - 1, -(2**23), 2**31 - 1, -(2**31), 2**47 - 1, -(2**47)]
INTEGERS += [2**63 - 1, -(2**63), 2**40, -(2**40) - 3]
OTHERS = [None, 1.5, -2.0, "text", "", b"\x00\x01", b"", "é" * 40]


@pytest.fixture(scope="module", autouse=True)
def compiled():
    """The compiled reader."""
    require_built(pagescan, pagescan.functions, "pagescan.c")


def make(path: Path, statements: list[str], rows: dict[str, list[tuple]] | None = None, page_size: int = 4096) -> Path:
    """An SQLite file made by sqlite3 from `statements`, then `rows` inserted per table."""
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size = {page_size}")
    for statement in statements:
        con.execute(statement)
    for table, values in (rows or {}).items():
        marks = ", ".join("?" * len(values[0]))
        con.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
    con.commit()
    con.close()
    return path


def assert_same(path: Path, none: tuple[str, ...] = ()) -> None:
    """Every column of every rowid table reads as SQLite reads it; only the reads named in `none` are None."""
    comparison = compare_file(path)
    assert comparison.differs == []
    assert sorted(set(comparison.none)) == sorted(none)
    assert comparison.reads > 0


def typed_rows(count: int) -> list[tuple]:
    """Rows of (id, a, b, c, d): every integer width and sign, REAL, TEXT, BLOB and NULL, spread over the columns."""
    values = INTEGERS + OTHERS
    return [
        (
            None,
            INTEGERS[i % len(INTEGERS)],
            values[(i * 7) % len(values)],
            INTEGERS[(i * 3) % len(INTEGERS)] if i % 5 else 2.5,
            values[(i * 11) % len(values)],
        )
        for i in range(count)
    ]


TYPED = "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b, c REAL, d TEXT)"


@pytest.mark.parametrize("page_size", [512, 1024, 4096, 65536])
def test_every_serial_type_on_every_page_size(tmp_path, page_size):
    path = make(tmp_path / "types.sqlite", [TYPED], {"t": typed_rows(3000)}, page_size)
    assert_same(path)
    read = pagescan.read_columns(sqlitefile.connect(path), path, "t", ("id", "a", "rowid"))  # the reader's SQLite
    assert list(read["a"][: len(INTEGERS)]) == INTEGERS  # the widths and signs themselves
    assert (read["id"] == read["rowid"]).all() and read["rowid"][-1] == 3000  # the INTEGER PRIMARY KEY is the rowid


def test_integers_in_a_real_column_are_real(tmp_path):
    # SQLite writes integral values of a REAL column as integers on disk and reads them back as REAL
    path = make(tmp_path / "real.sqlite", [TYPED], {"t": typed_rows(50)})
    read = pagescan.read_columns(connect(path), path, "t", ("c",), kinds=("c",))
    expected = [value for (value,) in connect(path).execute("SELECT c FROM t")]
    assert set(read["c:kind"]) == {2} and read["c"].view(np.float64).tolist() == expected  # float(integer)
    assert {type(value) for value in expected} == {float} and 2**63 - 1 in {int(v) for v in INTEGERS}
    assert pagescan.read_columns(connect(path), path, "t", ("c",)) is None


def tree_depth(path: Path, table: str) -> int:
    """Levels of the table's B-tree, following the left-most child down."""
    data = path.read_bytes()
    size = int.from_bytes(data[16:18], "big") or 65536
    page = connect(path).execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    depth = 1
    while data[(page - 1) * size + (100 if page == 1 else 0)] == 0x05:
        at = (page - 1) * size
        first = int.from_bytes(data[at + 12 : at + 14], "big")
        page = int.from_bytes(data[at + first : at + first + 4], "big")
        depth += 1
    return depth


def test_a_deep_tree_of_small_pages(tmp_path):
    rows = [(i * 3 - 7000, "x" * (i % 90), i) for i in range(40000)]
    path = make(
        tmp_path / "deep.sqlite", ["CREATE TABLE t (k INTEGER PRIMARY KEY, s TEXT, v INTEGER)"], {"t": rows}, 512
    )
    assert tree_depth(path, "t") >= 3
    assert_same(path)
    read = pagescan.read_columns(connect(path), path, "t", ("k", "v"))
    assert read["k"][0] == -7000 and (read["v"] == range(40000)).all()


def test_rowids_sparse_and_negative(tmp_path):
    rows = [(rowid, rowid // 2) for rowid in (-(2**63), -5, 0, 3, 2**40, 2**63 - 1)]
    path = make(tmp_path / "sparse.sqlite", ["CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)"], {"t": rows})
    assert_same(path)
    assert list(pagescan.read_columns(connect(path), path, "t", ("rowid",))["rowid"]) == [r[0] for r in rows]


def test_columns_added_later(tmp_path):
    # rows written before ALTER TABLE ADD COLUMN are short: a missing column reads as its default
    path = make(tmp_path / "alter.sqlite", ["CREATE TABLE t (a INTEGER)"], {"t": [(i,) for i in range(300)]})
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE t ADD COLUMN n INTEGER")
    con.execute("ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 7")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, i, i) for i in range(300)])
    con.commit()
    con.close()
    # d's default (7) is not in the file: that read is SQLite's to make
    assert_same(path, none=("t.d/rowid with kinds", "t.a/n/d with kinds", "t.d as texts", "t.a/n/d as texts"))
    read = pagescan.read_columns(connect(path), path, "t", ("a", "n"), kinds=("n",))
    assert list(read["n:kind"]) == [0] * 300 + [1] * 300 and list(read["n"][300:]) == list(range(300))
    assert pagescan.read_columns(connect(path), path, "t", ("n",)) is None  # NULLs without kinds


def test_columns_in_overflow_pages(tmp_path):
    # integers after a long text lie in overflow pages; with 60 columns even the record's header spills
    wide = ", ".join(f"c{i} INTEGER" for i in range(60))
    rows = [(i, "y" * (i * 37 % 9000), -i, i * 1000003) for i in range(400)]
    wide_rows = [(*(i * j - 30 * i for j in range(60)), "z" * (i * 13 % 3000)) for i in range(200)]
    path = make(
        tmp_path / "overflow.sqlite",
        ["CREATE TABLE t (a INTEGER, s TEXT, b INTEGER, c INTEGER)", f"CREATE TABLE w ({wide}, s TEXT)"],
        {"t": rows, "w": wide_rows},
        512,
    )
    assert_same(path)
    read = pagescan.read_columns(connect(path), path, "t", ("b", "c"))
    assert list(read["b"]) == [-i for i in range(400)] and read["c"][399] == 399 * 1000003
    assert list(pagescan.read_columns(connect(path), path, "w", ("c59",))["c59"]) == [29 * i for i in range(200)]


def test_deleted_rows_and_vacuum(tmp_path):
    path = make(tmp_path / "deleted.sqlite", [TYPED], {"t": typed_rows(5000)}, 1024)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM t WHERE id % 3 = 0 OR (id > 1000 AND id < 3000)")  # freeblocks, freed pages
    con.commit()
    assert_same(path)
    con.execute("VACUUM")
    con.close()
    assert_same(path)
    kept = [i for i in range(1, 5001) if i % 3 and not 1000 < i < 3000]
    assert list(pagescan.read_columns(connect(path), path, "t", ("rowid",))["rowid"]) == kept


def test_an_empty_table_and_auto_vacuum(tmp_path):
    path = make(
        tmp_path / "auto.sqlite",
        ["PRAGMA auto_vacuum = FULL", "CREATE TABLE e (a INTEGER)", TYPED],
        {"t": typed_rows(2000)},
        1024,
    )
    con = sqlite3.connect(path)
    con.execute("DELETE FROM t WHERE id < 500")  # auto_vacuum moves pages (pointer-map pages in the file)
    con.commit()
    assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 1
    con.close()
    assert_same(path)
    assert len(pagescan.read_columns(connect(path), path, "e", ("a",))["a"]) == 0


def test_views_and_tables_without_rowids_are_not_read(tmp_path):
    path = make(
        tmp_path / "other.sqlite",
        [
            "CREATE TABLE t (a INTEGER)",
            "CREATE VIEW v AS SELECT a FROM t",
            "CREATE TABLE w (a INTEGER PRIMARY KEY, b) WITHOUT ROWID",
            "CREATE TABLE g (a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) VIRTUAL)",
        ],
        {"t": [(1,)], "w": [(1, 2)], "g": [(3,)]},
    )
    con = connect(path)
    assert pagescan.read_columns(con, path, "v", ("a",)) is None
    assert pagescan.read_columns(con, path, "w", ("a",)) is None
    assert pagescan.read_columns(con, path, "g", ("a",)) is None  # generated columns are not in the records
    assert pagescan.read_columns(con, path, "t", ("nothing",)) is None
    assert pagescan.read_columns(con, path, "missing", ("a",)) is None
    assert list(pagescan.read_columns(con, path, "t", ("a",))["a"]) == [1]
    con.text_factory = bytes  # a connection that returns the schema's text as bytes reads the same
    assert list(pagescan.read_columns(con, path, "t", ("A", "rowid"))["A"]) == [1]


def test_a_wal_file_with_pending_frames_is_not_read(tmp_path):
    path = make(tmp_path / "wal.sqlite", ["PRAGMA journal_mode = WAL", "CREATE TABLE t (a INTEGER)"], {"t": [(1,)]})
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO t VALUES (2)")
    writer.commit()  # the row is in the -wal file only
    assert os.path.getsize(f"{path}-wal") > 0
    assert pagescan.read_columns(connect(path), path, "t", ("a",)) is None
    writer.close()  # the last connection checkpoints and removes the -wal file: the pages hold every row
    assert list(pagescan.read_columns(connect(path), path, "t", ("a",))["a"]) == [1, 2]


@pytest.mark.parametrize("name", NAMES)
def test_real_exports(tmp_path, name):
    assert_same(decompress(name, tmp_path))


def test_bench_exports(tmp_path):
    assert_same(make_rank(tmp_path / "synthetic.sqlite", 0, 3000))
    assert_same(make_realistic_rank(tmp_path / "realistic.sqlite", 3000))


def test_tables_read_at_once_in_threads(tmp_path):
    # the reader reads several tables at once: the C code keeps no state between calls (and releases the GIL)
    path = make_realistic_rank(tmp_path / "realistic.sqlite", 3000)
    con = sqlitefile.connect(path)
    reads = [
        ("CUPTI_ACTIVITY_KIND_KERNEL", ("start", "end", "deviceId", "correlationId"), ()),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", ("start", "end", "correlationId"), ()),
        ("NVTX_EVENTS", ("start", "end", "textId"), ("end", "textId")),
    ] * 8
    alone = [pagescan.read_columns(con, path, *read) for read in reads]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda read: pagescan.read_columns(con, path, *read), reads))
    assert all(found is not None for found in alone)
    for one, other in zip(alone, together, strict=True):
        assert one.keys() == other.keys() and all((one[k] == other[k]).all() for k in one)


def damaged(data: bytes, rng: random.Random, page_size: int) -> bytes:
    """`data` with random damage: bits flipped, bytes zeroed or set, or the file cut short (often in the page
    headers and cell pointers, where damage changes the tree)."""
    data = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4])):
        if len(data) < page_size:
            break
        page = rng.randrange(len(data) // page_size)
        at = page * page_size + (rng.randrange(120) if rng.random() < 0.5 else rng.randrange(page_size))
        how = rng.random()
        if how < 0.4:
            data[at] ^= 1 << rng.randrange(8)
        elif how < 0.6:
            end = min(len(data), at + rng.randrange(1, 64))
            data[at:end] = bytes(end - at)
        elif how < 0.9:
            data[at] = rng.choice([0, 1, 2, 5, 10, 13, 0x7F, 0x80, 0xFF])
        else:
            del data[rng.randrange(100, len(data)) :]
    return bytes(data)


def test_damaged_files_give_none_or_sqlites_values(tmp_path):
    sources = [
        decompress("nsysai_mock_rtx3080.sqlite", tmp_path),
        make(tmp_path / "typed.sqlite", [TYPED], {"t": typed_rows(600)}, 1024),
        make(
            tmp_path / "long.sqlite",
            ["CREATE TABLE t (a INTEGER, s TEXT, b INTEGER)"],
            {"t": [(i, "q" * (i * 41 % 2000), i) for i in range(200)]},
            512,
        ),
        make_text_file(tmp_path / "texts.sqlite"),  # the texts and REAL values are read too (pagescan_check)
    ]
    rng = random.Random(12)
    files = []
    for index in range(300):
        source = sources[index % len(sources)]
        data = source.read_bytes()
        target = tmp_path / f"damaged-{index}.sqlite"
        target.write_bytes(damaged(data, rng, int.from_bytes(data[16:18], "big")))
        files.append(target)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("pagescan_check.py")), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # a crash (or an exception) fails here
    verdicts = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert sorted(verdicts) == sorted(map(str, files))
    assert not [f"{f}: {v}" for f, v in verdicts.items() if v.startswith("DIFFERS")]
    outcomes = [v.split()[0] for v in verdicts.values()]
    # the damage reaches the reader: some reads still succeed, some files SQLite itself cannot read
    assert outcomes.count("ok") > 50 and outcomes.count("sqlite-failed") > 10
    assert sum(int(v.split()[2]) for v in verdicts.values() if v.startswith("ok")) > 0  # some damage gives None


def test_disabled_by_the_environment(tmp_path, monkeypatch):
    path = make(tmp_path / "t.sqlite", ["CREATE TABLE t (a INTEGER)"], {"t": [(1,)]})
    assert pagescan.read_columns(connect(path), path, "t", ("a",)) is not None
    monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "0")
    assert pagescan.read_columns(connect(path), path, "t", ("a",)) is None


def test_without_a_compiler_nothing_is_read(tmp_path):
    # a fresh process with no compiler on PATH and an empty cache: no reader, None
    path = make(tmp_path / "t.sqlite", ["CREATE TABLE t (a INTEGER)"], {"t": [(1,)]})
    code = (
        "import sys, sqlite3; from pathlib import Path; from nsyskit.analysis.read import pagescan; "
        "con = sqlite3.connect(sys.argv[1]); print(pagescan.functions() is None, "
        "pagescan.read_columns(con, Path(sys.argv[1]), 't', ('a',)))"
    )
    # no compiler, an empty cache, and the libraries built into the package left aside (as an sdist without cc has)
    env = {"PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "CC": "no-such-cc", "NSYSKIT_NATIVE_PREBUILT": "0"}
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "None"]


NAN_SENTINEL = 1.2345678901234567e-300  # a double written, then its bytes turned into a NaN's on disk


def text_rows() -> list[tuple]:
    """Rows of (id, s TEXT, r REAL, f FLOAT, x untyped): odd texts, odd doubles, every kind in the untyped column."""
    texts = ["plain", "", "é" * 40, "a\x00b", "\x00", "ü" * 3000 + "end", "日本語", None]
    doubles = [1.5, 2, -0.0, float("inf"), float("-inf"), 2**53 + 1, 1e308, 5e-324, -7, None]
    untyped = [-0.0, 1e-310, 42, -(2**63), "text", b"\xff\x00blob", b"", NAN_SENTINEL, float("inf"), None, 3.25]
    return [
        (None, texts[i % len(texts)], doubles[i % len(doubles)], doubles[(i * 3) % len(doubles)],
         untyped[i % len(untyped)])
        for i in range(400)
    ]  # fmt: skip


def make_text_file(path: Path, page_size: int = 512) -> Path:
    """A UTF-8 file of text_rows(), plus TEXT values that are not UTF-8 (bytes cast to TEXT), with NaNs on disk."""
    path = make(path, ["CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, r REAL, f FLOAT, x)"], {"t": text_rows()},
                page_size)  # fmt: skip
    con = sqlite3.connect(path)
    for bad in (b"\xff\xfe bad", b"ok \xe2\x82", b"\xc3", b"\xed\xa0\x80 surrogate", b"\x80\x00\xc3("):
        con.execute("INSERT INTO t (s, x) VALUES (CAST(? AS TEXT), CAST(? AS TEXT))", (bad, bad))
    con.commit()
    con.close()
    data = path.read_bytes()
    sentinel = np.array([NAN_SENTINEL], dtype=">f8").tobytes()
    nans = [bytes.fromhex("7ff8000000000000"), bytes.fromhex("fff0000000000001")]  # quiet; signalling, negative
    pieces = data.split(sentinel)
    assert len(pieces) > 10
    path.write_bytes(b"".join(p + nans[i % 2] for i, p in enumerate(pieces[:-1])) + pieces[-1])
    return path


@pytest.mark.parametrize("page_size", [512, 4096])
def test_texts_and_reals_as_sqlite_gives_them(tmp_path, page_size):
    path = make_text_file(tmp_path / "texts.sqlite", page_size)
    assert_same(path)  # every column as texts and as integers/REAL bits, each alone and all at once
    con = connect(path)  # (decodes text as nsyskit does: UTF-8, errors replaced)
    read = pagescan.read_columns(con, path, "t", (), texts=("s", "r", "x"))
    s, x = read["s:text"], read["x:text"]
    assert s[:8].tolist() == ["plain", "", "é" * 40, "a\x00b", "\x00", "ü" * 3000 + "end", "日本語", None]
    assert s[-5:].tolist() == ["\ufffd\ufffd bad", "ok \ufffd", "\ufffd", "\ufffd\ufffd\ufffd surrogate", "\ufffd\x00\ufffd("]
    assert x[:7].tolist() == ["-0.0", "1e-310", "42", str(-(2**63)), "text", "\ufffd\x00blob", ""]
    assert x[7] is None and (read["x:kind"][7::11][:36] == 0).all()  # a NaN on disk reads as NULL, as SQLite's
    reals = read["r"].view(np.float64)
    assert reals[2] == 0 and not np.signbit(reals[2])  # -0.0 in a REAL column: stored as the integer 0
    assert np.signbit(read["x"].view(np.float64)[0])  # -0.0 in an untyped column: a REAL on disk
    assert read["r:text"][:6].tolist() == ["1.5", "2.0", "0.0", "inf", "-inf", str(float(2**53 + 1))]
    # without NULs in the texts the buffer is split in one go: the same texts
    clean = pagescan.read_columns(con, path, "t", ("rowid",), texts=("r",))
    assert clean["r:text"].tolist() == read["r:text"].tolist()


def test_texts_of_a_utf16_file_are_not_read(tmp_path):
    path = make(tmp_path / "utf16.sqlite", ["PRAGMA encoding = 'UTF-16le'", "CREATE TABLE t (a INTEGER, s TEXT)"],
                {"t": [(1, "é"), (2, "x")]})  # fmt: skip
    con = connect(path)
    assert pagescan.read_columns(con, path, "t", ("a",), texts=("s",)) is None
    assert list(pagescan.read_columns(con, path, "t", ("a", "s"), kinds=("s",))["a"]) == [1, 2]  # integers still read


@pytest.mark.parametrize("with_nul", [False, True])
def test_random_broken_utf8_texts_decode_as_sqlites(tmp_path, with_nul):
    # one decode of the whole buffer split at the NULs must give each text as its own decode gives it: cut and broken
    # sequences at the ends of texts included (a NUL ends any invalid sequence); with NULs inside, per-text decodes
    rng = random.Random(7)
    alphabet = [0x41, 0x80, 0xBF, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0xED, 0xA0, 0xFF, 0xC0, 0xF4, 0x90]
    alphabet += [0] if with_nul else []
    texts = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(7))) for _ in range(3000)]
    path = make(tmp_path / "broken.sqlite", ["CREATE TABLE t (s TEXT, b BLOB)"])
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO t VALUES (CAST(? AS TEXT), ?)", [(t, t) for t in texts])
    con.commit()
    con.close()
    assert_same(path)
    read = pagescan.read_columns(connect(path), path, "t", (), texts=("s", "b"))
    expected = [t.decode("utf-8", "replace") for t in texts]
    assert read["s:text"].tolist() == expected and read["b:text"].tolist() == expected
