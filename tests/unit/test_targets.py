"""One Target contract for local, k8s and Slurm: choosing a target, config --check per target, exit codes of failed jobs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from k8s_variants import ECR, ROOT, config

from nsyskit import targets
from nsyskit.errors import JobFailed, JobInterrupted, UsageError
from nsyskit.local import cluster
from nsyskit.targets.base import Job, Outcome, Target

HERE = Path(__file__).resolve().parent


def invoke_in(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """'invoke ARGS' in a copy of this project's front whose root (and so jobs/ and reports/) is PROJECT."""
    for name in ("tasks.py", ".env"):
        if not (project / name).exists():
            shutil.copy2(ROOT / name, project / name)
    for folder in ("profiles", "k8s", "slurm"):
        if not (project / folder).exists():
            (project / folder).symlink_to(ROOT / folder)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")} | env
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=project, env=environ, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


# --- one protocol, three targets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["local", "k8s", "slurm"])
def test_every_target_implements_the_whole_protocol(name):
    target = targets.get(name)
    assert target.name == name
    for step in ("validate", "render", "submit", "wait", "collect", "undeploy", "status", "logs"):
        assert callable(getattr(target, step)), f"{name} lacks {step}"
    assert isinstance(target.submit_waits, bool)
    assert {n for n in dir(Target) if not n.startswith("_")} <= set(dir(target))


def test_the_target_flags_choose_exactly_one():
    assert targets.choose(None, local=False, k8s=True, slurm=False).name == "k8s"
    assert targets.choose("local", local=False, k8s=False, slurm=False).name == "local"
    with pytest.raises(UsageError, match="--k8s and --slurm given together.*fix: choose one target"):
        targets.choose(None, local=False, k8s=True, slurm=True)
    with pytest.raises(UsageError, match="no target given.*--local or --k8s or --slurm"):
        targets.choose(None, local=False, k8s=False, slurm=False)


# --- config --check --k8s|--slurm catches what deploy would -------------------------------------------------------------


def test_config_check_with_a_target_catches_what_deploy_would_reject(tmp_path):
    env = {"NSYSKIT_REGISTRY": ECR, "NSYSKIT_GPUS_PER_NODE": "3"}
    assert invoke_in(tmp_path, "config", "--check", **env).returncode == 0  # the settings alone are well-formed
    deploy = invoke_in(tmp_path, "deploy", "--k8s", "--dry-run", **env)
    check = invoke_in(tmp_path, "config", "--check", "--k8s", **env)
    assert deploy.returncode == 1 and "GPUS_PER_NODE=3" in deploy.stderr and "does not divide" in deploy.stderr
    assert check.returncode == 1 and "GPUS_PER_NODE=3 " in check.stderr and "does not divide" in check.stderr
    assert "1 configuration problem(s)" in check.stderr


def test_config_check_slurm_and_k8s_together_list_both_targets_problems(tmp_path):
    shared = {"NSYSKIT_SLURM_SHARED_DIR": str(tmp_path)}  # the project on the cluster's shared file system
    result = invoke_in(tmp_path, "config", "--check", "--k8s", "--slurm", NSYSKIT_REGISTRY="", **shared)
    assert result.returncode == 1
    assert "REGISTRY=''" in result.stderr and "SLURM_CONTAINER_IMAGE='registry'" in result.stderr
    assert "2 configuration problem(s)" in result.stderr
    host = invoke_in(tmp_path, "config", "--check", "--slurm", NSYSKIT_REGISTRY="", NSYSKIT_SLURM_MODE="host", **shared)
    assert host.returncode == 0, host.stderr  # host mode pulls no image


@pytest.mark.skipif(Path("/fsx").exists(), reason="this machine has /fsx: it is not a laptop off the cluster")
def test_deploy_slurm_dry_run_on_a_laptop_prints_the_script_and_warnings_while_submit_and_check_refuse(tmp_path):
    env = {"NSYSKIT_REGISTRY": ECR}  # SLURM_SHARED_DIR stays the committed /fsx, which this machine lacks
    submit = invoke_in(tmp_path, "deploy", "--slurm", **env)
    assert submit.returncode == 1 and "SLURM_SHARED_DIR='/fsx'" in submit.stderr and not (tmp_path / "jobs").exists()
    check = invoke_in(tmp_path, "config", "--check", "--slurm", **env)
    assert check.returncode == 1 and "✗ SLURM_SHARED_DIR='/fsx': does not exist on this host" in check.stderr
    dry = invoke_in(tmp_path, "deploy", "--slurm", "--dry-run", **env)
    assert dry.returncode == 0, dry.stderr
    (script,) = (tmp_path / "jobs").glob("slurm-*/job.sbatch")
    assert script.read_text() in dry.stdout + "\n" and "--container-mounts=" in dry.stdout
    warning = "warning: a real submit would refuse: SLURM_SHARED_DIR='/fsx': does not exist on this host"
    assert [line for line in dry.stderr.splitlines() if line.startswith("warning:")] == [
        line for line in dry.stderr.splitlines() if line.startswith(warning) and "; fix: set SLURM_SHARED_DIR" in line
    ] != []


# --- deploy --k8s --wait exits with the launcher's exit code ---------------------------------------------------------


@pytest.fixture
def fake_cluster(tmp_path) -> dict[str, str]:
    """PATH with the kubectl stand-in first, and its state file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\n" + (HERE / "fake_kubectl.py").read_text())
    kubectl.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_KUBECTL_STATE": str(tmp_path / "state.json"),
            "NSYSKIT_REGISTRY": ECR}


def test_deploy_k8s_wait_exits_with_the_launchers_exit_code(tmp_path, fake_cluster):
    project = tmp_path / "project"
    project.mkdir()
    result = invoke_in(project, "deploy", "--k8s", "--wait", **fake_cluster, FAKE_LAUNCHER_EXIT="3")
    assert result.returncode == 3, result.stderr
    (job_dir,) = (project / "jobs").glob("k8s-*")
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: MPIJob nsyskit-{job_dir.name} ended Failed (exit code 3): the launcher exited 3")
    assert f"invoke logs --k8s --job {job_dir.name}" in line
    calls = json.loads(Path(fake_cluster["FAKE_KUBECTL_STATE"]).read_text())["calls"]
    assert calls[0][:2] == ["apply", "-f"] and calls[0][2].endswith(f"{job_dir.name}/mpijob.yaml")


def test_deploy_k8s_wait_succeeds_with_exit_code_0(tmp_path, fake_cluster):
    project = tmp_path / "project"
    project.mkdir()
    result = invoke_in(project, "deploy", "--k8s", "--wait", **fake_cluster, FAKE_LAUNCHER_EXIT="0")
    assert result.returncode == 0, result.stderr
    assert "ended Succeeded with exit code 0" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "next: 'invoke collect --k8s' gathers its reports"


def test_a_launcher_exit_code_over_255_exits_1_and_keeps_the_real_code_in_the_error():
    failed = JobFailed("k8s", "nsyskit-x", "Failed", 300, "l", "the launcher exited 300")
    assert failed.exit_code == 1 and failed.job_exit_code == 300 and "(exit code 300)" in failed.one_line()


# --- the flow: a failed job is collected, then fails with its own code ------------------------------------------------


class _Recorded:
    """A target whose job ends with a given exit code, recording the steps the flow calls (not a real cluster)."""

    name, submit_waits = "slurm", False

    def __init__(self, code: int, tmp_path: Path) -> None:
        self.code, self.tmp_path, self.steps = code, tmp_path, []

    def validate(self, cfg, root):
        self.steps.append("validate")

    def render(self, cfg, root, run_id=None):
        self.steps.append("render")
        return Job(self.name, self.tmp_path / "job-1")

    def submit(self, cfg, job):
        self.steps.append("submit")
        job.job_id, job.submitted = "17", True

    def wait(self, cfg, job):
        self.steps.append("wait")
        return Outcome("FAILED" if self.code else "COMPLETED", self.code, "/logs/slurm-17.out", "reason NonZeroExitCode")

    def collect(self, cfg, root, job):
        self.steps.append(f"collect {job}")
        return self.tmp_path / "reports" / job


def test_run_collects_a_failed_job_then_raises_its_exit_code(tmp_path):
    target = _Recorded(42, tmp_path)
    with pytest.raises(JobFailed) as failed:
        targets.run(target, config(), tmp_path)
    assert target.steps == ["validate", "render", "submit", "wait", "collect job-1"]
    assert failed.value.exit_code == 42 and failed.value.job_id == "17" and failed.value.state == "FAILED"
    assert failed.value.logs == "/logs/slurm-17.out"
    assert failed.value.reports == str(tmp_path / "reports" / "job-1")
    assert failed.value.one_line().endswith(f"; reports collected in {tmp_path / 'reports' / 'job-1'}")


class _Interrupted(_Recorded):
    """A target whose wait is cut by Ctrl-C."""

    def wait(self, cfg, job):
        raise KeyboardInterrupt


def test_ctrl_c_while_waiting_says_the_job_keeps_running_and_how_to_stop_it(tmp_path):
    with pytest.raises(JobInterrupted) as stopped:
        targets.deploy(_Interrupted(0, tmp_path), config(), tmp_path, wait=True)
    line = stopped.value.one_line()
    assert stopped.value.exit_code == 130 and "Slurm job 17 keeps running" in line
    assert "'invoke undeploy --slurm' cancels it" in line and "'invoke collect --slurm'" in line


def test_deploy_dry_run_stops_after_render(tmp_path):
    target = _Recorded(0, tmp_path)
    result = targets.deploy(target, config(), tmp_path, dry_run=True)
    assert target.steps == ["validate", "render"] and not result.job.submitted


# --- multi-node decided once; the long-running container gets the run's host config ---------------------------------


@pytest.mark.parametrize(("nodes", "kind", "role"), [("1", "torchrun", "worker-0"), ("2", "mpirun", "launcher")])
def test_multi_node_is_decided_in_one_place(nodes, kind, role):
    cfg = config("cpu", NODES=nodes)
    assert cluster.multi_node(cfg) is (nodes != "1")
    assert cluster.launcher_kind(cfg) == kind and cluster.launcher_role(cfg) == role


def test_containers_get_sys_admin_only_when_sampling(tmp_path):  # nsyskit-dev too: see test_run_local
    sampling = cluster.host_config(config("cpu", NSYS_SAMPLE="process-tree"), tmp_path)
    plain = cluster.host_config(config("cpu", NSYS_SAMPLE="none"), tmp_path)
    assert sampling["cap_add"] == ["SYS_ADMIN"] and "cap_add" not in plain
    assert sampling["volumes"] == {str(tmp_path.resolve()): {"bind": "/reports", "mode": "rw"}}
