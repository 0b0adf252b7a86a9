"""invoke nccl-log prints what the public nsys-profiling awk scripts print for the same input.

tests/data/nccl/awk_pipeline.sh is that grep + awk pipeline (window, sizes, per-op stats, histogram, aggregate,
step timing), written from the project's description; here it runs with mawk on the fixtures and its numbers are
compared with the library's. Where the scripts misread a layout (srun -l's '0: ' prefix is taken for the op
name) the awk pipeline gets the prefix-stripped file, which is what a user of the scripts has to do.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from nsyskit.nccllog import Window, analyze

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"
PIPELINE = DATA / "awk_pipeline.sh"
AWK = shutil.which("mawk") or shutil.which("awk")


def run_awk(log: Path, window: tuple[int, int] | None = None) -> dict:
    """The pipeline's output, parsed: per-op {op: (calls, min, avg, max, total)}, histogram, aggregate, steps."""
    args = [str(PIPELINE), str(log), *(str(v) for v in window or ())]
    done = subprocess.run(
        args, capture_output=True, text=True, env={"AWK": AWK, "PATH": "/usr/bin:/bin"}, timeout=60, check=True
    )
    section, parsed = "", {"per-op": {}, "histogram": {}, "aggregate": set(), "steps": None}
    for line in done.stdout.splitlines():
        if line.startswith("== "):
            section = line[3:]
        elif section == "per-op":
            op, *fields = line.split()
            values = dict(field.split("=") for field in fields)
            parsed["per-op"][op] = (
                int(values["calls"]),
                int(values["min"]),
                float(values["avg"]),
                int(values["max"]),
                int(values["total"]),
            )
        elif section == "histogram":
            key, calls = line.rsplit(" ", 1)
            parsed["histogram"][tuple(key.split(":", 1))] = int(calls)
        elif section == "aggregate":
            calls, op, count, dtype, nbytes = line.split()
            parsed["aggregate"].add((int(calls), op, int(count), dtype, int(nbytes)))
        elif section == "steps":
            parsed["steps"] = {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", line)}
    return parsed


def ours(paths: list[Path], window: tuple[int, int] | None = None) -> dict:
    """The library's results in the pipeline's shape."""
    report = analyze(paths, Window(steps=window))
    histogram = {}
    for row in report.histogram_per_op:
        for bucket in ("<64KB", "64KB-1MB", "1MB-16MB", ">16MB"):
            if row[bucket]:
                histogram[(row["op"], bucket)] = row[bucket]
    return {
        "per-op": {
            r["op"]: (r["calls"], r["min_bytes"], r["avg_bytes"], r["max_bytes"], r["total_bytes"])
            for r in report.per_op
        },
        "histogram": histogram,
        "aggregate": {(r["calls"], r["op"], r["count"], r["dtype"], r["bytes_per_call"]) for r in report.aggregate},
        "steps": report.steps,
    }


def assert_same(awk: dict, mine: dict) -> None:
    assert mine["per-op"].keys() == awk["per-op"].keys()
    for op, (calls, low, avg, high, total) in awk["per-op"].items():
        assert mine["per-op"][op][:2] == (calls, low) and mine["per-op"][op][3:] == (high, total)
        assert mine["per-op"][op][2] == pytest.approx(avg, abs=1e-6)
    assert mine["histogram"] == awk["histogram"]
    assert mine["aggregate"] == awk["aggregate"]


@pytest.fixture(scope="module", autouse=True)
def _awk_exists():
    assert AWK, "mawk or awk is needed (Debian installs mawk in every system: apt-get install mawk)"


@pytest.mark.parametrize("window", [None, (1, 4), (2, 3), (3, 3), (4, 4), (45, 50)])
def test_nemo_log_equals_the_awk_pipeline(window):
    awk, mine = run_awk(DATA / "nemo_4gpu.log", window), ours([DATA / "nemo_4gpu.log"], window)
    assert_same(awk, mine)
    # the step-timing script counts NeMo steps that print both the time and TFLOPS_per_GPU (all of them here)
    assert awk["steps"]["steps"] == mine["steps"]["timed_steps"] == mine["steps"]["tflops_steps"]
    if mine["steps"]["timed_steps"]:
        assert mine["steps"]["avg_step_time_s"] == pytest.approx(awk["steps"]["avg_step_time_s"], abs=1e-6)
        assert mine["steps"]["avg_tflops_per_gpu"] == pytest.approx(awk["steps"]["avg_tflops_per_gpu"], abs=1e-6)


def test_srun_prefixed_log_equals_the_awk_pipeline_on_the_stripped_log(tmp_path):
    prefixed = DATA / "srun_megatron.log"
    stripped = tmp_path / "stripped.log"
    stripped.write_text(re.sub(r"(?m)^ *\d+: ", "", prefixed.read_text()))
    assert_same(run_awk(stripped), ours([prefixed]))
    assert set(run_awk(prefixed)["per-op"]) == {"0", "1", "2", "3"}  # the scripts' own reading of srun -l output


def test_several_rank_files_equal_the_awk_pipeline_on_their_concatenation(tmp_path):
    rank_a, rank_b = DATA / "debugfile.nodeA.3001.log", DATA / "debugfile.nodeB.3002.log.gz"
    joined = tmp_path / "joined.log"
    joined.write_bytes(rank_a.read_bytes() + gzip.decompress(rank_b.read_bytes()))
    assert_same(run_awk(joined), ours([rank_a, rank_b]))


def test_kit_example_log_equals_the_awk_pipeline():
    assert_same(run_awk(DATA / "kit_mpirun.log"), ours([DATA / "kit_mpirun.log"]))
