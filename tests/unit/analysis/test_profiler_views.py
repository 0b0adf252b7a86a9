"""'invoke analyze' on ncu and torch runs: which profiler a folder holds, and the terminal, HTML and JSON outputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_ncu import EXAMPLES
from torch_fixtures import GEMM, write_run

from nsyskit import hostpkgs
from nsyskit.analysis import dispatch
from nsyskit.analysis.profilers import torchprof

ROOT = Path(__file__).resolve().parents[3]


def analyze(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}  # wide enough that rich does not fold kernel names
    return subprocess.run([sys.executable, "-m", "invoke", "analyze", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip


def test_the_profiler_of_a_folder(tmp_path):
    assert dispatch.profiler_of([tmp_path]) == "nsys"  # nothing there: nsys's discovery names what is missing
    (tmp_path / "r_node0_rank0_h.pt.trace.json.gz").write_bytes(b"")
    assert dispatch.profiler_of([tmp_path]) == "torch"
    (tmp_path / "r_node0_rank0_h.nsys-rep").write_bytes(b"")
    assert dispatch.profiler_of([tmp_path]) == "nsys"
    cpu_ncu_run = tmp_path / "ncu-run"
    cpu_ncu_run.mkdir()
    (cpu_ncu_run / "run.json").write_text(json.dumps({"config": {"PROFILER": {"value": "ncu", "source": "flag"}}}))
    assert dispatch.profiler_of([cpu_ncu_run]) == "ncu"
    assert dispatch.profiler_of([tmp_path / "r_node0_rank0_h.pt.trace.json.gz"]) == "torch"


def test_torch_run_through_the_analyze_task(tmp_path):
    write_run(tmp_path, world=2, gpu=True, slow_rank=1)
    table = analyze(str(tmp_path))
    assert table.returncode == 0, table.stderr
    text = " ".join(table.stdout.split())
    assert "Temporal breakdown per rank" in text and "Communication overlapped by computation" in text
    assert GEMM in text and "report:" in table.stdout + table.stderr
    page = (tmp_path / "report.html").read_text()
    assert "nsyskit analysis (torch)" in page and "GPU idle time per rank and stream" in page
    assert 'class="straggler"' in page  # rank 1's steps are 30 % longer
    assert page.count("data:image/png;base64,") == 2 and (tmp_path / "step_times.png").is_file()
    saved = json.loads((tmp_path / "analysis.json").read_text())
    printed = json.loads(analyze(str(tmp_path), "--json", "--no-html").stdout)
    assert saved == printed and saved["profiler"] == "torch" and set(torchprof.TABLES) <= set(saved)


def test_cpu_torch_run_says_the_gpu_tables_are_empty(tmp_path):
    write_run(tmp_path, world=2, gpu=False)
    done = analyze(str(tmp_path), "--no-html")
    assert done.returncode == 0 and torchprof.NO_GPU in " ".join(done.stdout.split())
    assert not (tmp_path / "report.html").exists()


def test_ncu_run_through_the_analyze_task(tmp_path):
    if shutil.which("ncu") is None:
        hostpkgs.install("ncu")
    shutil.copy(EXAMPLES / "addConstDouble.ncu-rep", tmp_path / "run1_node0_rank0_gpu-0.ncu-rep")
    done = analyze(str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "Kernels (Nsight Compute" in text and "addConstDouble" in text
    data = json.loads((tmp_path / "analysis.json").read_text())
    (kernel,) = data["kernels"]
    assert kernel["launches"] == 1 and kernel["intensity_flop_per_byte"] == pytest.approx(1 / 16, rel=0.05)
    assert "Profiled launches per rank" in (tmp_path / "report.html").read_text()
