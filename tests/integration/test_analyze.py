"""invoke analyze / recipes end to end: real CPU reports recorded by the real nsys during the test run, and
NVIDIA's own `nsys stats` numbers on a GPU-shaped fixture."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "analysis"))

from nsys_fixtures import Export, Kernel, Memop, Range, write_export  # noqa: E402

from nsyskit import hostpkgs  # noqa: E402
from nsyskit.analysis import run_analysis  # noqa: E402
from nsyskit.analysis.read import nsys
from nsyskit.analysis.trace import discover, open_export  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INVOKE = [str(Path(sys.executable).parent / "invoke"), "--search-root", str(ROOT)]

# A tiny "training" loop annotated through NVTX's C API (libnvToolsExt, Debian's libnvtoolsext1), which Debian's
# nsys 2022.4 records: 'step N' ranges with phase ranges inside, an ncclAllReduce range with a size payload.
WORKLOAD = r"""
import ctypes, sys, time
nvtx = ctypes.CDLL("libnvToolsExt.so.1")

class Attributes(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint16), ("size", ctypes.c_uint16), ("category", ctypes.c_uint32),
                ("colorType", ctypes.c_int32), ("color", ctypes.c_uint32), ("payloadType", ctypes.c_int32),
                ("reserved0", ctypes.c_int32), ("payload", ctypes.c_uint64), ("messageType", ctypes.c_int32),
                ("message", ctypes.c_char_p)]

def push(text, payload=None):
    if payload is None:
        return nvtx.nvtxRangePushA(text.encode())
    attributes = Attributes(2, ctypes.sizeof(Attributes), 0, 0, 0, 1, 0, payload, 1, text.encode())
    return nvtx.nvtxRangePushEx(ctypes.byref(attributes))

rank, step_s = int(sys.argv[1]), float(sys.argv[2])
window = nvtx.nvtxRangeStartA(b"profile_window")
for step in range(4):
    push(f"step {step}")
    for phase, share in (("data", 0.1), ("forward", 0.3), ("backward", 0.4)):
        push(phase); time.sleep(step_s * share); nvtx.nvtxRangePop()
    push("ncclAllReduce", payload=(1 << 20) * (step + 1)); time.sleep(step_s * 0.1); nvtx.nvtxRangePop()
    push("optimizer"); time.sleep(step_s * 0.1); nvtx.nvtxRangePop()
    nvtx.nvtxRangePop()
nvtx.nvtxRangeEnd(ctypes.c_uint64(window))
"""
STEP_S = {0: 0.1, 1: 0.1, 2: 0.25}  # rank 2 is 2.5x slower: the straggler


@pytest.fixture(scope="session")
def nsys_cli() -> str:
    """The real nsys, installed from Debian non-free when missing (as CI starts on a fresh machine)."""
    binary = nsys.ensure_installed()
    if "libnvToolsExt.so.1" not in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout:
        hostpkgs.install("nsys")  # the example's NVTX library (libnvtoolsext1, non-free) comes with it
    return binary


@pytest.fixture(scope="session")
def cpu_run(nsys_cli, tmp_path_factory) -> Path:
    """A run folder with two ranks recorded by the real nsys (-t nvtx,osrt, CPU only), as 'invoke run' lays it out."""
    run = tmp_path_factory.mktemp("reports") / "run-cpu"
    run.mkdir()
    script = run / "workload.py"
    script.write_text(WORKLOAD)
    for (
        rank,
        step,
    ) in STEP_S.items():  # one nsys session at a time: concurrent launches can fail ("Agent launcher failed")
        cmd = [
            nsys_cli,
            "profile",
            f"--session-new=nsyskit-test-{os.getpid()}-{rank}",  # the default session name can collide with idle ones
            "-t",
            "nvtx,osrt",
            "--sample=none",
            "--cpuctxsw=none",
            "-f",
            "true",
            "-o",
            str(run / f"profile_rank_{rank}"),
        ]
        for _attempt in range(3):
            result = subprocess.run(
                [*cmd, sys.executable, str(script), str(rank), str(step)], capture_output=True, text=True, timeout=300
            )
            if result.returncode == 0:
                break
        assert result.returncode == 0, result.stdout + result.stderr
    assert list(run.glob("profile_rank_*.nsys-rep")) or list(run.glob("profile_rank_*.qdstrm"))
    (run / "run.json").write_text(json.dumps({"run_id": "run-cpu", "ranks": 2}))
    return run


def test_analyze_real_cpu_reports(cpu_run):
    result = subprocess.run(
        [*INVOKE, "analyze", "--straggler-pct", "20", str(cpu_run)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert "CPU-only capture" in result.stdout and "Ranks" in result.stdout
    # .qdstrm -> .nsys-rep -> .sqlite, cached beside the reports
    for rank in STEP_S:
        assert (cpu_run / f"profile_rank_{rank}.sqlite").exists()
    data = json.loads((cpu_run / "analysis.json").read_text())
    for rank, step_s in STEP_S.items():
        durations = [s["duration_ns"] for s in data["steps"] if s["rank"] == rank]
        assert len(durations) == 4 and all(step_s * 1e9 * 0.95 < d < step_s * 1e9 * 3 for d in durations), durations
    names = {row["name"] for row in data["nvtx"]}
    assert {"step N", "data", "forward", "backward", "optimizer", "ncclAllReduce", "profile_window"} <= names
    assert [r["straggler"] for r in data["ranks"]] == [False, False, True]
    sizes = {(row["op"], row["bucket"]): row["count"] for row in data["nccl_sizes"]}
    assert sizes == {("AllReduce", "1MB-16MB"): 12}  # payloads 1..4 MiB, 4 per rank
    html = (cpu_run / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2  # CPU only: step times + NCCL histograms
    assert '<tr class="straggler"><td>2</td>' in html
    assert (cpu_run / "step_times.png").read_bytes().startswith(b"\x89PNG")

    second = subprocess.run(
        [*INVOKE, "analyze", "--json", "--no-html", str(cpu_run)], capture_output=True, text=True, timeout=600
    )
    assert second.returncode == 0 and json.loads(second.stdout)["nsys_versions"]["0"].startswith("20")


def test_kernel_summary_equals_nsys_stats(nsys_cli, tmp_path):
    names = ["gemm_kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", "elementwise"]
    kernels = [
        Kernel(i * 1000, i * 1000 + 100 + (i * 37) % 500, names[i % 3], device=i % 2, stream=7 + i % 3)
        for i in range(600)
    ]
    path = write_export(tmp_path / "gpu_rank_0.sqlite", Export(kernels=kernels, memops=[Memop(5, 50, 1 << 20, 1)]))
    expected = nsys.stats(path, "kernel")
    analysis, _ = run_analysis([path], write=False)
    ours = {row["name"]: row for row in analysis.kernel_summaries[0].rows()}
    assert len(expected) == len(ours) == 3
    for row in expected:
        mine = ours[row["Name"]]
        assert float(row["Time (%)"]) == round(mine["time_pct"], 1)
        assert int(row["Total Time (ns)"]) == mine["total_ns"] and int(row["Instances"]) == mine["instances"]
        assert float(row["Avg (ns)"]) == round(mine["avg_ns"], 1) and float(row["Med (ns)"]) == round(
            mine["median_ns"], 1
        )
        assert int(row["Min (ns)"]) == mine["min_ns"] and int(row["Max (ns)"]) == mine["max_ns"]
        assert float(row["StdDev (ns)"]) == round(mine["stddev_ns"], 1)


def test_nsys_rep_errors_name_the_file(nsys_cli, tmp_path):
    broken = tmp_path / "profile_rank_0.nsys-rep"
    broken.write_bytes(b"this is not a report" * 100)
    result = subprocess.run([*INVOKE, "analyze", str(broken)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(broken) in lines[0] and lines[0].startswith("error:")


def test_diff_gate_and_recipes_message(nsys_cli, tmp_path):
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    for folder, step in ((fast, 1000), (slow, 1300)):
        folder.mkdir()
        write_export(
            folder / "r_rank_0.sqlite",
            Export(
                kernels=[Kernel(0, 500, "k")], ranges=[Range(i * step, (i + 1) * step, f"step {i}") for i in range(3)]
            ),
        )
    ok = subprocess.run(
        [*INVOKE, "analyze", "--diff", str(fast), str(slow), "--fail-on-regression", "50"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    gate = subprocess.run(
        [*INVOKE, "analyze", "--diff", str(fast), str(slow), "--fail-on-regression", "10"],
        capture_output=True,
        text=True,
    )
    assert gate.returncode == 3 and "step_time" in gate.stderr
    recipes = subprocess.run([*INVOKE, "recipes", str(fast / "r_rank_0.sqlite")], capture_output=True, text=True)
    if nsys.has_recipes(nsys_cli):
        assert "recipes" in (recipes.stdout + recipes.stderr)
    else:  # Debian's 2022.4
        assert (
            recipes.returncode == 1
            and "has no 'recipe' command" in recipes.stderr
            and len(recipes.stderr.strip().splitlines()) == 1
        )


def test_reader_on_real_export_tables(cpu_run):
    reader = open_export(discover([cpu_run])[0][1])
    assert reader.nsys_version and reader.kernels().start.size == 0 and reader.gpus() == {}


def test_big_report_export_says_what_runs_and_how_long(cpu_run, tmp_path, monkeypatch, capsys):
    report = next(cpu_run.glob("*.nsys-rep"), None) or nsys.import_qdstrm(next(cpu_run.glob("*.qdstrm")))
    copy = tmp_path / report.name
    copy.write_bytes(report.read_bytes())
    monkeypatch.setattr(nsys, "BIG_REPORT_BYTES", 1)  # every report counts as big here
    assert nsys.export_sqlite(copy).exists()
    err = capsys.readouterr().err
    assert f"exporting {copy.name} (0.0 GB) to SQLite with nsys export" in err
    assert re.search(rf"exported {re.escape(copy.name)} in \d+ s", err)
