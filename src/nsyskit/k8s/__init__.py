"""Kubernetes: the job as a Kubeflow MPIJob, managed with kubectl (steps of nsyskit.targets.k8s)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from nsyskit import console, jobdir
from nsyskit.assets import kit_root
from nsyskit.config import Config
from nsyskit.errors import ClusterError, ClusterUnreachable, JobNotFound, NsyskitError
from nsyskit.k8s import crd, kubectl, render
from nsyskit.local import runfolder
from nsyskit.ranks import launch

TARGET = "k8s"
OPERATOR_VERSION = "v0.8.2"  # the release whose CRD k8s/crds/ holds and the renderer targets
OPERATOR_MANIFEST = (
    f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{OPERATOR_VERSION}/deploy/v2beta1/mpi-operator.yaml"
)
OPERATOR_NAMESPACE = "mpi-operator"
WAIT_POLL_S = 10.0


def job_name(job_dir: Path) -> str:
    """The MPIJob name of a job folder: 'nsyskit-' + the folder name (a valid DNS label)."""
    return f"nsyskit-{job_dir.name}".lower()


def _relative(path: Path, root: Path) -> str:
    """PATH relative to the project root when inside it (shorter messages), else absolute."""
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def render_job(cfg: Config, root: Path) -> tuple[Path, str, dict[str, Path]]:
    """Render and CRD-validate the job's files into a fresh jobs/<id>/: (folder, MPIJob name, files by name)."""
    with jobdir.fresh_job_dir(root, TARGET) as job_dir:  # a render or validation error leaves no folder
        name = job_name(job_dir)
        texts = render.render(cfg, name, root)
        crd.validate(
            texts[render.MPIJOB_FILE], kit_root(root) / crd.CRD_FILE, name=_relative(job_dir / render.MPIJOB_FILE, root)
        )
        files = {}
        for filename, text in texts.items():
            files[filename] = job_dir / filename
            files[filename].write_text(text)
        jobdir.write_record(
            job_dir, job_id=name, namespace=cfg.k8s_namespace, profiler=cfg.k8s_profiler, image=cfg.image_ref,
            report_volume=cfg.k8s_report_volume, report_host_path=cfg.k8s_report_host_path, report_pvc=cfg.k8s_report_pvc,
            world_size=cfg.world_size, nodes=cfg.nodes, submitted=False,
            workload=cfg.workload, nccl_tests=runfolder.nccl_test_record(cfg),
        )  # fmt: skip
    return job_dir, name, files


def rendered_lines(cfg: Config, root: Path, job_dir: Path, name: str, files: dict[str, Path]) -> list[str]:
    """What deploy prints about the rendered files (and the injector's helm command)."""
    lines = [f"rendered MPIJob {name} ({cfg.nodes} worker(s) x {cfg.procs_per_node} slot(s) = {cfg.world_size} ranks, "
             f"namespace {cfg.k8s_namespace}) into {_relative(job_dir, root)}/, valid against the MPIJob CRD {OPERATOR_VERSION}"]  # fmt: skip
    lines += [f"  {_relative(path, root)}" for path in files.values()]
    if render.VALUES_FILE in files:
        chart = render.INJECTORS[cfg.k8s_profiler]["chart"]
        lines.append(f"profiling by {cfg.k8s_profiler}: install it with 'helm upgrade --install -f "
                     f"{_relative(files[render.VALUES_FILE], root)} {cfg.k8s_profiler} {chart}' before the job starts")  # fmt: skip
    return lines


def submit(root: Path, job_dir: Path, name: str) -> list[str]:
    """'kubectl apply' the rendered MPIJob; kubectl's output lines. A failure keeps (and names) the rendered files."""
    try:
        output = kubectl.run(
            f"submitting MPIJob {name}", kubectl.command("apply", "-f", str(job_dir / render.MPIJOB_FILE))
        )
    except ClusterError as exc:
        problem = str(exc).split("; fix: ")[0] if exc.fix else str(exc)
        raise type(exc)(
            f"{problem} (rendered files kept in {_relative(job_dir, root)}/)", exc.cmd, exc.returncode, exc.stderr,
            fix=exc.fix,
        ) from None
    jobdir.write_record(job_dir, submitted=True)
    return [line for line in output.strip().splitlines() if line]


def _job(cfg: Config, root: Path, job: str | None) -> tuple[str, str, dict[str, Any]]:
    """(MPIJob name, namespace, job.json record) of JOB or of the last k8s job; an unknown name is taken as an MPIJob name."""
    try:
        folder = jobdir.find_job_dir(root, TARGET, job)
    except NsyskitError:
        if job and not (Path(root) / jobdir.JOBS / job).exists():
            return job, cfg.k8s_namespace, {}  # an MPIJob not deployed from this project
        raise
    record = jobdir.read_record(folder)
    return (
        record.get("job_id") or job_name(folder),
        record.get("namespace") or cfg.k8s_namespace,
        {**record, "dir": folder},
    )


def undeploy(cfg: Config, root: Path, job: str | None) -> str:
    """Delete the MPIJob (and so its pods); a job already gone is not an error."""
    name, namespace, _ = _job(cfg, root, job)
    output = kubectl.run(
        f"deleting MPIJob {name}", kubectl.command("delete", "mpijob", name, "--ignore-not-found", namespace=namespace)
    )
    return output.strip() or f"MPIJob {name} is not in namespace {namespace} (already deleted or expired)"


def status(cfg: Config, root: Path, job: str | None) -> str:
    """The MPIJob's state and its pods (kubectl get)."""
    name, namespace, _ = _job(cfg, root, job)
    what = f"getting the status of MPIJob {name}"
    job_table = kubectl.run(what, kubectl.command("get", "mpijob", name, "-o", "wide", namespace=namespace))
    pods = kubectl.run(
        what, kubectl.command("get", "pods", "-l", f"{render.JOB_LABEL}={name}", "-o", "wide", namespace=namespace)
    )
    return job_table.rstrip() + "\n\n" + (pods.rstrip() or f"no pods of {name} (yet, or any more)")


def _pods(name: str, namespace: str, role: str) -> list[dict[str, Any]]:
    """The pods of one role (launcher/worker) of an MPIJob, as kubectl's JSON items, oldest first."""
    selector = f"{render.JOB_LABEL}={name},{render.ROLE_LABEL}={role}"
    output = kubectl.run(
        f"listing the {role} pods of MPIJob {name}",
        kubectl.command("get", "pods", "-l", selector, "-o", "json", namespace=namespace),
    )
    items = json.loads(output or "{}").get("items", [])
    return sorted(items, key=lambda pod: pod["metadata"].get("creationTimestamp", ""))


def logs(cfg: Config, root: Path, job: str | None, follow: bool) -> None:
    """Print the launcher's output (mpirun and every rank's stdout), following it with follow=True."""
    name, namespace, _ = _job(cfg, root, job)
    launchers = _pods(name, namespace, "launcher")
    if not launchers:
        raise JobNotFound(
            f"MPIJob {name} has no launcher pod yet (it starts when every worker is ready)", fix="see 'invoke status --k8s'"
        )
    pod = launchers[-1]["metadata"]["name"]
    args = ["logs", f"pod/{pod}", "--namespace", namespace] + (["--follow"] if follow else [])
    kubectl.stream(f"reading the logs of {pod}", args)


def ended_state(mpijob: dict[str, Any]) -> str | None:
    """'Succeeded' or 'Failed' when an MPIJob (kubectl's JSON) has ended, else None."""
    for condition in mpijob.get("status", {}).get("conditions", []):
        if condition.get("type") in ("Succeeded", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


def _ended(name: str, namespace: str) -> str | None:
    """'Succeeded' or 'Failed' once the MPIJob has ended, else None (kubectl get)."""
    output = kubectl.run(
        f"watching MPIJob {name}", kubectl.command("get", "mpijob", name, "-o", "json", namespace=namespace)
    )
    return ended_state(json.loads(output))


def launcher_exit_code(pod: dict[str, Any]) -> int | None:
    """The exit code of a launcher pod's container once it terminated, else None."""
    for container in pod.get("status", {}).get("containerStatuses", []):
        terminated = container.get("state", {}).get("terminated")
        if terminated is not None:
            return int(terminated.get("exitCode", 1))
    return None


def wait_for(name: str, namespace: str, poll_s: float = WAIT_POLL_S) -> tuple[str, int | None]:
    """Block until the MPIJob has succeeded or failed: (Succeeded|Failed, its launcher's exit code or None)."""
    phases = console.Phases(f"MPIJob {name}")
    while (state := _ended(name, namespace)) is None:
        phases.update("running")
        time.sleep(poll_s)
    phases.update(state.lower())
    launchers = _pods(name, namespace, "launcher")
    return state, launcher_exit_code(launchers[-1]) if launchers else None


def collect(cfg: Config, root: Path, job: str | None) -> Path:
    """Copy the job's reports out of its running worker pods into REPORT_DIR/<job>/ (kubectl cp)."""
    name, namespace, record = _job(cfg, root, job)
    volume = record.get("report_volume", cfg.k8s_report_volume)
    workers = [pod for pod in _pods(name, namespace, "worker") if pod.get("status", {}).get("phase") == "Running"]
    if not workers:
        raise JobNotFound(*where_reports_are(name, record, cfg))
    if volume == "pvc" and record.get("profiler", cfg.k8s_profiler) == "wrapper":
        workers = workers[:1]  # every worker mounts the same folder of the claim
    dest = Path(root) / cfg.report_dir / name
    staging = dest / ".staging"
    for pod in workers:
        pod_name = pod["metadata"]["name"]
        target = staging / pod_name
        kubectl.run(
            f"copying the reports out of {pod_name}",
            ["cp", "--namespace", namespace, "-c", "worker", f"{pod_name}:{launch.CONTAINER_REPORT_DIR}", str(target)],
        )
        _merge(target, dest, keep=None if record.get("profiler", "wrapper") == "wrapper" else name)
    shutil.rmtree(staging, ignore_errors=True)
    if "dir" in record:
        shutil.copy2(Path(record["dir"]) / jobdir.RECORD, dest / jobdir.RECORD)
    state = _ended(name, namespace)  # None: collected while the job still runs
    launchers = _pods(name, namespace, "launcher") if state else []
    runfolder.write_run_record(
        dest, cfg, TARGET, name, launcher="mpirun", world_size=record.get("world_size", cfg.world_size),
        exit_code=launcher_exit_code(launchers[-1]) if launchers else None, ended_how=state or "running",
        nodes=record.get("nodes", cfg.nodes), image=record.get("image", cfg.image_ref),
        workload=record.get("workload", "ddp"), nccl_tests=record.get("nccl_tests", []),
        details={"namespace": namespace, "k8s_profiler": record.get("profiler", cfg.k8s_profiler), "job_dir": str(record.get("dir", ""))},
    )  # fmt: skip
    return dest


def _merge(source: Path, dest: Path, keep: str | None) -> None:
    """Move the files of one pod's copy into DEST (only names containing KEEP, when given); clashing names get the pod's."""
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        if keep and keep not in path.name:
            continue  # an injector's shared folder also holds other jobs' reports
        target = dest / path.relative_to(source)
        if target.exists():
            target = target.with_name(f"{source.name}-{target.name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), target)


def where_reports_are(name: str, record: dict[str, Any], cfg: Config) -> tuple[str, str]:
    """Where the reports of a job whose worker pods are gone can be found, and how to get them (problem, fix)."""
    if record.get("report_volume", cfg.k8s_report_volume) == "pvc":
        claim = record.get("report_pvc", cfg.k8s_report_pvc)
        folder = f"{name}/" if record.get("profiler", "wrapper") == "wrapper" else f"files named {name}-worker-*"
        return (f"MPIJob {name} has no running worker pod to copy from; its reports are on the claim {claim} "
                f"({folder})", "mount the claim in a pod and 'kubectl cp' them, or read them where the volume lives (e.g. FSx)")  # fmt: skip
    base = record.get("report_host_path", cfg.k8s_report_host_path)
    folder = (
        f"{base}/{name}/"
        if record.get("profiler", "wrapper") == "wrapper"
        else f"{base}/ (files named {name}-worker-*)"
    )
    return (f"MPIJob {name} has no running worker pod to copy from; its reports stay on the nodes that ran it, in {folder}",
            "copy them from the nodes, and next time keep K8S_CLEAN_POD_POLICY=none and collect before K8S_TTL_SECONDS_AFTER_FINISHED")  # fmt: skip


def operator_installed(cfg: Config) -> bool:
    """True when the cluster has the MPIJob CRD (raises ClusterUnreachable when there is no cluster)."""
    try:
        kubectl.run("looking for the MPIJob CRD", kubectl.command("get", "crd", kubectl.MPIJOB_CRD, "-o", "name"))
    except ClusterUnreachable:
        raise
    except ClusterError as exc:
        if "(notfound)" in exc.stderr.lower().replace(" ", ""):
            return False
        raise
    return True


def setup_operator(cfg: Config, root: Path) -> str:
    """Apply the pinned MPI operator release when the cluster lacks the MPIJob CRD; says what was done."""
    if operator_installed(cfg):
        return f"the MPIJob CRD ({kubectl.MPIJOB_CRD}) is installed: nothing to do"
    manifest = cfg.k8s_mpi_operator_manifest or OPERATOR_MANIFEST
    if "://" not in manifest:
        manifest = str((Path(root) / manifest).resolve())
    kubectl.run("installing the MPI operator", ["apply", "--server-side", "-f", manifest])
    kubectl.run(
        "waiting for the MPI operator",
        ["rollout", "status", "deployment/mpi-operator", "--namespace", OPERATOR_NAMESPACE, "--timeout=300s"],
    )
    return f"installed the MPI operator from {manifest}; 'invoke deploy --k8s' can submit MPIJobs now"
