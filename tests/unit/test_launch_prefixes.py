"""One launcher-prefix rule for both readers: srun labels padded with spaces or zeros and the other launchers'
prefixes, alone or stacked, read the same in nccl-tests outputs and NCCL logs (C and regex paths), both readers cut
exactly the same bytes of each, a number is a prefix before an NCCL line but the table's before a row; every real
nccl-tests output reads to the same rows behind srun's padded labels, and both readers take '-' for standard input."""

from __future__ import annotations

import gzip
import random
import re
import subprocess
import sys

import pytest

from nsyskit import launchprefix
from nsyskit.nccllog import analyze
from nsyskit.nccllog.scan import fastscan
from nsyskit.nccllog.scan.lines import clean_source
from nsyskit.nccltests.table import read_buffer
from tests.fixtures.realdata import REAL_DATA, ROOT, need
from tests.unit.nccl_real import coll, gpus
from tests.unit.nccl_tests_variants import INFO, Output, prefixed, write_test

# Every launcher prefix both readers accept, in the forms launchers print them.
FORMS = {
    "srun --label": "3: ",
    "srun --label, 10+ tasks": " 3: ",
    "srun --label, 100+ tasks": "  3: ",
    "srun --label, zero-padded": "03: ",
    "openmpi --tag-output": "[1,0]<stdout>:",
    "skypilot over openmpi": "(head, rank=0, pid=3808) [1,0]<stdout>:",
    "ray": "(RayTrainWorker pid=2211, ip=10.0.0.7) ",
    "kubectl logs --prefix": "[pod/nccl-launcher-x7/mpi] ",
    "kubectl logs --timestamps": "2025-03-01T10:00:00.123456789Z ",
    "kubectl timestamps over padded srun": "2025-03-04T05:06:07Z  3: ",
    "intel mpi -prepend-rank": "[0] ",
    "NCCL_DEBUG_TIMESTAMP_FORMAT, bracketed": "[2025-01-02 03:04:05] ",
    "torchrun --tee": "[default0]:",
    "Loki / Fluent Bit (CRI)": "2025-03-04T05:06:07.000000001Z stdout F ",
    "CloudWatch console copy": "  | 2024-12-04T07:19:43.478Z | ",
    "Python logging": "2025-01-02 10:11:12,851 - INFO - ",
    "Python logging with a logger": "2025-01-02 10:11:12,851 - torch.distributed - INFO - ",
    "kubectl timestamps, offset, over srun": "2025-03-04T05:06:07.5+05:30 12: ",
    "NCCL_DEBUG_TIMESTAMP_FORMAT with microseconds": "[2025-01-02 03:04:05.123456] ",
    "NCCL_DEBUG_TIMESTAMP_FORMAT as the kit sets it": "[2026-11-29 02:01:41.123456 +0000] ",
    "srun --label over openmpi": "3: [1,3]<stdout>:",
    "PyTorch's rank tag": "[rank3]: ",
}
LABELS = {"space-padded": " 3: ", "two-space-padded": "  3: ", "zero-padded": "03: "}
TESTS_DIR = REAL_DATA / "nccl-tests"


def _rows(result) -> list[tuple]:
    """What a reader gives a user of each test: its rows' sizes and busbw, its average, and the problems found."""
    tests = [
        (test.op, test.avg_busbw, [(r.size, r.out_of_place.busbw, r.in_place and r.in_place.busbw) for r in test.rows])
        for test in result.tests
    ]
    problems = [(p.line, p.message) for p in result.all_failures() + result.all_warnings()]
    return [tests, problems]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("native", [True, False], ids=["c", "regex"])
def test_nccl_tests_reads_every_form(form, native):
    output = Output()
    write_test(output, layout="L1-redop", between=INFO)
    plain = read_buffer(output.text().encode(), "plain.log", native)
    assert plain.tests and plain.tests[0].rows
    labelled = read_buffer(prefixed(output.text(), FORMS[form]).encode(), "labelled.log", native)
    assert _rows(labelled) == _rows(plain)


def _nccl_log(tmp_path, rng: random.Random, prefix) -> tuple[object, dict]:
    """A log of 2 hosts x 2 GPUs, each line behind PREFIX() (a fresh one per line), read; and the calls expected."""
    lines, expected = [], {}
    for host in ("gpu-1", "node-7"):
        for dev in range(2):
            calls = rng.randrange(1, 5)
            expected[f"{host}[{dev}]"] = calls
            lines.append(f"{prefix()}{host}:{100 + dev}:{200 + dev} [{dev}] NCCL INFO Using network IB")
            lines += [prefix() + coll(host, 100 + dev, dev, "AllReduce", 1024, 7, "0xc1", 4, k) for k in range(calls)]
    log = tmp_path / "labelled.log"
    log.write_text("\n".join(lines) + "\n")
    return analyze([log]), expected


@pytest.mark.parametrize("form", sorted(FORMS))
def test_nccl_log_reads_every_form(tmp_path, form):
    report, expected = _nccl_log(tmp_path, random.Random(form), lambda: FORMS[form])
    assert gpus(report) == expected and report.init["network"] == "IB"
    assert report.lines["unrecognized_nccl"] == 0


ROW = b"1024  256  float  sum  -1  20.1  0.05  0.10  0  19.8  0.05  0.10  0"
SOURCE = b"gpu-1:100:200 [0]"


@pytest.mark.parametrize("form", sorted(FORMS))
def test_both_readers_cut_exactly_the_form(form):
    """The one rule: before a table row and before an NCCL line's source, each reader cuts the whole form, no more."""
    raw = FORMS[form].encode()
    assert launchprefix.strip(raw + ROW) == ROW
    assert clean_source(b"\n" + raw + SOURCE) == SOURCE


def _stacks(rng: random.Random):
    """A fresh stack of 1-3 forms each call (wrappers over launchers: kubectl over srun over OpenMPI, ...)."""
    forms = sorted(FORMS.values())
    return lambda: "".join(rng.sample(forms, rng.randrange(1, 4)))


@pytest.mark.parametrize("seed", range(3))
def test_stacked_forms_read_the_same_in_both_readers_and_paths(tmp_path, monkeypatch, seed):
    output = Output()
    write_test(output, layout="L1-redop", between=INFO)
    plain = read_buffer(output.text().encode(), "plain.log", True)
    stack = _stacks(random.Random(seed))
    stacked = "".join(stack() + line + "\n" for line in output.text().splitlines()).encode()
    assert _rows(read_buffer(stacked, "stacked.log", True)) == _rows(read_buffer(stacked, "stacked.log", False))
    assert _rows(read_buffer(stacked, "stacked.log", True)) == _rows(plain)
    for native in ("1", "0"):  # linescan.c, then the regex alone
        monkeypatch.setenv(fastscan.DISABLE_VARIABLE, native)
        monkeypatch.setattr(fastscan, "_loaded", [])
        monkeypatch.setattr(fastscan, "_readers", [])
        report, expected = _nccl_log(tmp_path, random.Random(seed), _stacks(random.Random(seed)))
        assert gpus(report) == expected and report.lines["unrecognized_nccl"] == 0, native


def test_a_number_is_a_prefix_before_an_nccl_line_and_the_tables_before_a_row():
    """The same tokens, another context: epoch seconds before an NCCL line are a prefix; in a nccl-tests output a
    number that ends there is a row's (its size, or a piece of a row cut by other output), never cut."""
    for number in (b"1735787045.123456 ", b"1735787045 ", b"  20.00 | "):
        assert clean_source(b"\n" + number + SOURCE) == SOURCE
        assert launchprefix.strip(number + ROW) == number.lstrip(b" ") + ROW
    assert launchprefix.strip(b"    20.00    0.00    0.00      0") == b"20.00    0.00    0.00      0"


def test_every_real_table_number_stays_in_its_line():
    need(TESTS_DIR)
    numbered = 0
    for path in _real_outputs():
        for line in path.read_bytes().splitlines():
            number = re.match(rb"[ \t|]*+(\d+(?:\.\d+)?)[ \t]", line)
            if number:
                numbered += 1
                assert launchprefix.strip(line).startswith(number.group(1)), (path.name, line)
    assert numbered > 1000  # the rows and pieces of rows of the corpus that no launcher labelled


def _real_outputs() -> list:
    return sorted(TESTS_DIR.glob("*.log")) if TESTS_DIR.is_dir() else []


@pytest.mark.parametrize("native", [True, False], ids=["c", "regex"])
@pytest.mark.parametrize("label", sorted(LABELS))
def test_every_real_output_reads_the_same_behind_padded_srun_labels(label, native):
    need(TESTS_DIR)
    outputs = _real_outputs()
    assert len(outputs) >= 40
    tables = 0
    for path in outputs:
        text = path.read_bytes()
        plain = read_buffer(text, str(path), native)
        tables += bool(plain.tests)
        labelled = b"".join(LABELS[label].encode() + line for line in text.splitlines(keepends=True))
        assert _rows(read_buffer(labelled, str(path), native)) == _rows(plain), path.name
    assert tables >= 35  # most of the corpus holds tables: the comparison is about rows, not empty results


def _run(task: str, stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsyskit", task, "-", "--json"], input=stdin, cwd=ROOT,
                          capture_output=True, timeout=120)  # fmt: skip


def test_nccl_tests_reads_standard_input():
    path = need(TESTS_DIR / "aws-samples_awsome-distributed-training_nccl-tests-README-block-p5-srun.log")
    text = path.read_bytes().replace(b"\n0: ", b"\n 3: ")
    for piped in (text, gzip.compress(text)):
        done = _run("nccl-tests", piped)
        assert done.returncode == 0, done.stderr.decode()
        assert b'"size": 1073741824' in done.stdout and b"436.95" in done.stdout


def test_nccl_log_reads_standard_input():
    path = need(REAL_DATA / "nccl-logs" / "17-srun-l-fsdp-eks-oldtuning.log")
    from_file = subprocess.run([sys.executable, "-m", "nsyskit", "nccl-log", str(path), "--json"], cwd=ROOT,
                               capture_output=True, timeout=120)  # fmt: skip
    piped = _run("nccl-log", path.read_bytes())
    assert piped.returncode == 0 == from_file.returncode, piped.stderr.decode()
    import json

    read, expected = json.loads(piped.stdout), json.loads(from_file.stdout)
    assert read["per_op"] == expected["per_op"] and read["per_op"]
