"""WORKLOAD=command: the user's COMMAND on every rank under the kit's wrapper, MOUNTS for code and data, the capture
settings it renders, run.json naming it, and bad input refused in one line before anything is launched."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from k8s_variants import ROOT, config  # tests/unit is on sys.path
from test_nsys_wrapper import load_wrapper
from test_workloads import nsyskit

from nsyskit import runrecord
from nsyskit.k8s import render as k8s_render
from nsyskit.local import cluster, runfolder
from nsyskit.ranks import launch
from nsyskit.slurm import render as slurm_render

COMMAND = "env OMP_NUM_THREADS=4 python3 /code/train.py --config /code/mine.yaml --lr 3e-4"
wrapper = load_wrapper()


def command_config(variant: str = "default", **more: str):
    return config(variant, WORKLOAD="command", COMMAND=COMMAND, **more)


def refused(tmp_path, *args: str) -> str:
    """The one error line of `nsyskit ARGS` in an empty project folder, checked to have launched nothing."""
    result = nsyskit(tmp_path, *args)
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "; fix: " in errors[0] and "Traceback" not in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run folder, no job folder: nothing launched
    return errors[0]


# --- every launcher runs the same wrapped command -----------------------------------------------------------------


def test_every_launcher_runs_the_wrapper_around_the_command_words():
    words = ["/usr/local/bin/nsys-profile", "env", "OMP_NUM_THREADS=4", "python3", "/code/train.py", "--config",
             "/code/mine.yaml", "--lr", "3e-4"]  # fmt: skip
    cfg = command_config()
    assert launch.rank_command(cfg) == words
    assert launch.torchrun_command(cfg.replace(nodes=1))[-len(words) :] == words
    assert launch.mpirun_command(cfg, master_addr="w0")[-len(words) :] == words
    assert k8s_render.launcher_command(cfg, "job")[-len(words) :] == words
    script = slurm_render.render_script(command_config(REGISTRY="r.example.com"), ROOT, ROOT / "jobs" / "j")
    assert script.rstrip().endswith(" \\\n  ".join(slurm_render.command_lines(words)))
    assert cluster.rank_commands(cfg) == {"rank": words}


def test_quoted_words_reach_the_program_as_one_argument():
    cfg = config(WORKLOAD="command", COMMAND="python3 train.py --run-name 'my first run'")
    assert launch.application(cfg) == ["python3", "train.py", "--run-name", "my first run"]


@pytest.mark.parametrize(
    ("settings", "capture"),
    [
        ({}, "cudaProfilerApi"),  # GPUs and PROFILE_STEPS: the hook opens the capture range
        ({"STEP_HOOK": "false"}, "none"),  # the program marks its own steps: recorded whole
        ({"PROFILE_STEPS": ""}, "none"),
        ({"PROFILE_RANGE": "nvtx:train_window"}, "nvtx"),  # the program's own NVTX range
    ],
)
def test_the_capture_follows_the_step_hook_and_the_programs_own_range(settings, capture):
    env = launch.wrapper_env(command_config(**settings))
    assert env["NSYSKIT_CAPTURE"] == capture
    assert env["NSYSKIT_STEP_HOOK"] == ("0" if settings.get("STEP_HOOK") == "false" else "1")
    if capture == "nvtx":
        assert env["NSYSKIT_NVTX_CAPTURE"] == "train_window"
        assert "--nvtx-capture=train_window" in wrapper.nsys_command(env, {}, ["python3"])


def test_on_cpu_the_window_is_marked_and_the_whole_run_recorded():
    env = launch.wrapper_env(command_config("cpu", PROFILE_STEPS="3-5"))
    assert (env["NSYSKIT_CAPTURE"], env["NSYSKIT_PROFILE_STEPS"]) == ("none", "3-5")


def test_the_kit_workloads_get_no_step_hook_settings():
    assert not any(key in launch.wrapper_env(config()) for key in ("NSYSKIT_STEP_HOOK", "NSYSKIT_PROFILE_STEPS"))


def test_gpu_runs_ask_nccl_to_stamp_its_info_lines_and_cpu_runs_set_no_nccl_variable():
    """NCCL 2.26+ stamps WARN (its default) and INFO lines to the microsecond with the UTC offset: what the log join
    reads (tests/unit/analysis/test_nccllogjoin.py emulates NCCL with this format)."""
    env = launch.wrapper_env(config())
    assert env["NCCL_DEBUG_TIMESTAMP_LEVELS"] == "WARN,INFO"
    assert env["NCCL_DEBUG_TIMESTAMP_FORMAT"] == "[%F_%T.%6f_%z]_"
    assert not any(key.startswith("NCCL_") for key in launch.wrapper_env(config("cpu")))


def test_a_command_s_window_is_not_held_to_the_example_s_steps():
    assert command_config(PROFILE_STEPS="500-510", STEPS="50").profile_steps == (500, 510)


# --- MOUNTS -------------------------------------------------------------------------------------------------------


def test_mounts_become_bind_mounts_of_the_rank_containers(tmp_path):
    code, data = tmp_path / "code", tmp_path / "data"
    code.mkdir(), data.mkdir()
    cfg = command_config("cpu", MOUNTS=f"{code}:/code:ro, {data}/:/data")
    volumes = cluster.host_config(cfg, tmp_path / "reports")["volumes"]
    assert volumes[str(code)] == {"bind": "/code", "mode": "ro"}
    assert volumes[str(data)] == {"bind": "/data", "mode": "rw"}  # the trailing slash is dropped
    assert launch.launch_problems(cfg) == []


def test_pyxis_mounts_add_the_users_after_the_kits():
    cfg = command_config(REGISTRY="r.example.com", MOUNTS="/fsx/code:/code:ro")
    mounts = slurm_render.container_mounts(cfg, ROOT / "jobs" / "j" / "reports")
    assert mounts.split(",")[-1] == "/fsx/code:/code:ro" and mounts.split(",")[0].endswith(":/reports")


def test_a_missing_host_path_is_a_launch_problem_except_on_kubernetes_nodes(tmp_path):
    cfg = command_config("cpu", MOUNTS=f"{tmp_path}/absent:/code")
    (problem,) = launch.launch_problems(cfg, "local")
    assert problem.key == "MOUNTS" and f"{tmp_path}/absent" in problem.problem
    assert launch.launch_problems(cfg, "k8s") == []  # hostPath lies on the nodes, not here


# --- bad input: one line, nothing launched ------------------------------------------------------------------------


def test_an_empty_command_is_refused(tmp_path):
    line = refused(tmp_path, "run", "--local", "--profile", "local-cpu", "--workload", "command")
    assert line.startswith("error: COMMAND='': is empty, but WORKLOAD=command") and "--command" in line


def test_a_missing_mount_is_refused_naming_the_path(tmp_path):
    line = refused(tmp_path, "run", "--local", "--profile", "local-cpu", "--workload", "command", "--command",
                   "python3 /code/train.py", "--mount", "/nonexistent/code:/code")  # fmt: skip
    assert "MOUNTS='/nonexistent/code:/code'" in line and "does not exist" in line


def test_a_relative_mount_is_refused(tmp_path):
    line = refused(tmp_path, "deploy", "--slurm", "--dry-run", "--workload", "command", "--command", "python3 x.py",
                   "--mount", "code:/code")  # fmt: skip
    assert "MOUNTS='code:/code'" in line and "not absolute" in line


def test_a_capture_range_of_an_unknown_form_is_refused(tmp_path):
    result = nsyskit(tmp_path, "deploy", "--slurm", "--dry-run", "--workload", "command", "--command", "python3 x.py",
                     NSYSKIT_PROFILE_RANGE="cuda:window")  # fmt: skip
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "PROFILE_RANGE='cuda:window'" in line and "nvtx:NAME" in line


# --- run.json -----------------------------------------------------------------------------------------------------


def test_run_json_records_the_workload_and_the_command(tmp_path):
    (tmp_path / "logs").mkdir()
    runfolder.write_run_record(tmp_path, command_config("cpu"), "local", "r1")
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["workload"] == "command" and shlex.join(data["command"]) == COMMAND
    assert runrecord.read_run(str(tmp_path)).command == shlex.split(COMMAND)


# --- the wrapper: ranks meet as torch.distributed expects, on every launcher ----------------------------------------


@pytest.mark.parametrize(
    ("launcher", "expected"),
    [
        ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
          "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "MASTER_ADDR": "w0"},
         {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "w0"}),
        ({"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS": "4",
          "SLURM_NTASKS_PER_NODE": "2", "MASTER_ADDR": "n0"},
         {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}),
        ({"PMI_RANK": "1", "PMI_SIZE": "2"},  # one node: rank 0 is here
         {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}),
    ],
    ids=["mpirun", "srun", "pmi"],
)  # fmt: skip
def test_each_rank_gets_what_torch_distributed_reads(launcher, expected):
    env = wrapper.rank_environment(launcher, wrapper.identity(launcher, "h"), "/tmp/r")
    assert {key: env[key] for key in expected} == expected
    assert env["MASTER_PORT"] == "29500"


def test_torchrun_s_own_variables_are_kept():
    torchrun = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
                "MASTER_PORT": "29400", "OMPI_COMM_WORLD_SIZE": "16"}  # fmt: skip
    env = wrapper.rank_environment(torchrun, wrapper.identity(torchrun, "h"), "/tmp/r")
    assert {key: env[key] for key in torchrun} == torchrun


def test_the_step_hook_goes_first_on_the_python_path_only_when_asked():
    on = {"NSYSKIT_STEP_HOOK": "1", "PYTHONPATH": "/mine", "RANK": "0"}
    env = wrapper.rank_environment(on, wrapper.identity(on, "h"), "/runs/r/job_node0_rank0_h")
    assert env["PYTHONPATH"] == f"{wrapper.STEP_HOOK_DIR}:/mine"
    assert env["NSYSKIT_STEP_HOOK_STATUS"] == "/runs/r/logs/job_node0_rank0_h.steps.json"
    off = wrapper.rank_environment({"RANK": "0"}, wrapper.identity({}, "h"), "/runs/r/x")
    assert "PYTHONPATH" not in off and "NSYSKIT_STEP_HOOK_STATUS" not in off
    assert (ROOT / "Container-Root/nsyskit/stephook/sitecustomize.py").samefile(
        f"{wrapper.STEP_HOOK_DIR}/sitecustomize.py"
    )


def test_a_non_python_command_runs_under_the_wrapper_with_its_exit_code(tmp_path):
    """A command the kit did not write (here: sh) runs unprofiled as asked, its code and rank recorded."""
    import subprocess

    env = {"PATH": "/usr/bin:/bin", "NSYSKIT_REPORT_DIR": str(tmp_path), "NSYSKIT_JOB_ID": "c1", "NSYSKIT_PROFILE_RANKS": "none",
           "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}  # fmt: skip
    done = subprocess.run([sys.executable, str(ROOT / "Container-Root/usr/local/bin/nsys-profile"), "sh", "-c",
                           'echo "rank $RANK of $WORLD_SIZE"; exit 7'], env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 7 and "rank 1 of 2" in done.stdout
    (status,) = (tmp_path / "logs").glob("c1_node*_rank1_*.status.json")
    assert json.loads(status.read_text())["exit_code"] == 7


@pytest.mark.parametrize(
    ("settings", "key", "says"),
    [
        ({"COMMAND": "python3 'train.py"}, "COMMAND", "does not split into words"),
        ({"MOUNTS": "/a:/code,/b:/code"}, "MOUNTS", "mounts two things at /code"),
        ({"MOUNTS": "/a:/code:rx"}, "MOUNTS", "malformed mount"),
        ({"PROFILER": "torch"}, "PROFILER", "does not run"),
        ({"WORKLOAD": "ddp", "PROFILE_RANGE": "nvtx:mine"}, "PROFILE_RANGE", "runs the kit's"),
    ],
)
def test_settings_a_command_cannot_take_are_one_line_naming_the_key(settings, key, says):
    from nsyskit.config import load_config
    from nsyskit.errors import ConfigErrors

    with pytest.raises(ConfigErrors) as error:
        load_config(ROOT, overrides={"WORKLOAD": "command", "COMMAND": COMMAND, **settings}, environ={})
    line = error.value.one_line()
    assert line.startswith(f"{key}=") and says in line and "fix:" in line, line


def test_a_command_run_says_how_many_ranks_ran_it_instead_of_checksums(tmp_path):
    from nsyskit.local.run import RunResult

    lines = RunResult("r", tmp_path, 0, 1.0, command_ranks=2).summary_lines()
    assert lines[1] == f"ranks: 2 ran your command; their output is in {tmp_path / 'logs'}"
