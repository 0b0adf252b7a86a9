"""`nsyskit wrap -- COMMAND`: one rank of the user's own launch line under the kit's wrapper; settings from flags,
then the kit's environment, then defaults; each rank's status and the folder's run.json; bad lines refused in one
line. The ranks here run unprofiled (this host has no nsys); profiled ranks in the image: tests/integration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit import runrecord
from nsyskit.ranks import wrap

ROOT = Path(__file__).resolve().parents[2]


def nsyskit_wrap(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m nsyskit wrap ARGS` as a launcher starts it: a clean environment plus the launcher's variables."""
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT / "src"), **env}
    return subprocess.run([sys.executable, "-m", "nsyskit", "wrap", *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["python3", "train.py"], "needs '--' before the command"),
        (["--out", "/tmp/x", "--"], "got no command after '--'"),
        (["--profile-steps", "5-3", "--", "true"], "--profile-steps '5-3' is not a step range"),
        (["--profile-ranks", "first", "--", "true"], "--profile-ranks 'first' is not a rank selection"),
        (["--profile-delay", "1m", "--", "true"], "--profile-delay '1m' is not a whole number of seconds"),
    ],
)
def test_a_bad_wrap_line_is_one_line_and_runs_nothing(tmp_path, args, says):
    done = nsyskit_wrap(*args, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ") and says in line and "; fix: " in line
    assert list(tmp_path.iterdir()) == []


def test_flags_come_before_the_environment_and_the_environment_before_defaults():
    flags = wrap.parser().parse_args(["--profile-steps", "3-4"])
    env = {"NSYSKIT_PROFILE_STEPS": "7-9", "NSYSKIT_PROFILE_RANKS": "0,1", "SLURM_JOB_ID": "4242", "SLURM_PROCID": "0"}
    values = wrap.settings(flags, env)
    assert values["NSYSKIT_PROFILE_STEPS"] == "3-4"  # the flag
    assert values["NSYSKIT_PROFILE_RANKS"] == "0,1"  # the environment
    assert values["NSYSKIT_TRACE"] == "cuda,nvtx,osrt" and values["NSYSKIT_STEP_HOOK"] == "1"  # defaults
    assert values["NSYSKIT_JOB_ID"] == "4242" and values["NSYSKIT_LAUNCHER"] == "srun"  # the launcher's job id
    assert values["NSYSKIT_REPORT_DIR"].endswith("/nsyskit-4242")


def test_a_time_window_for_any_program_reaches_nsys():
    values = wrap.settings(wrap.parser().parse_args(["--profile-delay", "20", "--profile-duration", "30"]), {})
    assert "--delay=20" in wrap.load_wrapper(wrap.wrapper_path()).nsys_command(values, {}, ["./solver"])
    assert "--duration=30" in wrap.load_wrapper(wrap.wrapper_path()).nsys_command(values, {}, ["./solver"])
    from_env = wrap.settings(wrap.parser().parse_args([]), {"NSYSKIT_PROFILE_DELAY": "7", "NSYSKIT_PROFILE_DURATION": "9"})
    assert {"--delay=7", "--duration=9"} <= set(wrap.load_wrapper(wrap.wrapper_path()).nsys_command(from_env, {}, ["x"]))


def test_a_time_window_with_the_gpu_window_is_an_error_and_without_a_gpu_it_is_taken(monkeypatch, tmp_path):
    flags = wrap.parser().parse_args(["--profile-steps", "3-5", "--profile-duration", "30"])
    assert wrap.settings(flags, {})["NSYSKIT_PROFILE_DURATION"] == "30"  # this machine: no GPU, the window is NVTX only
    gpus = tmp_path / "gpus"
    (gpus / "0000:00:1e.0").mkdir(parents=True)
    monkeypatch.setattr(wrap, "GPU_FOLDER", str(gpus))  # what the NVIDIA driver shows on a GPU machine
    with pytest.raises(wrap.WrapUsageError, match=r"^--profile-duration gives a time window, but --profile-steps on a "
                       r"GPU machine opens nsys' capture range.*; fix: drop --profile-steps for a time window, or drop "
                       r"--profile-duration$"):  # fmt: skip
        wrap.settings(flags, {})
    assert wrap.settings(wrap.parser().parse_args(["--profile-steps", "3-5"]), {})["NSYSKIT_CAPTURE"] == "cudaProfilerApi"


@pytest.mark.parametrize(("old", "new"), [("NSYSKIT_DELAY", "NSYSKIT_PROFILE_DELAY"), ("NSYSKIT_DURATION", "NSYSKIT_PROFILE_DURATION")])
def test_the_old_time_window_variables_are_an_error_naming_the_new_ones(tmp_path, old, new):
    done = nsyskit_wrap("--", "true", cwd=tmp_path, **{old: "30"})
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line == f"error: {old}='30' was renamed {new}; fix: set {new}=30 instead"
    assert list(tmp_path.iterdir()) == []


def test_a_run_id_with_underscores_is_made_a_kit_run_id():
    values = wrap.settings(wrap.parser().parse_args([]), {"TORCHELASTIC_RUN_ID": "my_run_1"})
    assert values["NSYSKIT_JOB_ID"] == "my-run-1"  # '_' separates the fields of report names


def test_every_rank_records_its_status_and_the_folder_gets_one_run_json(tmp_path):
    out = tmp_path / "run"
    script = "import os, sys; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE']); sys.exit(int(os.environ['RANK']) * 3)"
    codes = []
    for rank in (0, 1):  # two ranks as torchrun starts them
        done = nsyskit_wrap("--out", str(out), "--profile-ranks", "none", "--run-id", "t1", "--", sys.executable, "-c",
                            script, cwd=tmp_path, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                            LOCAL_WORLD_SIZE="2", TORCHELASTIC_RUN_ID="abc")  # fmt: skip
        assert f"rank {rank} of 2" in done.stdout
        codes.append(done.returncode)
    assert codes == [0, 3]  # the command's own exit code, per rank
    record = runrecord.read_run(str(out))
    assert (record.target, record.workload, record.launcher, record.run_id) == ("wrap", "command", "torchrun", "t1")
    assert record.command == [sys.executable, "-c", script]
    assert [(s.rank, s.exit_code, s.profiled) for s in record.ranks] == [(0, 0, False), (1, 3, False)]
    assert record.exit_code == 3 and record.world_size == 2
    assert json.loads((out / "run.json").read_text())["unprofiled_ranks"] == [0, 1]


def test_the_packaged_wrapper_is_the_checkout_s():
    assert Path(wrap.wrapper_path()).samefile(ROOT / "Container-Root/usr/local/bin/nsys-profile")


def test_the_window_is_a_capture_range_only_where_the_driver_sees_gpus(tmp_path, monkeypatch):
    flags = wrap.parser().parse_args(["--profile-steps", "3-5"])
    monkeypatch.setattr(wrap, "GPU_FOLDER", str(tmp_path / "gpus"))
    assert wrap.settings(flags, {})["NSYSKIT_CAPTURE"] == "none"  # no driver: CPU, the NVTX window only
    (tmp_path / "gpus").mkdir()
    assert wrap.settings(flags, {})["NSYSKIT_CAPTURE"] == "none"  # a driver without GPUs
    (tmp_path / "gpus" / "0000:53:00.0").mkdir()
    assert wrap.settings(flags, {})["NSYSKIT_CAPTURE"] == "cudaProfilerApi"
    assert "NSYSKIT_CAPTURE" not in wrap.settings(flags, {"NSYSKIT_CAPTURE": "none"})  # the user's own stays
    assert wrap.settings(wrap.parser().parse_args([]), {})["NSYSKIT_CAPTURE"] == "none"  # no window: recorded whole
