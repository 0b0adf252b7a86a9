"""'invoke nccl-log' on bad input, as a user types it: a non-zero exit and one 'error:' line on stderr naming the
file or flag, the value and the fix (never a traceback); permission cases run without root's override of
file modes, as a user meets them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.unprivileged import WITHOUT_FILE_MODE_OVERRIDE

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nccl"


def invoke(*args: str, file_modes_apply: bool = False) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"} | {"COLUMNS": "200"}
    command = [sys.executable, "-m", "invoke", "nccl-log", *args]
    if file_modes_apply:
        command = [*WITHOUT_FILE_MODE_OVERRIDE, *command]
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def one_error(done: subprocess.CompletedProcess, *says: str) -> str:
    """The single stderr error line, checked for a failing exit, every expected part and no traceback."""
    assert done.returncode != 0, done.stdout[-500:]
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and "fix:" in errors[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for part in says:
        assert part in errors[0], (part, errors[0])
    return errors[0]


def _run_folder(parent: Path) -> Path:
    run = parent / "run-20250102-030405"
    run.mkdir()
    (run / "run.json").write_text("{}")
    shutil.copy(DATA / "kit_mpirun.log", run / "rank0.log")
    return run


def test_read_only_run_folder_still_prints_the_analysis(tmp_path):
    run = _run_folder(tmp_path)
    for path in (run, *run.iterdir()):
        path.chmod(0o555 if path.is_dir() else 0o444)
    done = invoke(str(run), file_modes_apply=True)
    one_error(done, str(run / "nccl-log.json"), "could not be written", "Permission denied", "--json > FILE")
    assert "Per-op message sizes" in done.stdout and "Aggregate" in done.stdout  # the analysis is printed first
    assert not (run / "nccl-log.html").exists()


def test_unreadable_log(tmp_path):
    log = tmp_path / "rank3.log"
    shutil.copy(DATA / "kit_mpirun.log", log)
    log.chmod(0o000)
    one_error(
        invoke(str(log), file_modes_apply=True), f"LOG '{log}'", "cannot be read (Permission denied)", "chmod a+r"
    )


def test_html_naming_a_folder_or_a_missing_parent(tmp_path):
    log = str(DATA / "kit_mpirun.log")
    one_error(invoke(log, "--html", str(tmp_path)), f"--html '{tmp_path}'", "is a folder", "nccl-log.html")
    missing = tmp_path / "no" / "such" / "out.html"
    done = invoke(log, "--html", str(missing))
    one_error(done, f"--html '{missing}'", "does not exist", f"mkdir -p {missing.parent}")
    assert done.stdout == ""  # checked before the logs are read


@pytest.mark.parametrize(
    "name, content, holds",
    [
        ("empty.log", b"", "the file is empty"),
        (
            "utf16.log",
            (DATA / "kit_mpirun.log").read_text().encode("utf-16"),
            "the file is UTF-16 text (convert it: iconv",
        ),
        ("core.bin", bytes(range(256)) * 64, "the file is binary data"),
        ("plain.log", b"epoch 1 loss 0.5\nepoch 2 loss 0.4\n", "the file is text without NCCL INFO lines"),
    ],
)
def test_input_without_any_nccl_line(tmp_path, name, content, holds):
    log = tmp_path / name
    log.write_bytes(content)
    one_error(invoke(str(log)), f"LOG '{log}'", "no NCCL line was found", holds, "NCCL_DEBUG=INFO")


def test_lines_zero_is_rejected_up_front(tmp_path):
    done = invoke(str(tmp_path / "not-even-read.log"), "--lines", "0-0")
    one_error(done, "--lines '0-0'", "--lines counts from 1", "1 <= A <= B")


def test_comma_inside_a_path(tmp_path):
    comma = tmp_path / "run,retry.log"
    shutil.copy(DATA / "kit_mpirun.log", comma)
    done = invoke(str(comma), "--json")  # the path as a whole exists: read as one file
    assert done.returncode == 0 and json.loads(done.stdout)["files"] == [str(comma)]
    missing = f"{tmp_path}/a,b.log"
    one_error(invoke(missing), f"LOG '{tmp_path}/a'", "commas separate paths", "was split at its comma", "a glob")
