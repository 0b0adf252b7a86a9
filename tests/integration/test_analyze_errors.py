"""invoke analyze on bad input, typed as a user types it: one line on stderr naming the key or file, the value and
the fix, a non-zero exit where it is an error, warnings (and a complete analysis) where data can be left out;
never a traceback. Permission cases run as an unprivileged user (root ignores file modes)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.unprivileged import as_nobody

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "analysis"))

from nsys_fixtures import Export, Kernel, Memop, Range, write_export  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INVOKE = [str(Path(sys.executable).parent / "invoke"), "--search-root", str(ROOT)]


def analyze(*args: str) -> subprocess.CompletedProcess:
    """'invoke analyze ARGS' as a user runs it."""
    return subprocess.run([*INVOKE, "analyze", *args], capture_output=True, text=True, timeout=300)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The single 'error: ...' line of a failed run (and no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and "Traceback" not in result.stderr + result.stdout, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def export(tmp_path) -> Path:
    """A small GPU export: two kernels, a memcpy, two steps."""
    content = Export(
        kernels=[Kernel(0, 100, "gemm"), Kernel(200, 260, "gemm")],
        memops=[Memop(10, 40, 1 << 20, 1)],
        ranges=[Range(0, 150, "step 0"), Range(150, 300, "step 1")],
    )
    return write_export(tmp_path / "run" / "p_rank_0.sqlite", content) if (tmp_path / "run").mkdir() is None else None


@pytest.mark.parametrize("flag", ["--straggler-pct", "--fail-on-regression", "--top"])
@pytest.mark.parametrize("value", ["abc", "-5", "nan", "inf"])
def test_bad_numbers_in_flags(export, flag, value):
    line = one_error_line(analyze(f"{flag}={value}", str(export)))
    assert flag in line and repr(value) in line and "fix:" in line


def test_read_only_run_folder_prints_the_analysis(export, world_dir):
    folder = world_dir / "run"
    folder.mkdir()
    export.rename(folder / export.name)
    (folder / export.name).chmod(0o444)
    folder.chmod(0o555)
    result = as_nobody([*INVOKE, "analyze", str(folder)], env={"HOME": str(world_dir), "PATH": "/usr/bin:/bin"})
    line = one_error_line(result)
    assert "Ranks" in result.stdout and "gemm" in result.stdout  # the analysis is printed, not lost
    assert str(folder) in line and "report.html could not be written" in line and "--output" in line


def test_unreadable_nccl_log_leaves_its_section_out_with_a_warning(export, world_dir):
    folder = world_dir / "run"
    folder.mkdir()
    export.rename(folder / export.name)
    log = folder / "rank0.log"
    log.write_bytes((ROOT / "tests" / "data" / "nccl" / "kit_mpirun.log").read_bytes())
    log.chmod(0o000)
    folder.chmod(0o777)  # report.html can be written: only the log is unreadable
    result = as_nobody([*INVOKE, "analyze", str(folder)], env={"HOME": str(world_dir), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "Ranks" in result.stdout and "gemm" in result.stdout  # the nsys analysis is whole
    assert "NCCL log section was left out" in result.stderr and str(log) in result.stderr and "fix:" in result.stderr
    assert 'id="nccl-log"' not in (folder / "report.html").read_text()


def test_output_naming_a_file_or_an_impossible_path(export, tmp_path):
    a_file = tmp_path / "note.txt"
    a_file.write_text("x")
    line = one_error_line(analyze("--output", str(a_file), str(export)))
    assert "--output" in line and str(a_file) in line and "is a file" in line
    line = one_error_line(analyze("--output", str(a_file / "sub"), str(export)))
    assert "is a file" in line
    impossible = analyze("--output", "/proc/nsyskit-report", str(export))
    assert "report.html could not be written" in one_error_line(impossible) and "Ranks" in impossible.stdout


def test_unreadable_file(export, world_dir):
    target = world_dir / export.name
    target.write_bytes(export.read_bytes())
    target.chmod(0o000)
    line = one_error_line(
        as_nobody([*INVOKE, "analyze", "--no-html", str(target)], env={"HOME": str(world_dir), "PATH": "/usr/bin:/bin"})
    )
    assert str(target) in line and "permission denied" in line and "fix:" in line


def test_rank_number_beyond_int64(export):
    huge = export.with_name("p_rank_99999999999999999999.sqlite")
    export.rename(huge)
    line = one_error_line(analyze("--no-html", str(huge)))
    assert str(huge) in line and "99999999999999999999" in line and "64-bit" in line


def test_two_files_claiming_the_same_rank(export):
    twin = export.with_name("q_rank_0.sqlite")
    twin.write_bytes(export.read_bytes())
    line = one_error_line(analyze("--no-html", str(export.parent)))
    assert str(export) in line and str(twin) in line and "rank 0" in line


def _warnings(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith("warning: ") for line in lines), lines
    return lines


def test_text_blob_and_null_values_are_left_out(export):
    con = sqlite3.connect(export)
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,bytes,copyKind) VALUES ('soon', 90, 0, 1, 8, 5, 1)"
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,bytes,copyKind) VALUES (50, 90, 0, 1, 8, x'00ff', 1)"
    )
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1")
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = x'01' WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, uint64Value) VALUES (10, 'later', 59, 'step 7', 1, 'big')"
    )
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, uint64Value) VALUES (10, 20, 59, x'ff00fe', 1, x'01')"
    )
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (30, 40, 59, NULL, NULL)")
    con.commit()
    con.close()
    result = analyze("--json", "--no-html", str(export))
    warnings = _warnings(result)
    assert any("2 of 3 rows of CUPTI_ACTIVITY_KIND_MEMCPY" in w and "left out" in w and "fix:" in w for w in warnings)
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in w for w in warnings) and any("NVTX" in w for w in warnings)
    data = json.loads(result.stdout)
    assert data["kernel_summary"]["0"][0]["instances"] == 2 and data["memcpy"][0]["count"] == 1
    assert [s["step"] for s in data["steps"]] == [0, 1]
    assert any("\ufffd" in row["name"] for row in data["nvtx"])  # text that is not UTF-8 is shown, replaced


def test_huge_step_numbers_and_backwards_intervals(export):
    con = sqlite3.connect(export)
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (400, 500, 59, 'step 99999999999999999999999', 1)"
    )
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (500, 400, 59, 'step 9', 1)")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1")
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 900, end = 800 WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    con.commit()
    con.close()
    result = analyze("--json", "--no-html", str(export))
    warnings = _warnings(result)
    assert any("end before they start" in w and "KERNEL" in w for w in warnings)
    assert any("end before they start" in w and "NVTX" in w for w in warnings)
    assert any("99999999999999999999999" in w for w in warnings)
    data = json.loads(result.stdout)
    assert [s["step"] for s in data["steps"]] == [0, 1] and data["kernel_summary"]["0"][0]["total_ns"] == 160
    assert all(row["total_ns"] >= 0 for row in data["nvtx"] + data["top_kernels"])


def test_kernel_table_without_a_name_column(export):
    con = sqlite3.connect(export)
    for column in ("demangledName", "shortName", "mangledName"):
        con.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN {column}")
    con.commit()
    con.close()
    result = analyze("--json", "--no-html", str(export))
    warnings = _warnings(result)
    assert len(warnings) == 1 and "no kernel name column" in warnings[0] and str(export) in warnings[0]
    data = json.loads(result.stdout)
    assert [(r["name"], r["total_ns"]) for r in data["kernel_summary"]["0"]] == [("<unnamed kernel>", 160)]
