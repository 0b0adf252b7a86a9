"""Profile your own training, end to end: the two scripts of tests/data/userscripts (a plain DDP loop with gradient
accumulation, a Hugging Face Trainer script; neither knows nsyskit) through the commands docs/your-training.md
shows: `invoke run --local --workload command` and `nsyskit wrap` inside torchrun in the kit image. Real Docker,
real nsys, real torch; the analysis must find exactly the window's optimizer steps on both ranks."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest
from fixtures.kit_image import ROOT, invoke

from nsyskit.analysis.compute.analyzers import step_times
from nsyskit.analysis.read.reader import ExportReader

pytestmark = [pytest.mark.engine, pytest.mark.slow]

DOC = ROOT / "docs" / "your-training.md"
WINDOW = [3, 4, 5]  # the documented --profile-steps 3-5


def doc_line(start: str, contains: str) -> list[str]:
    """The words of the one fenced line of the page that starts with START and holds CONTAINS ($PWD: this checkout)."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", DOC.read_text(), flags=re.S)
    (line,) = [line for block in blocks for line in block.splitlines() if line.startswith(start) and contains in line]
    return shlex.split(line.replace("$PWD", str(ROOT)))


def replaced(words: list[str], flag: str, value: str) -> list[str]:
    """WORDS with the value after FLAG changed."""
    index = words.index(flag)
    return [*words[: index + 1], value, *words[index + 2 :]]


def window_steps(run_dir: Path) -> dict[str, list[int]]:
    """Each rank's export -> the steps the analysis keeps (inside its profile_window)."""
    return {path.name: [int(s) for s in step_times(ExportReader(path).nvtx_ranges()).columns["step"]]
            for path in sorted(run_dir.glob("*.sqlite"))}  # fmt: skip


@pytest.fixture
def run_env(kit_image, tmp_path) -> dict[str, str]:
    name, _, tag = kit_image.rpartition(":")
    return {"NSYSKIT_IMAGE": name, "NSYSKIT_TAG": tag, "NSYSKIT_REPORT_DIR": str(tmp_path / "reports")}


def run_command(run_env: dict[str, str], command: str | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """The documented `invoke run --local --workload command` line, with its own run id (and COMMAND when given)."""
    run_id = f"test-mine-{uuid.uuid4().hex[:6]}"
    words = replaced(doc_line("invoke run --local", "--workload command"), "--run-id", run_id)
    if command:
        words = replaced(words, "--command", command)
    result = invoke(*words[1:], env=run_env, timeout=900)
    return result, Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id


def test_the_ddp_loop_run_by_the_kit_has_both_ranks_and_exactly_the_windows_steps(run_env):
    result, run_dir = run_command(run_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list(run_dir.glob("*.nsys-rep"))) == 2
    assert list(window_steps(run_dir).values()) == [WINDOW, WINDOW]
    logs = "\n".join(path.read_text() for path in (run_dir / "logs").glob("*.log"))
    assert "rank 0 done after 8 steps" in logs and "rank 1 done after 8 steps" in logs  # the script's own output
    record = json.loads((run_dir / "run.json").read_text())
    assert record["workload"] == "command" and record["command"][:2] == ["python3", "/code/ddp_accum.py"]
    analyzed = invoke("analyze", str(run_dir), "--json", "--no-html", env=run_env, timeout=600)
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    analysis = json.loads(analyzed.stdout)  # what it has for the example: the window's steps, step times, ranks
    assert sorted((row["rank"], row["step"]) for row in analysis["steps"]) == [(r, s) for r in (0, 1) for s in WINDOW]
    assert [row["steps"] for row in analysis["ranks"]] == [3, 3] and analysis["metrics"]["step_time"] > 0


def test_a_failing_rank_ends_the_run_with_its_exit_code_and_number(run_env):
    result, run_dir = run_command(run_env, "python3 /code/ddp_accum.py --steps 6 --fail-rank 1")
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    # The rank that failed first, with its own exit code; the run ends with the launcher's (torchrun's), as the example's.
    assert "rank 1 on worker-0 exited with code 5; then rank 0" in line, result.stderr[-2000:]
    assert json.loads((run_dir / "run.json").read_text())["failed_rank"]["rank"] == 1


def test_the_hf_trainer_script_run_by_the_kit_has_exactly_the_windows_steps(run_env):
    result, run_dir = run_command(run_env, "python3 /code/hf_trainer.py --steps 7")
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(window_steps(run_dir).values()) == [WINDOW, WINDOW]


@pytest.mark.parametrize("script", ["ddp_accum.py --steps 8", "hf_trainer.py --steps 7"])
def test_the_documented_wrap_line_inside_torchrun(kit_image, tmp_path, script):
    words = doc_line("docker run", "nsyskit wrap")
    words = [word.replace(f"{ROOT}/reports:", f"{tmp_path}:") for word in words]
    words[words.index("nsyskit:latest")] = kit_image
    words = [*words[: words.index("--") + 1], "python3", f"/code/{script.split()[0]}", *script.split()[1:]]
    done = subprocess.run(words, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / "wrapped"
    assert list(window_steps(folder).values()) == [WINDOW, WINDOW]
    record = json.loads((folder / "run.json").read_text())
    assert (record["target"], record["launcher"], record["workload"]) == ("wrap", "torchrun", "command")
    assert sorted(rank["rank"] for rank in record["ranks"]) == [0, 1] and record["exit_code"] == 0


def test_two_nodes_under_mpirun_meet_as_torch_distributed_expects(run_env):
    """NODES=2: a launcher container's mpirun starts the ranks over ssh, as an MPIJob's launcher does; the wrapper
    gives the user's script RANK, WORLD_SIZE, LOCAL_RANK from Open MPI's variables."""
    run_id = f"test-mpi-{uuid.uuid4().hex[:6]}"
    words = replaced(doc_line("invoke run --local", "--workload command"), "--run-id", run_id)
    result = invoke(*words[1:], "--nodes", "2", "--procs-per-node", "1", env=run_env, timeout=900)
    run_dir = Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in run_dir.glob("*.nsys-rep")) == [f"{run_id}_node{n}_rank{n}_worker-{n}.nsys-rep" for n in (0, 1)]
    assert list(window_steps(run_dir).values()) == [WINDOW, WINDOW]
    assert json.loads((run_dir / "run.json").read_text())["launcher"] == "mpirun"


def test_a_program_that_never_steps_is_recorded_whole_and_the_summary_says_so(run_env):
    result, run_dir = run_command(run_env, "python3 -c 'import torch; print(torch.ones(2).sum())'")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ranks 0,1: the program never called optimizer.step(), so PROFILE_STEPS=3-5 was not marked; the whole " \
           "run was recorded" in result.stdout  # fmt: skip
    assert len(list(run_dir.glob("*.sqlite"))) == 2
