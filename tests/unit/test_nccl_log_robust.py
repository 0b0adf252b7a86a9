"""nccl-log on damaged input, odd line endings, bounded facts, its arguments and its HTML page."""

from __future__ import annotations

import gzip

import pytest
from nccl_real import DATA, GARBLED, KIT, MB, NEMO, RANK_A, RANK_B, SRUN  # tests/unit is on sys.path

from nsyskit.errors import NcclLogError
from nsyskit.nccllog import Window, analyze, parse_range, resolve_logs
from nsyskit.nccllog.render.render import human_bytes, render_page
from nsyskit.nccllog.scan import blocks as blocks_module
from nsyskit.nccllog.scan.facts import MAX_DISTINCT, Facts

# --- garbled input is counted and reported, never fatal --------------------------------------------------------


def test_garbled_lines_are_counted_with_examples():
    report = analyze([GARBLED])
    # good: 1024 fp32, 1024 fp32 cut after the datatype, 1024 fp32 (first half of two merged lines), the syslog-
    # prefixed 1024 fp32 (its NCCL part read where it starts), 512 and 256 fp32
    assert report.per_op == [
        {
            "op": "AllReduce",
            "calls": 6,
            "min_bytes": 1024,
            "avg_bytes": 19456 / 6,
            "max_bytes": 4096,
            "total_bytes": 19456,
        }
    ]
    assert report.lines["garbled_collective"] == 1  # 'opCount 5 sendbuff 0x7f00000' (cut short)
    assert report.lines["unrecognized_nccl"] == 1  # the second half of the merged line
    assert report.unknown_datatypes == [{"op": "AllReduce", "datatype": 99, "calls": 1}]
    assert [e.split(": ", 1)[0] for e in report.examples["unrecognized"]] == [f"{GARBLED}:3"]
    assert report.lines["total"] == 11


def test_overlong_line_is_dropped_not_buffered(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks_module, "MAX_LINE", 1000)
    log = tmp_path / "long.log"
    good = GARBLED.read_text(errors="replace").splitlines()[0] + "\n"
    log.write_text(good + "x" * 5000 + "\n" + good)
    report = analyze([log], block_size=256)
    assert report.lines["overlong"] >= 1 and report.totals["sized_calls"] == 2


def test_truncated_gzip_is_a_warning(tmp_path):
    log = tmp_path / "cut.log.gz"
    log.write_bytes(gzip.compress(NEMO.read_bytes())[:-40])
    report = analyze([log])
    assert any("read stopped early" in w for w in report.warnings)
    assert report.totals["calls"] > 0


@pytest.mark.parametrize(
    "prefix",
    ["", "[2025-01-02 03:04:05] ", "[2025-01-02 03:04:05.123456] ", "2025-01-02 03:04:05 ", "1735787045 ", "1735787045.123 ",
     "0: ", "  12: ", "[1,0]<stdout>:", "[1,12]<stderr>: ", "[default0]:", "[rank3]: ", "  | 2025-05-16T16:39:55.218-07:00 | ",
     "0: [2025-01-02 03:04:05] "],
)  # fmt: skip
def test_line_prefixes(tmp_path, prefix):
    log = tmp_path / "p.log"
    log.write_text(
        f"{prefix}8h200-2:14630:14630 [3] NCCL INFO AllGather: opCount 1 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 9 op 0 root 0 comm 0x3 [nranks=8] stream 0x4\n"
        f"{prefix}8h200-2:14630:14686 [3] NCCL INFO Using network IB\n"
    )  # the host name starts with a digit: a prefix must not eat it
    report = analyze([log])
    assert [r["gpu"] for r in report.histogram_per_gpu] == ["8h200-2[3]"] and report.init["network"] == "IB"
    assert report.lines["unrecognized_nccl"] == 0


def test_windows_line_endings(tmp_path):
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(NEMO.read_bytes().replace(b"\n", b"\r\n"))
    report, reference = analyze([crlf]).to_dict(), analyze([NEMO]).to_dict()
    for key in ("per_op", "histogram_per_gpu", "aggregate", "tuning", "init", "steps"):
        assert report[key] == reference[key] or key == "steps", key
    assert report["steps"].pop("jobs")[0]["job"] == str(crlf) and reference["steps"].pop("jobs")[0]["job"] == str(NEMO)
    assert report["steps"] == reference["steps"]


def test_results_do_not_depend_on_the_block_size():
    for paths, window in (
        ([NEMO], Window()),
        ([NEMO], Window(steps=(2, 3))),
        ([SRUN], Window(lines=(10, 30))),
        ([RANK_A, RANK_B], Window()),
        ([GARBLED], Window()),
        ([KIT], Window(steps=(1, 2))),
    ):
        reference = analyze(paths, window).to_dict()
        for block_size in (7, 64, 301, 4096):
            other = analyze(paths, window, block_size=block_size).to_dict()
            reference["seconds"] = other["seconds"] = 0
            assert other == reference, (paths, window, block_size)


def test_facts_stay_bounded():
    facts = Facts()
    for i in range(500):
        facts.add(f"Using network Net{i}")
        facts.add(f"NCCL_X{i} set by environment to {i}")
    assert len(facts.networks) == MAX_DISTINCT and len(facts.env) == MAX_DISTINCT


# --- arguments ---------------------------------------------------------------------------------------------------


def test_resolve_logs_files_globs_folders_and_errors(tmp_path):
    assert resolve_logs([f"{NEMO},{KIT}"]) == [NEMO, KIT]
    assert resolve_logs([str(DATA / "debugfile.*")]) == [RANK_A, RANK_B]
    run = tmp_path / "run-1"
    (run / "rank0").mkdir(parents=True)
    (run / "rank0" / "stdout.log").write_text("x\n")
    (run / "nccl-gpu1-501.txt").write_text("y\n")
    (run / "rank0.nsys-rep").write_text("z")
    (run / "nccl-log.json").write_text("{}")
    assert resolve_logs([str(run)]) == [run / "nccl-gpu1-501.txt", run / "rank0" / "stdout.log"]
    for argument, says in (
        (str(tmp_path / "none.log"), "no such file"),
        (str(tmp_path / "*.nothing"), "matches no file"),
        ("", "no log given"),
    ):
        with pytest.raises(NcclLogError, match=says):
            resolve_logs([argument])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NcclLogError, match="no log files"):
        resolve_logs([str(tmp_path / "empty")])


def test_parse_range():
    assert (
        parse_range("--steps", "45-50") == (45, 50)
        and parse_range("--steps", "7") == (7, 7)
        and parse_range("--steps", None) is None
    )
    for bad in ("a-b", "5-3", "-1-2", "1-"):
        with pytest.raises(NcclLogError) as caught:
            parse_range("--steps", bad)
        assert caught.value.one_line().startswith(f"--steps {bad!r}") and "fix:" in caught.value.one_line()


# --- HTML section ------------------------------------------------------------------------------------------------


def test_html_page_is_self_contained_and_escaped(tmp_path):
    log = tmp_path / "nemo.log"
    log.write_text(
        NEMO.read_text() + "nodeA:101:101 [0] NCCL INFO NCCL_IB_HCA set by environment to <script>x</script>\n"
    )
    page = render_page(analyze([log]))
    assert "NCCL_IB_HCA=&lt;script&gt;x&lt;/script&gt;" in page
    assert page.startswith("<!doctype html>") and '<section id="nccl-log">' in page and "<style>" in page
    for heading in (
        "Init facts",
        "Per-op message sizes",
        "histogram per op",
        "histogram per GPU",
        "Aggregate",
        "Algorithms and protocols",
        "Steps",
    ):
        assert heading in page
    assert "<td>nodeA[1]</td><td>3</td><td>5</td><td>1</td><td>1</td><td>10</td>" in page
    assert "<td>2.28.9+cuda13.0</td>" in page and "<script" not in page


def test_human_bytes():
    assert [human_bytes(n) for n in (None, 8, 4000, 65536, 1.5 * MB, 64 * MB, 3 << 30)] == [
        "-",
        "8 B",
        "3.91 KiB",
        "64.0 KiB",
        "1.50 MiB",
        "64.0 MiB",
        "3.00 GiB",
    ]
