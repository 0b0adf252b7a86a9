"""PROFILER=torch and ncu end to end on CPU: the kit image, real Docker, real torch DDP, real ncu, HTA analysis."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fixtures.kit_image import invoke

from nsyskit.analysis.profilers import torchprof

pytestmark = [pytest.mark.engine, pytest.mark.slow]

STEPS, WINDOW = 6, (2, 4)


@pytest.fixture
def run_env(kit_image, tmp_path) -> dict[str, str]:
    """Environment that points invoke at the session's kit image and a private report folder."""
    name, _, tag = kit_image.rpartition(":")
    return {"NSYSKIT_IMAGE": name, "NSYSKIT_TAG": tag, "NSYSKIT_REPORT_DIR": str(tmp_path / "reports")}


def run_local(run_env: dict[str, str], what: str, *flags: str) -> tuple[Path, str]:
    """invoke run --local (local-cpu profile, short run); returns the run folder and the task's stdout."""
    run_id = f"test-{what}-{uuid.uuid4().hex[:6]}"
    result = invoke("run", "--local", "--profile", "local-cpu", "--steps", str(STEPS), "--profile-steps",
                    f"{WINDOW[0]}-{WINDOW[1]}", "--run-id", run_id, "--no-progress", *flags, env=run_env, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id, result.stdout


def analyze_json(run_dir: Path) -> dict:
    result = invoke("analyze", str(run_dir), "--json", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_torch_profiler_on_two_ranks_of_one_node_analyzed_with_hta(run_env):
    run_dir, stdout = run_local(run_env, "torch1", "--profiler", "torch")
    assert "parameters in sync" in stdout and "2 .pt.trace.json.gz" in stdout
    names = sorted(p.name for p in run_dir.glob("*.pt.trace.json.gz"))
    assert names == [f"{run_dir.name}_node0_rank{r}_worker-0.pt.trace.json.gz" for r in (0, 1)]
    assert not list(run_dir.glob("*.nsys-rep"))  # torch instead of nsys, not on top of it
    record = json.loads((run_dir / "run.json").read_text())
    assert {r["rank"]: (r["profiler"], r["profiled"]) for r in record["ranks"]} == {0: ("torch", True), 1: ("torch", True)}
    assert all(r["report"].endswith(".pt.trace.json.gz") for r in record["ranks"])

    data = analyze_json(run_dir)
    assert data["profiler"] == "torch" and set(data["sources"]) == {"0", "1"}
    # The schedule recorded exactly PROFILE_STEPS, as ProfilerStep#N (N counts from 0: step 2 is #1).
    steps = {(row["rank"], row["step"]) for row in data["steps"]}
    assert steps == {(rank, step - 1) for rank in (0, 1) for step in range(WINDOW[0], WINDOW[1] + 1)}
    assert data["notes"] == [torchprof.NO_GPU] and "temporal_breakdown" not in data
    assert [row["rank"] for row in data["ranks"]] == [0, 1]
    assert (run_dir / "report.html").is_file() and (run_dir / "analysis.json").is_file()
    table = invoke("analyze", str(run_dir), "--no-html", timeout=600)
    assert table.returncode == 0 and torchprof.NO_GPU in " ".join(table.stdout.split()), table.stderr[-2000:]


def test_torch_profiler_on_two_nodes_profiles_only_the_selected_rank(run_env):
    run_dir, stdout = run_local(run_env, "torch2", "--profiler", "torch", "--nodes", "2", "--procs-per-node", "1",
                                "--profile-ranks", "1")  # fmt: skip
    assert "parameters in sync" in stdout
    assert [p.name for p in run_dir.glob("*.pt.trace.json.gz")] == [f"{run_dir.name}_node1_rank1_worker-1.pt.trace.json.gz"]
    record = json.loads((run_dir / "run.json").read_text())
    assert {r["rank"]: r["profiled"] for r in record["ranks"]} == {0: False, 1: True}
    data = analyze_json(run_dir)
    assert set(data["sources"]) == {"1"} and {row["rank"] for row in data["steps"]} == {1}
    distributed = torchprof.trace_rank(Path(data["sources"]["1"]))
    assert distributed == 1


def test_ncu_on_cpu_records_no_kernel_says_so_and_the_run_goes_on(run_env):
    run_dir, stdout = run_local(run_env, "ncu", "--profiler", "ncu")
    assert "parameters in sync" in stdout
    assert not list(run_dir.glob("*.ncu-rep"))
    command = (run_dir / f"{run_dir.name}_node0_rank0_worker-0.cmd").read_text()
    assert command.startswith("ncu --set=roofline --replay-mode=kernel --target-processes=all --export=/reports/")
    assert "--launch-count 20" in command and "train.py" in command
    record = json.loads((run_dir / "run.json").read_text())
    for rank in record["ranks"]:
        assert rank["profiler"] == "ncu" and rank["exit_code"] == 0 and rank["problems"] == []
        assert len(rank["notes"]) == 1 and rank["notes"][0].startswith("ncu recorded no kernel")
    launcher_log = "".join(p.read_text() for p in (run_dir / "logs").glob("*.log"))
    assert launcher_log.count("ncu recorded no kernel") == 2
    result = invoke("analyze", str(run_dir), timeout=300)
    assert result.returncode != 0 and "no Nsight Compute reports" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
