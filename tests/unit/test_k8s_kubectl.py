"""The k8s target against a real kubectl and no API server: one clear line per task; kubectl's failures explained."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from k8s_variants import ECR as ECR_HOST
from k8s_variants import ROOT, config

from nsyskit import hostpkgs, k8s, targets
from nsyskit.errors import ClusterError, ClusterUnreachable, KubectlMissing, NsyskitError
from nsyskit.k8s import kubectl, render

KLOG = (
    'E1121 22:28:51.855457   12688 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list"'
)


@pytest.fixture(scope="session")
def real_kubectl() -> str:
    """kubectl on PATH, installed from Debian (kubernetes-client) on a fresh machine."""
    if not shutil.which("kubectl"):
        hostpkgs.install("kubectl")
    path = shutil.which("kubectl")
    assert path, "kubectl is still missing after 'apt-get install kubernetes-client'"
    return path


@pytest.fixture
def no_cluster(real_kubectl, tmp_path, monkeypatch) -> str:
    """A kubeconfig whose API server is a loopback port nothing listens on; returns its host:port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: connections to it are refused
    server = f"https://127.0.0.1:{port}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "nobody", "user": {"token": "not-a-token"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "nobody"}}],
                "current-context": "gone",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    return server.removeprefix("https://")


@pytest.fixture
def project(tmp_path) -> Path:
    """A project root with this repository's templates and an empty jobs/."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "k8s").symlink_to(ROOT / "k8s")
    return root


def assert_one_clear_line(error: NsyskitError, *words: str) -> str:
    """The error's one line: no newline, no klog noise, with a fix and the given words."""
    line = error.one_line()
    assert line == str(error).strip() and "\n" not in line, str(error)
    assert "fix:" in line and "memcache.go" not in line and "Unhandled Error" not in line, line
    for word in words:
        assert word in line, line
    return line


def test_deploy_without_a_reachable_cluster_fails_in_one_line_and_keeps_the_rendered_files(no_cluster, project):
    with pytest.raises(ClusterUnreachable) as error:
        targets.deploy(targets.get("k8s"), config(), project)
    line = assert_one_clear_line(
        error.value, "submitting MPIJob nsyskit-k8s-", f"no Kubernetes API server reachable at {no_cluster}",
        "(connection refused)", "rendered files kept in jobs/k8s-",
    )  # fmt: skip
    assert error.value.cmd[:3] == ["kubectl", "apply", "-f"] and error.value.returncode != 0
    job_dir = k8s.jobdir.find_job_dir(project, "k8s")
    assert f"jobs/{job_dir.name}/" in line and (job_dir / render.MPIJOB_FILE).is_file()
    assert k8s.jobdir.read_record(job_dir)["submitted"] is False


def test_without_any_kubeconfig_the_line_names_kubectls_fallback_server(real_kubectl, project, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ClusterUnreachable) as error:
        targets.deploy(targets.get("k8s"), config(), project)
    assert_one_clear_line(error.value, "localhost:8080", "KUBECONFIG")


@pytest.mark.parametrize("action", ["undeploy", "status", "logs", "collect", "k8s-setup"])
def test_every_task_without_a_cluster_fails_in_one_line(no_cluster, project, action):
    cfg = config()
    targets.deploy(targets.get("k8s"), cfg, project, dry_run=True)  # a last job to act on
    calls = {
        "undeploy": lambda: k8s.undeploy(cfg, project, None),
        "status": lambda: k8s.status(cfg, project, None),
        "logs": lambda: k8s.logs(cfg, project, None, follow=False),
        "collect": lambda: k8s.collect(cfg, project, None),
        "k8s-setup": lambda: k8s.setup_operator(cfg, project),
    }
    with pytest.raises(ClusterUnreachable) as error:
        calls[action]()
    assert_one_clear_line(error.value, f"no Kubernetes API server reachable at {no_cluster}")


def test_without_kubectl_the_line_says_how_to_install_it(project, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(KubectlMissing) as error:
        targets.deploy(targets.get("k8s"), config(), project)
    assert_one_clear_line(error.value, "kubectl is not installed", "apt-get install kubernetes-client", "--dry-run")


def test_acting_on_a_job_before_any_deploy_says_so(project):
    with pytest.raises(NsyskitError) as error:
        k8s.status(config(), project, None)
    assert "no k8s job deployed" in error.value.one_line() and "fix:" in error.value.one_line()


# --- kubectl's failures, explained --------------------------------------------------------------------------


def test_missing_crd_points_at_k8s_setup():
    stderr = 'error: resource mapping not found for name: "x" namespace: "" from "m.yaml": no matches for kind "MPIJob" in version "kubeflow.org/v2beta1"\nensure CRDs are installed first\n'
    error = kubectl.explain("submitting MPIJob x", ["kubectl", "apply"], 1, stderr)
    assert type(error) is ClusterError and "no MPIJob CRD" in str(error) and "invoke k8s-setup" in str(error)


def test_not_found_names_ttl_and_how_to_list_jobs():
    stderr = 'Error from server (NotFound): mpijobs.kubeflow.org "nsyskit-k8s-1" not found\n'
    error = kubectl.explain("getting the status of MPIJob nsyskit-k8s-1", ["kubectl", "get"], 1, stderr)
    assert "not found" in str(error) and "kubectl get mpijobs -A" in str(error) and "\n" not in str(error)


def test_other_failures_keep_kubectls_last_meaningful_line_without_klog_noise():
    stderr = (
        f'{KLOG}\nError from server (Forbidden): mpijobs.kubeflow.org is forbidden: User "u" cannot create\n{KLOG}\n'
    )
    error = kubectl.explain("submitting MPIJob x", ["kubectl", "apply"], 1, stderr)
    assert (
        str(error)
        == 'submitting MPIJob x: kubectl exited 1: Error from server (Forbidden): mpijobs.kubeflow.org is forbidden: User "u" cannot create'
    )


def test_command_adds_namespace_and_request_timeout():
    assert kubectl.command("get", "mpijob", "x", namespace="ns") == [
        "get", "mpijob", "x", "--namespace", "ns", f"--request-timeout={kubectl.REQUEST_TIMEOUT}",
    ]  # fmt: skip


# --- wait and collect helpers ---------------------------------------------------------------------------------------


def test_launcher_exit_code_comes_from_the_terminated_container():
    running = {"status": {"containerStatuses": [{"state": {"running": {}}}]}}
    failed = {"status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}}
    assert k8s.launcher_exit_code(running) is None and k8s.launcher_exit_code(failed) == 3


def test_merge_moves_reports_and_keeps_clashing_names_apart(tmp_path):
    dest = tmp_path / "reports" / "job"
    for pod in ("job-worker-0", "job-worker-1"):
        (tmp_path / pod).mkdir()
        (tmp_path / pod / f"rank{pod[-1]}.nsys-rep").write_text(pod)
        (tmp_path / pod / "node.log").write_text(pod)
        k8s._merge(tmp_path / pod, dest, keep=None)
    assert sorted(path.name for path in dest.iterdir()) == [
        "job-worker-1-node.log",
        "node.log",
        "rank0.nsys-rep",
        "rank1.nsys-rep",
    ]


def test_merge_keeps_only_this_jobs_files_from_an_injectors_shared_folder(tmp_path):
    (tmp_path / "pod").mkdir()
    (tmp_path / "pod" / "nsyskit-a-worker-0_rank0_python3.nsys-rep").write_text("")
    (tmp_path / "pod" / "nsyskit-b-worker-0_rank0_python3.nsys-rep").write_text("")
    k8s._merge(tmp_path / "pod", tmp_path / "out", keep="nsyskit-a")
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["nsyskit-a-worker-0_rank0_python3.nsys-rep"]


def test_where_reports_are_when_the_worker_pods_are_gone():
    cfg = config()
    where, fix = k8s.where_reports_are("nsyskit-j", {"report_volume": "hostpath", "report_host_path": "/data"}, cfg)
    assert "/data/nsyskit-j/" in where and "K8S_CLEAN_POD_POLICY=none" in fix
    where, fix = k8s.where_reports_are("nsyskit-j", {"report_volume": "pvc", "report_pvc": "fsx"}, cfg)
    assert "claim fsx (nsyskit-j/)" in where and "kubectl cp" in fix


def test_kubeconfig_fixture_does_not_leak(no_cluster):
    assert os.environ["KUBECONFIG"].endswith("kubeconfig")


# --- the tasks, as a user runs them ---------------------------------------------------------------------------------


def invoke_in(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run 'invoke ARGS' in a copy of this project's front whose root (and so jobs/) is PROJECT."""
    for name in ("tasks.py", ".env"):
        if not (project / name).exists():
            shutil.copy2(ROOT / name, project / name)
    if not (project / "profiles").exists():
        (project / "profiles").symlink_to(ROOT / "profiles")
    environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"} | env
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=project, env=environ, capture_output=True, text=True, timeout=120
    )


def test_deploy_task_without_a_cluster_prints_one_error_line_and_exits_1(no_cluster, project):
    result = invoke_in(project, "deploy", "--k8s", NSYSKIT_REGISTRY=ECR_HOST)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: submitting MPIJob nsyskit-k8s-"), result.stderr
    assert f"reachable at {no_cluster} (connection refused)" in lines[0]


def test_deploy_task_dry_run_needs_no_cluster_and_prints_where_the_files_are(project):
    result = invoke_in(
        project,
        "deploy",
        "--k8s",
        "--dry-run",
        "--nodes",
        "3",
        NSYSKIT_REGISTRY=ECR_HOST,
        PATH="/nonexistent:" + os.path.dirname(sys.executable),
    )
    assert result.returncode == 0, result.stderr
    assert "3 worker(s) x 8 slot(s) = 24 ranks" in result.stdout
    job_dir = k8s.jobdir.find_job_dir(project, "k8s")
    assert f"jobs/{job_dir.name}/mpijob.yaml" in result.stdout and "dry run: nothing submitted" in result.stdout


def test_deploy_task_rejects_bad_values_in_one_line_before_writing(project):
    result = invoke_in(project, "deploy", "--k8s", "--dry-run", NSYSKIT_REGISTRY=ECR_HOST, NSYSKIT_GPUS_PER_NODE="3")
    assert result.returncode == 1 and result.stderr.startswith(
        "error: GPUS_PER_NODE=3 (from environment): does not divide"
    )
    assert len(result.stderr.strip().splitlines()) == 1 and not (project / "jobs").exists()


def test_ended_state_reads_the_mpijob_conditions():
    running = {"status": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}}
    done = {"status": {"conditions": [{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]}}
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert k8s.ended_state(running) is None and k8s.ended_state({}) is None
    assert k8s.ended_state(done) == "Succeeded" and k8s.ended_state(failed) == "Failed"
