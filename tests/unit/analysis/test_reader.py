"""The reader: export-version differences, CPU-only reports, and one-line errors for unusable files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from nsys_fixtures import THREAD, Export, Kernel, Memop, Range, write_export

from nsyskit import hostpkgs
from nsyskit.analysis.read import blobagg, pagescan
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.analysis.read.records import NVTX_FIELDS
from nsyskit.analysis.trace import analyze_run, discover
from nsyskit.errors import ReportFileError


def test_old_nvtx_schema_without_textid_or_payload(tmp_path):
    path = write_export(
        tmp_path / "old.sqlite",
        Export(ranges=[Range(0, 10, "step 0"), Range(10, 30, "forward")], old_nvtx=True, version="2021.5.1"),
    )
    nvtx = ExportReader(path).nvtx_ranges()
    assert list(nvtx.text) == ["step 0", "forward"] and np.isnan(nvtx.payload).all()


def test_registered_strings_domains_and_payloads(tmp_path):
    ranges = [Range(0, 10, "step 0", registered=True), Range(1, 2, "ncclAllReduce", payload=4096, domain="NCCL")]
    nvtx = ExportReader(write_export(tmp_path / "new.sqlite", Export(ranges=ranges))).nvtx_ranges()
    assert (
        list(nvtx.text) == ["step 0", "ncclAllReduce"] and list(nvtx.domain) == ["", "NCCL"] and nvtx.payload[1] == 4096
    )


def test_gpu_table_name_variant(tmp_path):
    path = write_export(
        tmp_path / "v.sqlite", Export(kernels=[Kernel(0, 5, "k")], gpus={0: "A100"}, gpu_table="TARGET_INFO_CUDA_GPU")
    )
    assert ExportReader(path).gpus() == {0: "A100"}


def test_cpu_only_report_gives_empty_results_not_errors(tmp_path):
    path = write_export(tmp_path / "rank_3.sqlite", Export(ranges=[Range(0, 100, "step 0")], cpu_only=True))
    reader = ExportReader(path)
    assert len(reader.kernels()) == 0 and len(reader.memcpys()) == 0 and reader.gpus() == {}
    analysis = analyze_run([path])
    assert (
        not analysis.has_gpu and len(analysis.kernel_summaries[3]) == 0 and list(analysis.steps["duration_ns"]) == [100]
    )


def test_columnar_read_keeps_rows_and_values(tmp_path):
    kernels = [Kernel(10**15 + i * 7, 10**15 + i * 7 + (i % 5) + 1, f"k{i % 3}", device=i % 2) for i in range(1000)]
    reader = ExportReader(
        write_export(tmp_path / "big.sqlite", Export(kernels=kernels, memops=[Memop(5, 9, 1 << 40, 8)]))
    )
    got = reader.kernels()
    assert list(got.start) == [k.start for k in kernels] and list(got.end) == [k.end for k in kernels]
    assert list(got.device) == [k.device for k in kernels]
    names = reader.strings(got.extra["name"])
    assert [names[i] for i in got.extra["name"]] == [k.name for k in kernels]
    assert reader.memcpys().extra["bytes"][0] == 1 << 40


@pytest.mark.parametrize("pages", ["1", "0"], ids=["pages", "sqlite"])
@pytest.mark.parametrize(
    "duration", [1 << 40, -3, (1 << 61) - 1, 1 << 61, -(1 << 61), -(1 << 61) - 1, 1 << 62], ids=hex
)
def test_durations_beyond_the_packed_range_read_exactly(tmp_path, duration, pages, monkeypatch):
    # Through SQLite, durations travel packed with the name id: duration * 2^2 + name here (largest StringId 3). In
    # [-2^61, 2^61) that fits an int64; beyond, SQLite's product turns REAL and the read falls back to separate
    # columns. From the file's pages they are read as they are: both must give the exact durations.
    monkeypatch.setenv("NSYSKIT_PAGE_SCAN", pages)
    kernels = [Kernel(10**12, 10**12 + duration, "huge"), Kernel(5, 9, "small", device=1)]
    reader = ExportReader(write_export(tmp_path / "edge.sqlite", Export(kernels=kernels)))
    assert reader._name_bits == 2
    names, durations = reader.kernel_durations()
    got = reader.kernels()
    strings = reader.strings(names)
    if duration < 0:  # a kernel ending before it starts is left out, with a warning naming the file and the fix
        assert [strings[i] for i in names] == ["small"] and list(durations) == [4]
        assert list(got.end - got.start) == [4] and list(got.device) == [1]
        assert any("end before they start" in w and str(reader.path) in w and "fix:" in w for w in reader.warnings)
        return
    assert [strings[i] for i in names] == ["huge", "small"] and list(durations) == [duration, 4]
    assert list(got.end - got.start) == [duration, 4] and list(got.device) == [0, 1]


def _one_line(exc: ReportFileError, path) -> str:
    line = exc.one_line()
    assert str(path) in line and "\n" not in line
    return line


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty"),
        (b"hello, this is not a database at all" * 10, "not an SQLite file"),
        (b"SQLite format 3\x00" + b"\x00" * 20, "truncated"),
    ],
)
def test_unusable_files_give_one_line_errors(tmp_path, content, problem):
    path = tmp_path / "rank_0.sqlite"
    path.write_bytes(content)
    with pytest.raises(ReportFileError) as err:
        analyze_run([path])
    assert problem in _one_line(err.value, path)


def test_truncated_export(tmp_path):
    path = write_export(tmp_path / "cut.sqlite", Export(kernels=[Kernel(i, i + 1, "k") for i in range(3000)]))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReportFileError) as err:
        ExportReader(path)
    assert "truncated" in _one_line(err.value, path)


def test_corrupt_pages(tmp_path):
    path = write_export(tmp_path / "bad.sqlite", Export(kernels=[Kernel(i, i + 1, "k") for i in range(3000)]))
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)
    path.write_bytes(bytes(data))
    with pytest.raises(ReportFileError) as err:
        analyze_run([path])
    assert "corrupt" in _one_line(err.value, path)


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (x)")
    with pytest.raises(ReportFileError) as err:
        ExportReader(path)
    assert "not an Nsight Systems export" in _one_line(err.value, path)


def test_missing_file_and_empty_folder(tmp_path):
    with pytest.raises(ReportFileError, match="no such file"):
        analyze_run([tmp_path / "nope.sqlite"])
    with pytest.raises(ReportFileError, match="no .nsys-rep, .qdrep, .sqlite or .qdstrm"):
        analyze_run([tmp_path])


def test_ranks_from_names_and_preferred_formats(tmp_path):
    for rank in (10, 2):
        write_export(tmp_path / f"profile_rank_{rank}.sqlite", Export(cpu_only=True))
    (tmp_path / "profile_rank_2.nsys-rep").write_bytes(b"x")  # the .sqlite of the same stem wins
    (tmp_path / "analysis").mkdir()
    write_export(tmp_path / "analysis" / "ignored_rank_5.sqlite", Export(cpu_only=True))
    assert [(r, p.name) for r, p in discover([tmp_path])] == [
        (2, "profile_rank_2.sqlite"),
        (10, "profile_rank_10.sqlite"),
    ]


def _bad_values_export(tmp_path):
    """An export whose kernel, memcpy and runtime rows hold text, a BLOB, a REAL or NULL where integers belong."""
    kernels = [Kernel(100 + 10 * i, 105 + 10 * i, f"k{i % 4}", device=i % 2) for i in range(40)]
    memops = [Memop(1000 + 10 * i, 1004 + 10 * i, 64 * (i + 1), 1 + i % 2) for i in range(20)]
    ranges = [Range(50, 600, "step 0")]
    path = write_export(tmp_path / "bad.sqlite", Export(kernels=kernels, memops=memops, ranges=ranges))
    con = sqlite3.connect(path)
    for sql in (
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 'late' WHERE rowid = 3",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'gpu' WHERE rowid = 5",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 170.5 WHERE rowid = 8",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = x'01' WHERE rowid = 11",
        "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = '12 B' WHERE rowid = 2",
        "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = x'02' WHERE rowid = 4",
    ):
        con.execute(sql)
    con.commit()
    con.close()
    return path


def _columns(activities):
    return {
        "start": activities.start.tolist(),
        "end": activities.end.tolist(),
        "device": activities.device.tolist(),
        **{k: v.tolist() for k, v in activities.extra.items()},
    }


@pytest.fixture(scope="module")
def blob_extension() -> str:
    """The compiled int64s extension; its compiler and header are installed first on a machine without them."""
    if blobagg.library() is None and hostpkgs.can_install():
        hostpkgs.install("sqlite-ext")
        blobagg._library.clear()  # look again now that cc and sqlite3ext.h are there
    path = blobagg.library()
    assert path, "int64s could not be built: install a C compiler and libsqlite3-dev"
    return path


@pytest.mark.parametrize("shape", ["bad values", "clean"])
def test_binary_and_text_aggregates_read_the_same(tmp_path, shape, blob_extension, monkeypatch):
    # The pages reader (pagescan), int64s (the compiled aggregate) and group_concat must give the same columns and
    # the same warnings, bad rows included: the first two are only faster ways to the last one's result.
    path = (
        _bad_values_export(tmp_path)
        if shape == "bad values"
        else write_export(
            tmp_path / "ok.sqlite", Export(kernels=[Kernel(10**15 + i, 10**15 + 2 * i + 1, "k") for i in range(50)])
        )
    )
    results = []
    for pages, blob in ((True, True), (False, True), (False, False)):  # the file's pages, int64s, group_concat
        monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "1" if pages else "0")
        reader = ExportReader(path)
        assert reader.blob or not blob, "the int64s extension could not be built (see the blob_extension fixture)"
        reader.blob = blob
        results.append(
            (
                _columns(reader.kernels(correlation=True)),
                [a.tolist() for a in reader.kernel_durations()],
                _columns(reader.memcpys()),
                _columns(reader.memsets()),
                [a.tolist() for a in reader.launch_calls(np.array([281474976711890]))],
                reader.warnings,
            )
        )
    assert results[0] == results[1] == results[2]
    if shape == "bad values":
        kernels, _, memcpys, *_, warnings = results[0]
        # text/REAL start, end or device: the row is left out; a BLOB name: kept as an unnamed kernel (name 0)
        assert len(kernels["start"]) == 37 and kernels["name"].count(0) == 1 and len(memcpys["start"]) == 18
        assert any("3 of 40 rows of CUPTI_ACTIVITY_KIND_KERNEL" in w for w in warnings)
        assert any("2 of 20 rows of CUPTI_ACTIVITY_KIND_MEMCPY" in w for w in warnings)


def test_without_a_compiler_the_reader_uses_group_concat(tmp_path, monkeypatch):
    from nsyskit.analysis.read import blobagg

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing built there yet
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, no gcc
    monkeypatch.setattr(blobagg, "_library", [])
    monkeypatch.setattr(pagescan, "_loaded", [])  # nor the page reader: no C at all
    monkeypatch.setenv("NSYSKIT_NATIVE_PREBUILT", "0")  # nor the libraries built into the package
    path = write_export(tmp_path / "r.sqlite", Export(kernels=[Kernel(5, 9, "k"), Kernel(10, 20, "k", device=1)]))
    reader = ExportReader(path)
    assert not reader.blob and blobagg.library() is None and pagescan.functions() is None
    assert list(reader.kernels().end) == [9, 20] and list(reader.kernel_durations()[1]) == [4, 10]


def _nvtx_export(tmp_path, null_thread: bool) -> str:
    """NVTX ranges of two processes with their own domains, a domain with no create event, registered and pruned
    strings, integer/REAL/JSON payloads, and starts out of order with ties (nsys writes ranges as they end)."""
    other = THREAD + (1 << 24)  # another process
    ranges = [
        Range(50, 60, "late", payload=7),
        Range(10, 90, "step 0", registered=True),
        Range(10, 20, "ncclAllReduce", payload=4096, domain="NCCL"),
        Range(10, 30, "tie", domain="NCCL", thread=other),
        Range(5, 8, "json", json='{"a": 1}', thread=other),
    ]
    path = write_export(tmp_path / f"nvtx_{null_thread}.sqlite", Export(ranges=ranges))
    con = sqlite3.connect(path)
    rows = [
        (3, 4, 59, None, THREAD, 999_999, 0, None, 2.5),  # a pruned StringId, a REAL payload
        (3, 9, 59, "orphan domain", other, None, 7, None, None),  # domain 7: its create event was cut off
        (1, 2, 59, "no thread", None if null_thread else THREAD, None, 0, None, None),
    ]
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId, uint64Value, doubleValue)"
        " VALUES (?,?,?,?,?,?,?,?,?)",
        rows,
    )
    con.commit()
    con.close()
    return path


def _three_nvtx_reads(path, monkeypatch) -> tuple[list[dict], dict[str, list]]:
    """The NVTX ranges read from the file's pages, with int64s, and with group_concat/row-wise SQL (each as lists),
    and which inner reads ran: _read_pages (taken or None), _read_rows, _fetch_by_rowid (texts through SQLite),
    _created_domains (the domain names from the pages, or None: grouped by SQLite)."""
    from nsyskit.analysis.read import nvtxread

    ran: dict[str, list] = {"pages": [], "row_wise": [], "fetched": [], "domains": []}
    real_rows, real_pages, real_fetch = nvtxread._read_rows, nvtxread._read_pages, nvtxread._fetch_by_rowid
    real_domains = nvtxread._created_domains
    monkeypatch.setattr(nvtxread, "_created_domains", lambda *a: (lambda r: ran["domains"].append(r) or r)(real_domains(*a)))  # fmt: skip
    monkeypatch.setattr(nvtxread, "_read_rows", lambda *a: ran["row_wise"].append(1) or real_rows(*a))
    monkeypatch.setattr(nvtxread, "_read_pages", lambda *a: (lambda r: ran["pages"].append(r is not None) or r)(real_pages(*a)))  # fmt: skip
    monkeypatch.setattr(nvtxread, "_fetch_by_rowid", lambda *a: ran["fetched"].append(a[2]) or real_fetch(*a))
    results = []
    for pages, blob in ((True, True), (False, True), (False, False)):
        monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "1" if pages else "0")
        reader = ExportReader(path)
        reader.blob = blob
        nvtx = reader.nvtx_ranges()
        results.append({field: None if (v := getattr(nvtx, field)) is None else v.tolist() for field in NVTX_FIELDS})
    return results, ran


@pytest.mark.parametrize("null_thread", [False, True])
def test_nvtx_columnar_read_equals_the_row_wise_read(tmp_path, null_thread, blob_extension, monkeypatch):
    # From the file's pages (texts, JSON and REAL payloads too); with int64s from separate narrow scans; without it (or
    # with a thread id that is not an integer) from one row-wise query with SQL joins: all must give the same ranges,
    # in order.
    path = _nvtx_export(tmp_path, null_thread)
    results, ran = _three_nvtx_reads(path, monkeypatch)
    assert ran["pages"] == [not null_thread, False, False]  # the pages served the clean file
    assert ran["fetched"] == []  # its texts and JSON came from the pages too
    assert len(ran["row_wise"]) == (3 if null_thread else 1)  # the columnar read served the clean file without pages
    assert str(results[0]) == str(results[1]) == str(results[2])  # str(): NaN payloads compare equal
    got = results[0]
    assert got["start"] == sorted(got["start"]) and got["text"][:3] == ["no thread", "<string 999999>", "orphan domain"]
    assert got["domain"][2] == "domain 7" and got["payload"][1] == 2.5
    domains = dict(zip(got["text"], got["domain"], strict=True))
    assert domains["ncclAllReduce"] == "NCCL" and domains["tie"] == "domain 1"  # created in the first process only


@pytest.mark.parametrize("nul", [False, True])
def test_nvtx_odd_texts_and_payloads_read_the_same_from_the_pages(tmp_path, nul, blob_extension, monkeypatch):
    # texts that are not UTF-8, a BLOB text, JSON that is not a text, REAL payloads (-0.0, 1e300, a float32 column)
    # and payload columns holding text: the pages read gives what SQLite's reads give. `nul`: a text holding a NUL
    # (the texts are then split per row instead of in one go).
    path = _nvtx_export(tmp_path, False)
    con = sqlite3.connect(path)
    rows = [
        (100, 110, "CAST(x'ff41e282' AS TEXT)", "NULL", "NULL", "NULL", "-0.0", "NULL"),
        (101, 111, "x'c3a9ff'", "x'7b7d'", "NULL", "NULL", "1e300", "7"),
        (102, 112, "'é ok'", "'{\"b\": 2}'", "'not a number'", "NULL", "1.25", "NULL"),
        (103, 113, "'a' || char(0) || 'b'" if nul else "'plain'", "42", "NULL", str(2**62 + 1), "NULL", "NULL"),
        (104, 114, "''", "NULL", "NULL", "NULL", "NULL", "0.1"),
    ]
    for start, end, text, json, u64, i64, double, single in rows:
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, jsonText, uint64Value, "
            f"int64Value, doubleValue, floatValue) VALUES ({start}, {end}, 59, {text}, {THREAD}, 0, {json}, {u64}, "
            f"{i64}, {double}, {single})"
        )
    # domain 9 created three times in one process: SQLite's max(text) names it; domain 10's name is not UTF-8 (`nul`)
    names = ["'b-name'", "'a-name'", "NULL"] + (["CAST(x'ff' AS TEXT)"] if nul else ["'c-name'"])
    for domain, name in zip([9, 9, 9, 10], names, strict=True):
        con.execute(f"INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0, 75, {name}, {THREAD}, {domain})")  # fmt: skip
    for start, domain in ((200, 9), (201, 10)):
        con.execute(f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES ({start}, 300, 59, 'd', {THREAD}, {domain})")  # fmt: skip
    con.commit()
    con.close()
    results, ran = _three_nvtx_reads(path, monkeypatch)
    assert ran["pages"] == [True, False, False] and ran["fetched"] == []
    assert str(results[0]) == str(results[1]) == str(results[2])
    assert results[0]["domain"][-2:] == ["b-name", "\ufffd" if nul else "c-name"]
    assert (ran["domains"][0] is None) == nul  # named from the pages unless a name is not UTF-8
    got = {field: values[-7:-2] for field, values in results[0].items() if values is not None}
    assert got["text"] == ["\ufffdA\ufffd", "é\ufffd", "é ok", "a\x00b" if nul else "plain", ""]
    assert got["json"] == [None, None, '{"b": 2}', "42", None]  # a BLOB is not kept; 42 is stored as TEXT (affinity)
    assert str(got["payload"]) == str([0.0, 1e300, 1.25, float(2**62 + 1), 0.1])


@pytest.mark.parametrize("in_pages", [True, False])
def test_nvtx_payload_blobs_decode_the_same_on_every_read_path(tmp_path, blob_extension, monkeypatch, in_pages):
    # NCCL 2.28 payloads as binaryData (raw bytes in a TEXT column, as nsys writes them): the pages read decodes the
    # blobs where they lie in the file (else, `in_pages` False, SQLite fetches the rows holding one); the SQL reads
    # select them; every path decodes the same sizes and communicators.
    from nccl_payloads import COMMS, nccl_export, planted_calls

    from nsyskit.analysis.read import payloadblob

    if not in_pages:
        monkeypatch.setattr(payloadblob, "paged_blobs", lambda *a: None)
    path = write_export(tmp_path / "blobs.sqlite", nccl_export("2.28", "blob"))
    results, ran = _three_nvtx_reads(path, monkeypatch)
    assert ran["pages"] == [True, False, False] and len(ran["fetched"]) == (0 if in_pages else 1)
    assert str(results[0]) == str(results[1]) == str(results[2])
    calls = planted_calls()
    got = results[0]
    assert got["payload"][2:] == [float(c.size) for c in calls]
    assert got["nranks"][:2] == list(COMMS.values()) and set(got["nranks"][2:]) == {0}  # only the inits state it
    assert [c & (2**64 - 1) for c in got["comm"][2:]] == [c.comm for c in calls]


def _nvtx_sources(tmp_path):
    """The real exports with NVTX ranges and the two bench makers' files (small)."""
    import sys

    from real_exports import NAMES, decompress

    sys.path[:0] = [str(Path(__file__).resolve().parents[3] / "bench")]
    from realistic_export import make_realistic_rank
    from synthetic_export import make_rank

    files = [decompress(name, tmp_path) for name in NAMES]
    files += [make_rank(tmp_path / "synthetic.sqlite", 0, 3000), make_realistic_rank(tmp_path / "realistic.sqlite", 3000)]
    return [f for f in files if "NVTX_EVENTS" in {n for (n,) in sqlite3.connect(f).execute("SELECT name FROM sqlite_master")}]


def test_nvtx_pages_read_equals_the_sql_reads_on_real_and_bench_exports(tmp_path, blob_extension, monkeypatch):
    files = _nvtx_sources(tmp_path)
    assert len(files) >= 6  # 4 real exports with NVTX ranges (one with domains, one with registered strings), 2 bench
    for path in files:
        results, ran = _three_nvtx_reads(path, monkeypatch)
        assert ran["pages"] == [True, False, False] and ran["fetched"] == [], path.name  # taken, texts included
        assert None not in ran["domains"], path.name  # the domains too
        assert len(results[0]["start"]) > 0 and str(results[0]) == str(results[1]) == str(results[2]), path.name


def test_a_kernel_whose_process_is_not_an_integer_is_kept_with_pid_0(tmp_path, blob_extension):
    path = write_export(tmp_path / "pid.sqlite", Export(kernels=[Kernel(i, i + 5, "k") for i in range(0, 40, 10)]))
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE start = 10")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = 'x' WHERE start = 20")
    con.commit()
    con.close()
    results = []
    for blob in (True, False):
        reader = ExportReader(path)
        reader.blob = blob
        results.append(_columns(reader.kernels(with_pid=True)))
    assert results[0] == results[1] and results[0]["start"] == [0, 10, 20, 30]
    assert results[0]["pid"][1:3] == [0, 0] and results[0]["pid"][0] == results[0]["pid"][3] != 0


def test_int64s_into_never_writes_past_its_buffer_nor_runs_from_a_view(tmp_path, blob_extension):
    # int64s_into writes into memory it is given: more rows than the bound must fail (None: the caller reads another
    # way), and a view in a file being read must not be able to call it at all (SQLITE_DIRECTONLY).
    from nsyskit.analysis.read import sqlitefile

    path = write_export(tmp_path / "k.sqlite", Export(kernels=[Kernel(i, i + 1, "k") for i in range(10)]))
    con = sqlite3.connect(path)
    con.execute("CREATE VIEW sneaky AS SELECT int64s_into(1, 1000000, start) AS x FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    reader = ExportReader(path)
    assert reader.blob and reader.bound("CUPTI_ACTIVITY_KIND_KERNEL") == 10
    table, exprs = "CUPTI_ACTIVITY_KIND_KERNEL", {"start": "start", "end": "end"}
    assert sqlitefile.packed_scan(reader.query, table, exprs, blob=True, bound=9) is None
    read = sqlitefile.packed_scan(reader.query, table, exprs, blob=True, bound=10)
    assert read["start"].tolist() == list(range(10)) and read["end"].tolist() == list(range(1, 11))
    with pytest.raises(sqlitefile.sqlite3.OperationalError, match="unsafe use of int64s_into"):
        reader.con.execute("SELECT x FROM sneaky").fetchall()


def test_a_sparse_rowid_range_reads_through_the_blob_not_a_huge_buffer(tmp_path, blob_extension, monkeypatch):
    # rows_bound is max(rowid) - min(rowid) + 1: a table with a rowid far away must not make a buffer that big.
    monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "0")  # the SQLite read is the one under test
    path = write_export(tmp_path / "sparse.sqlite", Export(kernels=[Kernel(i, i + 3, "k") for i in range(5)]))
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 1 << 40 WHERE start = 4")
    con.commit()
    con.close()
    reader = ExportReader(path)
    assert reader.bound("CUPTI_ACTIVITY_KIND_KERNEL") == (1 << 40)
    kernels = reader.kernels()
    assert kernels.start.tolist() == [0, 1, 2, 3, 4] and (kernels.end - kernels.start).tolist() == [3] * 5


def test_an_end_minus_start_beyond_int64_is_found_with_or_without_the_durations():
    """The page read keeps start and end (keep=False): it still finds a difference that overflows int64 (then the
    read goes through SQLite), and computes no differences when no value is negative."""
    from nsyskit.analysis.read import sqlitefile

    start, end = np.asarray([-(2**62) * 2, 5]), np.asarray([2**62, 9])  # 2^62 + 2^63 overflows
    assert sqlitefile.span(start, end) is None and sqlitefile.span(start, end, keep=False) is None
    fine = np.asarray([-(2**62), 5]), np.asarray([2**62 - 1, 9])
    assert sqlitefile.span(*fine).tolist() == [2**63 - 1, 4] and sqlitefile.span(*fine, keep=False) is not None
    assert len(sqlitefile.span(np.asarray([1, 5]), np.asarray([3, 9]), keep=False)) == 0


def test_nvtx_pages_read_without_page_texts_fetches_them_through_sqlite(tmp_path, blob_extension, monkeypatch):
    """Texts come in the pages' one pass; where the pages cannot give texts (a UTF-16 file) the ranges are still read
    from the pages and their texts fetched through SQLite: the same ranges as the SQL reads."""
    from nsyskit.analysis.read import pagescan

    monkeypatch.setattr(pagescan, "UTF8_ENCODINGS", ())  # as a UTF-16 file: no text from the pages
    path = _nvtx_export(tmp_path, False)
    results, ran = _three_nvtx_reads(path, monkeypatch)
    assert ran["pages"] == [True, False, False] and ran["fetched"]
    assert len(results[0]["start"]) > 0 and str(results[0]) == str(results[1]) == str(results[2])
