"""The compiled row reader (native/rowscan.c) gives exactly what the regex path gives: the same tests, rows, line
numbers, failures and warnings, on every real output, every written variant and damaged rows; without it (no
compiler, NSYSKIT_NATIVE_ROWSCAN=0) the regex path runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit import hostpkgs
from nsyskit.native import rowscan
from nsyskit.nccltests.table import read_buffer
from tests.fixtures.realdata import REAL_DATA, need
from tests.unit.nccl_tests_variants import HEAD_COLUMNS, INFO, Output, measurements, prefixed, write_test
from tests.unit.test_nccl_tests_formats import PREFIXES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled():
    """The compiled helper; the C compiler is installed first on a machine without one (host step sqlite-ext)."""
    if rowscan.functions() is None and hostpkgs.can_install():
        hostpkgs.install("sqlite-ext")
        rowscan._loaded.clear()
    assert rowscan.functions() is not None, "rowscan.c could not be built: install a C compiler"


def _both(buffer: bytes) -> tuple[dict, dict]:
    """Both paths' results as JSON-ready dicts, NaN made comparable (nan != nan)."""

    def whole(result) -> dict:
        return json.loads(json.dumps(result.to_dict()).replace("NaN", '"NaN"')) | {"all_failures": [str(p) for p in result.all_failures()],
                                   "all_warnings": [str(p) for p in result.all_warnings()],
                                   "empty_headers": result.empty_headers}  # fmt: skip

    return whole(read_buffer(buffer, "x.log", native=True)), whole(read_buffer(buffer, "x.log", native=False))


def real_outputs() -> list[Path]:
    return [p for folder in ("nccl-tests", "nccl-logs") for p in sorted((REAL_DATA / folder).glob("*.log"))]


@pytest.mark.parametrize("path", real_outputs(), ids=lambda p: p.name[:60])
def test_the_same_on_every_real_output(compiled, path):
    native, regex = _both(need(path).read_bytes())
    assert native == regex


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
@pytest.mark.parametrize("layout", sorted(HEAD_COLUMNS))
def test_the_same_on_every_layout_and_prefix(compiled, layout, prefix):
    output = Output()
    write_test(output, layout=layout, between=INFO)
    write_test(output, "sendrecv", layout=layout, glued=INFO)
    native, regex = _both(prefixed(output.text(), PREFIXES[prefix]).encode())
    assert native == regex
    assert sum(len(t["rows"]) for t in native["tests"]) == 24


DAMAGED = [
    "           8             2     float     sum      -1    32.07    0.00    0.00      0    33.05    0.00    0.00      0 \r\r",
    "           8             2     float     sum      -1    32.07    0.00    0.00      0    33.05    0.00    0.00      0*",
    "           8             2     float     sum      -1    32.07    nan    -nan    nan*    inf    1e+06    0.00    N/A",
    "           8             2     float     sum      -1    32.07    0.00    0.00      0    33.05    0.00    0.00",
    "           8             2     float     sum      -1    32.07    0.00    0.00      0    33.05    0.00    0.00  0  0",
    "   123456789012345678901   2     float     sum      -1    32.07    0.00    0.00      0    33.05    0.00    0.00      0",
    "           8             2     float_with_a_long_name_here  sum  -1   1.0   2.0   3.0   0   1.0   2.0   3.0   0",
    "           8             2     float     sum      -1    32.07    0.00    0.00      0    33.05    .5    5.    2e-07",
    "           8             2     float     sum      -1    32.07    0.00    0.00      0    33.05    .    0.00      0",
    "           8             2     float     sum      -1    32.07  0.00  0.00  0  33.05  1e  0.00  0",
    "8 2 float 16195 1.0 2.0 0e+00 16196 1.0 2.0 0e+00",
    "0: [1,0]<stdout>:(x) 8 2 float sum -1 1 2 3 0 4 5 6 0",
    "12: 2025-03-01T10:00:00.123+01:00 8 2 float sum -1 1 2 3 0 4 5 6 0",
    "[pod/a/b] [3] 8 2 float sum -1 1 2 3 0 4 5 6 0",
    "0: host: Test NCCL failure common.cu:1 'x'",
    "8 2 float sum -1 1 2 3 0mew0:1:1 [0] NCCL INFO x",
    "   4 5 6 0",
]


def test_the_same_on_damaged_rows(compiled):
    output = Output()
    write_test(output, average=None)
    at = output.row_lines[3]
    for line in DAMAGED:
        lines = output.lines[:at] + [line] + output.lines[at:]
        native, regex = _both(("\n".join(lines) + "\n").encode())
        assert native == regex, line


def test_more_distinct_texts_than_the_c_table_holds_fall_back_to_the_regex(compiled):
    output = Output()
    rows = measurements(sizes=3)
    write_test(output, rows=rows)
    text = output.text()
    lines = [f"{8 * (i + 1):12d}  {2 * (i + 1):12d}  {'t' + str(i):>8}     sum      -1   1.0   2.0   3.0   0   1.0   2.0   3.0   0"
             for i in range(300)]  # fmt: skip
    buffer = text.replace("# Out of bounds", "\n".join(lines) + "\n# Out of bounds", 1).encode()
    assert rowscan.scan_rows(buffer) is None
    native, regex = _both(buffer)
    assert native == regex and len(native["tests"][0]["rows"]) == 303


def test_without_the_helper_the_regex_path_runs(tmp_path):
    path = tmp_path / "x.log"
    output = Output()
    write_test(output)
    path.write_text(output.text())
    code = ("from pathlib import Path; from nsyskit.native import rowscan; from nsyskit.nccltests import read_file; "
            f"r = read_file(Path({str(path)!r})); print(rowscan.functions() is None, len(r.tests[0].rows))")  # fmt: skip
    environ = os.environ | {rowscan.DISABLE_VARIABLE: "0", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120)
    assert done.stdout.split() == ["True", "12"], done.stderr


def test_numbers_read_in_c_equal_pythons_float_to_the_last_bit(compiled):
    """The C reader's fast decimal path (15 digits, powers of ten up to 22) and its strtod fallback give exactly
    what float() gives, for the forms nccl-tests prints and some it never does."""
    import random

    generator = random.Random(7)
    texts = [f"{generator.uniform(0, 10 ** generator.randint(0, 9)):.{generator.randint(0, 6)}f}" for _ in range(20000)]
    texts += [f"{generator.uniform(0, 10):.{generator.randint(0, 3)}e}" for _ in range(2000)]
    texts += ["0.1", "1e+06", "1e-30", "123456789012345678.5", "0.30000000000000004", "9007199254740993", "5e-324"]
    lines = [f"{8 * (i + 1):12d}  2  float  sum  -1  {t}  {t}  {t}  0  {t}  {t}  {t}  0" for i, t in enumerate(texts)]
    found = rowscan.scan_rows(("\n".join(lines) + "\n").encode())
    assert (found["flags"] != rowscan.OTHER).all()
    assert found["nums"][:, 2].tolist() == [float(t) for t in texts]


def test_line_numbers_counted_in_c_are_pythons(compiled):
    # Newlines at every alignment, bytes that differ from '\n' in one bit, offsets inside words and at both ends
    import random

    chooser = random.Random(7)
    buffer = bytes(chooser.choice(b"ab\n\n\x8a\x0b\x0e\xff\x00") for _ in range(50_000))
    offsets = sorted({0, len(buffer), *chooser.sample(range(len(buffer)), 700)})
    assert rowscan.line_numbers(buffer, offsets) == [1 + buffer.count(b"\n", 0, at) for at in offsets]
    assert rowscan.line_numbers(buffer, [5, 3]) is None  # not ascending: Python counts instead
