"""'invoke nccl-log' as a user runs it: tables, --json, run folders (HTML + JSON beside the reports), one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nccl"


def invoke(*args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"} | {"COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "invoke", "nccl-log", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_tables_and_warnings():
    done = invoke(str(DATA / "nemo_4gpu.log"), "--steps", "2-3")
    assert done.returncode == 0, done.stderr
    for title in ("Init facts", "Per-op message sizes", "histogram per op", "histogram per GPU", "Aggregate", "Steps"):
        assert title in done.stdout
    assert "window: iterations 2-3 (21 lines)" in done.stdout and "1.250000 s over 2 steps" in done.stdout
    assert "warning: 1 garbled collective line(s)" in done.stderr
    assert "garbled: " in done.stdout and ":71: " in done.stdout  # the example line with file:line


def test_json_has_every_table():
    done = invoke(f"{DATA / 'debugfile.nodeA.3001.log'},{DATA / 'debugfile.nodeB.3002.log.gz'}", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {
        "per_op",
        "histogram_per_op",
        "histogram_per_gpu",
        "aggregate",
        "steps",
        "init",
        "tuning",
        "lines",
        "warnings",
    } <= report.keys()
    assert report["per_op"][0]["calls"] == 12 and report["init"]["network"] == "Socket" and len(report["files"]) == 2


def test_run_folder_gets_html_and_json(tmp_path):
    run = tmp_path / "run-20250102-030405"
    run.mkdir()
    (run / "run.json").write_text("{}")
    shutil.copy(DATA / "kit_mpirun.log", run / "rank0.log")
    (run / "report.html").write_text("<!doctype html><html><body><h1>nsyskit analysis</h1></body></html>")
    extra = tmp_path / "page.html"
    done = invoke(str(run), "--html", str(extra), "--top", "1")
    assert done.returncode == 0, done.stderr
    page = (run / "nccl-log.html").read_text()
    assert page.startswith("<!doctype html>") and "NVLS" in page and extra.read_text() == page
    assert json.loads((run / "nccl-log.json").read_text())["steps"]["formats"] == {"nsyskit": 3}
    # report.html is invoke analyze's (it composes the same section itself): nccl-log leaves it as it is
    assert (run / "report.html").read_text() == "<!doctype html><html><body><h1>nsyskit analysis</h1></body></html>"
    assert "TFLOP/s per GPU" in done.stdout and "not available" in done.stdout
    again = invoke(str(run), "--json")  # its own outputs are not read back as logs
    assert json.loads(again.stdout)["files"] == [str(run / "rank0.log")]


def test_user_errors_are_one_line_with_the_fix(tmp_path):
    for args, says in (
        (
            [str(tmp_path / "missing.log")],
            "error: LOG '" + str(tmp_path / "missing.log") + "': no such file or folder; fix:",
        ),
        ([str(DATA / "nemo_4gpu.log"), "--steps", "9-2"], "error: --steps '9-2': the range is empty or negative; fix:"),
        ([str(DATA / "nemo_4gpu.log"), "--lines", "x"], "error: --lines 'x': not a range; fix:"),
    ):
        done = invoke(*args)
        assert done.returncode == 1
        assert done.stderr.strip().startswith(says) and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
