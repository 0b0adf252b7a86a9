"""WORKLOAD=nccl-tests: NCCL_TESTS checked against the image's binaries, one command line per test for every
launcher, rank 0's table in nccl-tests/<test>.out, run.json naming the workload, no launch without GPUs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.golden import assert_matches_golden
from k8s_variants import ROOT, config  # tests/unit is on sys.path

from nsyskit import runrecord
from nsyskit.config import load_config
from nsyskit.config.template import render_template
from nsyskit.errors import ConfigErrors
from nsyskit.k8s import render as k8s_render
from nsyskit.local import cluster, runfolder
from nsyskit.ranks import launch, workloads
from nsyskit.slurm import render as slurm_render

INSTALL_SCRIPT = ROOT / "Container-Root/nsyskit/install/nccl-tests.sh"
WRAPPER = ROOT / "Container-Root/usr/local/bin/nsys-profile"
TEE = ROOT / "Container-Root" / workloads.TEE.lstrip("/")
TWO_TESTS = "all_reduce_perf -b 8 -e 2G -f 2 -g 1; all_gather_perf -b 1M -e 1G -f 2"


def nccl_config(variant: str = "default", **more: str):
    return config(variant, WORKLOAD="nccl-tests", **more)


def problem(**settings: str) -> str:
    """The one-line error of loading the committed .env with SETTINGS."""
    with pytest.raises(ConfigErrors) as error:
        load_config(ROOT, overrides=settings, environ={})
    return error.value.one_line()


# --- the binaries: one list for the install step and the kit ------------------------------------------------------


def test_the_kit_accepts_exactly_the_binaries_the_install_step_copies():
    script = INSTALL_SCRIPT.read_text()
    listed = [line.strip() for line in workloads.BINARIES_FILE.read_text().splitlines()
              if line.strip() and not line.startswith("#")]  # fmt: skip
    # The install step reads the list beside it (the Dockerfile copies both) and copies exactly those names.
    assert "nccl-tests-binaries.txt" in script and re.search(r'cp "\$tmp/src/build/\$tool"', script)
    assert "-name '*_perf'" not in script  # no longer every *_perf the build happened to make
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"COPY .*nccl-tests\.sh .*nccl-tests-binaries\.txt /nsyskit/install/", dockerfile)
    assert list(workloads.installed_binaries()) == listed and "all_reduce_perf" in listed
    assert all(re.fullmatch(r"[a-z_]+_perf", name) for name in listed)


@pytest.mark.parametrize("name", workloads.installed_binaries())
def test_every_installed_binary_is_a_valid_test(name):
    assert (
        load_config(ROOT, overrides={"NCCL_TESTS": f"{name} -b 8 -e 128M"}, environ={}).nccl_test_list[0].binary == name
    )


# --- NCCL_TESTS: a list, each entry checked, one line per problem -------------------------------------------------


def test_default_is_the_ddp_example_and_one_all_reduce_test():
    cfg = load_config(ROOT, environ={})
    assert cfg.workload == "ddp" and cfg.nccl_tests == "all_reduce_perf -b 8 -e 2G -f 2 -g 1"
    template = render_template()
    assert "# WORKLOAD=ddp\n" in template and "# NCCL_TESTS='all_reduce_perf -b 8 -e 2G -f 2 -g 1'\n" in template


def test_several_tests_from_an_env_file_keep_their_order_and_get_unique_names(tmp_path):
    (tmp_path / ".env").write_text(
        f"WORKLOAD=nccl-tests\nNCCL_TESTS={TWO_TESTS}; all_reduce_perf -b 1G -e 1G -g 2 -t 2\n"
    )
    cfg = load_config(tmp_path, environ={})
    tests = cfg.nccl_test_list
    assert [(t.name, t.binary, t.gpus_per_rank) for t in tests] == [
        ("all_reduce_perf", "all_reduce_perf", 1), ("all_gather_perf", "all_gather_perf", 1),
        ("all_reduce_perf-2", "all_reduce_perf", 4),
    ]  # fmt: skip
    assert tests[1].args == ("-b", "1M", "-e", "1G", "-f", "2")


@pytest.mark.parametrize(
    ("value", "says", "fix"),
    [
        ("all_reduce_prf -b 8", "names all_reduce_prf, which the image does not install", "did you mean all_reduce_perf?"),
        ("/opt/nccl-tests/bin/all_reduce_perf", "(a path: give the name alone", "use one of: all_reduce_perf"),
        ("all_reduce_perf -b 8 -e 2X", "-e (maxbytes) '2X' is not a size", "-b 8 -e 2G"),
        ("all_reduce_perf -b 2G -e 8", "-b (minbytes) is larger than -e (maxbytes)", "use -b <= -e"),
        ("all_reduce_perf -g 0", "-g (ngpus) must be 1 or more", "-g 1"),
        ("all_reduce_perf --ngpus", "--ngpus has no value", "give one"),
        ("all_reduce_perf -q 3", "has the unknown option -q", "nccl-tests' options"),
        ("all_reduce_perf 8 2G", "has the stray word '8'", "nccl-tests' options"),
        ("all_reduce_perf -h", "-h prints the help and runs no test", "remove -h"),
        ("all_reduce_perf; alltoall_perf -n x", "test 2 ('alltoall_perf -n x'): -n (iters) 'x' is not a whole number", "whole number"),
    ],
)  # fmt: skip
def test_a_bad_test_is_one_line_naming_the_key_the_value_and_the_fix(value, says, fix):
    line = problem(NCCL_TESTS=value)
    assert "\n" not in line and line.startswith(f"NCCL_TESTS={value!r}")
    assert says in line and fix in line.split("; fix: ", 1)[1], line


def test_long_and_attached_option_forms_are_taken():
    cfg = load_config(ROOT, overrides={"NCCL_TESTS": "all_reduce_perf --minbytes=8 --maxbytes 1G -g2 -t 2"}, environ={})
    assert cfg.nccl_test_list[0].gpus_per_rank == 4


@pytest.mark.parametrize(
    ("settings", "key", "says"),
    [
        ({"WORKLOAD": "nccl-tests", "NCCL_TESTS": " ; "}, "NCCL_TESTS", "names no test"),
        ({"WORKLOAD": "nccl-tests", "PROFILER": "torch"}, "PROFILER", "does not run"),
        ({"WORKLOAD": "nccl"}, "WORKLOAD", "use one of: ddp, nccl-tests"),
    ],
)
def test_settings_that_cannot_go_with_the_nccl_tests_are_refused(settings, key, says):
    line = problem(**settings)
    assert line.startswith(f"{key}=") and says in line, line


# --- no launch without GPUs; --dry-run still renders ---------------------------------------------------------------


def nsyskit(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The nsyskit command run in FOLDER, a project with no .env (this checkout's code, the kit's own profiles)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")} | env
    environ["PYTHONPATH"] = str(ROOT / "src")  # this checkout's code, whichever nsyskit the interpreter has installed
    return subprocess.run([sys.executable, "-m", "nsyskit", *args], cwd=folder, env=environ, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_run_without_gpus_stops_before_launching_with_one_line_naming_gpus_per_node(tmp_path):
    result = nsyskit(tmp_path, "run", "--local", "--profile", "local-cpu", "--workload", "nccl-tests")
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "GPUS_PER_NODE=0" in errors[0] and "fix:" in errors[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing was made: no run folder (nor container)
    assert "Traceback" not in result.stderr


def test_the_launch_check_needs_a_gpu_per_rank_and_test():
    assert launch.launch_problems(nccl_config()) == []  # 8 ranks x -g 1 on 8 GPUs
    assert launch.launch_problems(config("default")) == []  # the example is not held to it
    (gpus,) = launch.launch_problems(nccl_config("cpu"))
    assert (gpus.key, gpus.value) == ("GPUS_PER_NODE", 0)
    (short,) = launch.launch_problems(nccl_config(NCCL_TESTS=TWO_TESTS.replace("-g 1", "-g 2")))
    assert (
        short.key == "NCCL_TESTS" and "needs 16 GPUs per node" in short.problem and "GPUS_PER_NODE=8" in short.problem
    )


def test_deploy_dry_run_without_gpus_still_renders_the_job(tmp_path):
    result = nsyskit(tmp_path, "deploy", "--k8s", "--dry-run", "--profile", "local-cpu", "--workload", "nccl-tests",
                     NSYSKIT_REGISTRY="127.0.0.1:5000")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "warning: a real deploy would stop before launching: GPUS_PER_NODE=0" in result.stderr  # said, not refused
    (mpijob,) = (tmp_path / "jobs").glob("k8s-*/mpijob.yaml")
    launcher = yaml.safe_load(mpijob.read_text())["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    command = shlex.join(launcher["containers"][0]["command"])
    assert command.endswith(
        f"{workloads.TEE} /reports/nccl-tests/all_reduce_perf.out all_reduce_perf -b 8 -e 2G -f 2 -g 1"
    )


# --- one command line per test, the same for every launcher -------------------------------------------------------


def test_each_rank_runs_the_wrapper_around_rank0tee_around_the_test():
    steps = launch.steps(nccl_config(NCCL_TESTS=TWO_TESTS))
    assert [step.name for step in steps] == ["all_reduce_perf", "all_gather_perf"]
    assert steps[1].rank_command == [launch.WRAPPER, "python3", workloads.TEE, "/reports/nccl-tests/all_gather_perf.out",
                                     "all_gather_perf", "-b", "1M", "-e", "1G", "-f", "2"]  # fmt: skip
    assert [step.tag for step in steps] == ["all-reduce", "all-gather"]  # several: report names apart
    assert launch.steps(nccl_config())[0].tag == ""  # one test: the example's report naming, unchanged


def test_every_launcher_starts_each_test_with_mpi_in_order():
    cfg = nccl_config(NCCL_TESTS=TWO_TESTS, NODES="2")
    multi = cluster.launcher_script(cfg, "r1")  # local: the launcher container's script
    single = launch.single_node_command(nccl_config(NCCL_TESTS=TWO_TESTS, NODES="1"), "r1")
    k8s = k8s_render.launcher_command(cfg, "job")
    for text in (multi, shlex.join(single), shlex.join(k8s)):
        runs = text.split("mpirun --allow-run-as-root")[1:]
        assert len(runs) == 2 and "all_reduce_perf -b 8" in runs[0] and "all_gather_perf -b 1M" in runs[1]
        assert "NSYSKIT_JOB_ID=r1-all-reduce" in runs[0] or "NSYSKIT_JOB_ID=job-all-reduce" in runs[0]
        assert "NSYSKIT_CAPTURE=none" in runs[0]  # the tests open no cudaProfilerApi range: recorded whole
    assert "--host localhost:8" in shlex.join(single)  # one node: mpirun on this host, no ssh
    assert cluster.launcher_kind(nccl_config(NODES="1")) == "mpirun"
    script = slurm_render.render_script(cfg, ROOT, Path("/fsx/jobs/j"))
    sruns = script.split("\nsrun ")[1:]
    assert len(sruns) == 2 and all("--mpi=pmix" in srun for srun in sruns)  # SLURM_MPI left at none: pmix
    assert "-all-gather_node_" in script.split("\nsrun ")[1].rsplit("NSYSKIT_REPORT_NAME=", 1)[1]


def readable(words: list[str]) -> str:
    """A command as golden-file text: shell-quoted, a new line before each option and each command of a sequence."""
    if words[:2] == ["bash", "-c"]:
        return "bash -c\n" + "\n&&\n".join(readable(shlex.split(part)) for part in words[2].split(" && "))
    return (
        shlex.join(words[:1])
        + "".join(("\n  " if w.startswith("-") else " ") + shlex.quote(w) for w in words[1:])
        + "\n"
    )


@pytest.mark.parametrize("workload", ["ddp", "nccl-tests", "command"])
def test_local_launch_commands_match_the_golden_files(workload):
    """The local run's launchers: the launcher container's mpirun over 2 nodes, and one node's own command."""
    tests = {"NCCL_TESTS": TWO_TESTS} if workload == "nccl-tests" else {}
    if workload == "command":
        tests = {"COMMAND": "python3 /code/train.py --lr 3e-4 --name 'my run'"}
    files = {
        "launcher-2-nodes.cmd": readable(
            cluster.launcher_mpirun(config(WORKLOAD=workload, NODES="2", **tests), "golden")
        ),
        "worker-0-1-node.cmd": readable(
            launch.single_node_command(config(WORKLOAD=workload, NODES="1", **tests), "golden")
        ),
    }
    assert_matches_golden(files, ROOT / "tests" / "data" / "golden" / "local" / workload)


def test_an_injector_profiles_the_test_binaries_and_the_ranks_run_unwrapped():
    cfg = nccl_config("sidecar-injector", NCCL_TESTS=TWO_TESTS)
    command = shlex.join(k8s_render.launcher_command(cfg, "job"))
    assert launch.WRAPPER not in command and command.count("rank0tee.py") == 2
    match = re.compile(k8s_render.context(cfg, "job")["injection_match"])
    assert match.match("all_reduce_perf -b 8 -e 2G") and match.match("/opt/nccl-tests/bin/alltoall_perf")
    assert not match.match(f"python3 {workloads.TEE} /reports/nccl-tests/x.out all_reduce_perf -b 8")


def test_slurm_mpi_set_to_none_by_hand_is_refused_for_the_nccl_tests():
    from nsyskit.targets import slurm as slurm_target

    cfg = load_config(ROOT, overrides={"WORKLOAD": "nccl-tests", "SLURM_MPI": "none"}, environ={})
    found = [e for e in slurm_target.problems(cfg, ROOT) if e.key == "SLURM_MPI"]
    assert len(found) == 1 and "SLURM_MPI=pmix" in found[0].fix
    assert (
        slurm_render.mpi_plugin(
            load_config(ROOT, overrides={"WORKLOAD": "nccl-tests", "SLURM_MPI": "pmi2"}, environ={})
        )
        == "pmi2"
    )


# --- rank 0's output, through the real wrapper -----------------------------------------------------------------------

FAKE_TEST = "import sys; print('#  size count type'); print('     8     2 float  1.0'); sys.exit(int(sys.argv[1]))"


@pytest.mark.parametrize("code", [0, 3])
def test_rank0_keeps_the_tests_output_and_the_other_ranks_write_none(tmp_path, code):
    outputs = {}
    for rank in (0, 1):
        output = tmp_path / "reports" / "nccl-tests" / f"rank{rank}.out"
        env = {**os.environ, "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
               "NSYSKIT_REPORT_DIR": str(tmp_path / "reports"), "NSYSKIT_PROFILE_RANKS": "none"}  # fmt: skip
        command = [
            sys.executable,
            str(WRAPPER),
            sys.executable,
            str(TEE),
            str(output),
            sys.executable,
            "-c",
            FAKE_TEST,
            str(code),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == code, done.stderr
        assert done.stdout.splitlines() == [
            "#  size count type",
            "     8     2 float  1.0",
        ]  # still in the launcher's log
        outputs[rank] = output
    assert outputs[0].read_text() == "#  size count type\n     8     2 float  1.0\n"
    assert not outputs[1].exists()


def test_rank0tee_names_a_missing_binary_and_exits_127(tmp_path):
    done = subprocess.run([sys.executable, str(TEE), str(tmp_path / "x.out"), "no_such_perf"], capture_output=True,
                          text=True, env={**os.environ, "NSYSKIT_RANK": "0"}, timeout=30)  # fmt: skip
    assert done.returncode == 127 and "no_such_perf" in done.stderr


# --- run.json -----------------------------------------------------------------------------------------------------------


def test_run_json_records_the_workload_its_tests_and_their_outputs(tmp_path):
    cfg = nccl_config("cpu", NCCL_TESTS=TWO_TESTS)
    (tmp_path / "logs").mkdir()
    (tmp_path / "nccl-tests").mkdir()
    (tmp_path / "nccl-tests" / "all_reduce_perf.out").write_text("# nccl-tests\n")
    runfolder.write_run_record(tmp_path, cfg, "local", "r1")
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["workload"] == "nccl-tests" and data["files"]["nccl_tests"] == ["nccl-tests/all_reduce_perf.out"]
    assert [(t["name"], t["output"]) for t in data["nccl_tests"]] == [
        ("all_reduce_perf", "nccl-tests/all_reduce_perf.out"),
        ("all_gather_perf", "nccl-tests/all_gather_perf.out"),
    ]
    assert data["nccl_tests"][1]["args"] == ["-b", "1M", "-e", "1G", "-f", "2"]
    assert runrecord.read_run(str(tmp_path)).workload == "nccl-tests"


def test_a_run_json_from_before_the_workload_field_reads_as_the_ddp_example(tmp_path):
    old = {"schema_version": 2, "run_id": "r0", "target": "local", "config": {"PROFILER": {"value": "nsys"}}}
    (tmp_path / "run.json").write_text(json.dumps(old))
    record = runrecord.read_run(str(tmp_path))
    assert (record.workload, record.nccl_tests) == ("ddp", [])
    (tmp_path / "run.json").write_text(json.dumps({**old, "nccl_tests": "all_reduce_perf"}))
    with pytest.raises(runrecord.RunRecordError, match="unexpected type"):
        runrecord.read_run(str(tmp_path))


def test_a_local_nccl_tests_run_says_where_the_tables_are_instead_of_checksums(tmp_path):
    from nsyskit.local.run import RunResult

    files = {"reports": ["r_node0_rank0_w.nsys-rep"], "nccl_tests": ["nccl-tests/all_reduce_perf.out"]}
    lines = RunResult("r", tmp_path, 0, 12.0, files=files).summary_lines()
    assert "nccl-tests: 1 output(s) from rank 0: nccl-tests/all_reduce_perf.out" in lines
    assert not any(line.startswith("ranks:") for line in lines)
    assert any(line.startswith("ranks:") for line in RunResult("r", tmp_path, 0, 1.0, files={}).summary_lines())
