"""Every row of every nccl-tests table in ../shared/real-data and in the kit's own recordings (tests/data/real) reads
back equal to its text (size, both busbw, the average line), and the files without a table say so in one line.

The expected values come from the text by a different route than the reader's: each line is cleaned of
launcher tags and NCCL INFO text, split on white space, and a row's pieces that other output cut off are
joined from the next lines' tokens; the numbers are then compared as text tokens.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit.nccltests import read_file
from tests.fixtures.realdata import REAL_DATA, ROOT, need

TESTS_DIR = REAL_DATA / "nccl-tests"
LOGS_DIR = REAL_DATA / "nccl-logs"
KIT_DIR = ROOT / "tests" / "data" / "real" / "nccl-tests"  # recorded by the kit on a real GPU (its README says how)
OPENMPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
LEADING = re.compile(r"^(?:\(\w+, rank=\d+, pid=\d+\) |\d+: |\w+\(\), \w+\.cu:\d+, )+")
INFO_TAIL = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN).*$")
AVERAGE = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)")


def _files(folder: Path, pattern: str = "*.log") -> list[Path]:
    return sorted(folder.glob(pattern)) if folder.is_dir() else []


def _tokens(line: str) -> list[str]:
    return INFO_TAIL.sub("", LEADING.sub("", OPENMPI_TAG.sub("", line))).split()


def _is_head(tokens: list[str]) -> bool:
    return len(tokens) >= 3 and tokens[0].isdigit() and tokens[1].isdigit() and tokens[2][:1].isalpha()


def _is_piece(tokens: list[str]) -> bool:
    return bool(tokens) and all(re.fullmatch(r"[-+.\deE]+|N/A", t) for t in tokens)


def expected_rows(text: str) -> list[tuple[int, str, str, str]]:
    """(line, size, out-of-place busbw, in-place busbw) tokens of every row, from the text alone."""
    lines = text.splitlines()
    head_columns = None  # from the last column header: how many columns come before 'time'
    rows = []
    for number, line in enumerate(lines, 1):
        tokens = _tokens(line)
        bare = [t for t in tokens if t != "#"] if tokens[:1] == ["#"] or line.lstrip().startswith("size") else []
        if bare[:2] == ["size", "count"] and "busbw" in bare:
            head_columns = bare.index("time")
            continue
        if not _is_head(tokens):
            continue
        width = (head_columns or len(tokens) - 8) + 8
        following = iter(lines[number:])
        while len(tokens) < width:  # the row's other pieces, on the next lines that hold only numbers
            more = _tokens(next(following))
            if _is_piece(more):
                tokens += more
        head = width - 8
        rows.append((number, tokens[0], tokens[head + 2], tokens[head + 6]))
    return rows


def real_outputs() -> list[Path]:
    return _files(TESTS_DIR) + _files(LOGS_DIR) + _files(KIT_DIR, "*.out")


@pytest.mark.parametrize("path", real_outputs(), ids=lambda p: p.name[:60])
def test_every_row_and_average_reads_back_as_its_text(path):
    need(path)
    text = path.read_text(errors="replace")
    result = read_file(path)
    read = sorted(
        (row.line, row.size, row.out_of_place.busbw, row.in_place.busbw if row.in_place else None)
        for test in result.tests
        for row in test.rows
    )
    expected = [(line, int(size), float(out), float(inplace)) for line, size, out, inplace in expected_rows(text)]
    assert read == expected
    averages = sorted([(t.avg_line, t.avg_busbw) for t in result.tests if t.avg_line] + result.stray_avg)
    assert [value for _, value in averages] == [float(v) for v in AVERAGE.findall(text)]


def test_the_corpus_holds_the_layouts_the_reader_is_for():
    """The acceptance above covers every header generation and prefix kind (else it proves less than it says)."""
    need(TESTS_DIR)
    layouts = {test.layout + (test.wrong_column,) for path in real_outputs() for test in read_file(path).tests}
    assert ("size", "count", "type", "redop", "root", "#wrong") in layouts
    assert ("size", "count", "type", "error") in layouts  # 2.0-era all_gather: no redop, no root
    assert ("size", "count", "type", "root", "error") in layouts  # 2.0-era broadcast
    assert ("size", "count", "type", "redop", "error") in layouts
    rows = sum(len(t.rows) for path in real_outputs() for t in read_file(path).tests)
    assert rows > 1000


NO_TABLE = [
    "argonne-lcf_alcf-nccl-tests_polaris-n128-all_gather-launchfail.log",
    "argonne-lcf_alcf-nccl-tests_sophia-n2g8-all_reduce-failed.log",
    "sparticlesteve_podman-nccl-testing_podman-nccl-tests-30743802.log",
    "xxrjun_nccl-tests-cluster_pairwise-N2-G8-failed.log",
    "google_dranet_gke-rdma-doc-block-b200-4x4-truncated.log",
]


def test_the_files_without_a_table_are_those_with_no_row_in_their_text():
    need(TESTS_DIR)
    without = sorted(p.name for p in _files(TESTS_DIR) if not expected_rows(p.read_text(errors="replace")))
    assert without == sorted(NO_TABLE)


@pytest.mark.parametrize("name", NO_TABLE)
def test_a_file_without_a_table_gives_one_line_naming_it_and_a_nonzero_exit(name):
    path = need(TESTS_DIR / name)
    done = subprocess.run([sys.executable, "-m", "nsyskit", "nccl-tests", str(path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and name in lines[0], done.stderr
    assert done.stdout.strip() == ""


def _sources() -> list[dict[str, str]]:
    import csv

    with open(need(TESTS_DIR / "SOURCES.tsv")) as stream:
        return list(csv.DictReader(stream, delimiter="\t"))


# Where SOURCES.tsv's summary and the file's own text disagree, the text wins (and says why here).
SOURCES_SAYS_OTHERWISE = {
    # "all_gather (2 runs)": its second command line (line 142) runs ./build/all_reduce_perf, and that table follows
    "ssbandjl_nccl-tests_log-nccl_test_for_u20_log.log": {"all_gather", "all_reduce"},
}


def test_every_test_is_the_operation_its_source_says():
    """The op of each test (banner, command line, file name, or inferred from the rows) against SOURCES.tsv's
    'collectives' column, written by whoever collected the files, not by this reader."""
    need(TESTS_DIR)
    checked = 0
    for source in _sources():
        ops = {test.op for test in read_file(TESTS_DIR / source["filename"]).tests}
        if not ops:
            continue
        said = {re.sub(r"\s*\(.*", "", part).strip() for part in source["collectives"].split(",")}
        assert ops == SOURCES_SAYS_OTHERWISE.get(source["filename"], said), source["filename"]
        checked += 1
    assert checked >= 35


def test_every_rank_count_is_the_one_its_source_says():
    need(TESTS_DIR)
    checked = 0
    for source in _sources():
        ranks = [t.ranks for t in read_file(TESTS_DIR / source["filename"]).tests if t.ranks]
        said = re.match(r"(\d+) ", source["ranks"])
        if ranks and said and "its own 1-rank job" not in source["ranks"]:
            assert max(ranks) == int(said.group(1)), source["filename"]
            checked += 1
    assert checked >= 30
