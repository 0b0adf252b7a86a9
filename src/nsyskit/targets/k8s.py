"""The Kubernetes target: the job as a Kubeflow MPIJob (nsyskit.k8s), in the Target contract, with its config checks."""

from __future__ import annotations

import re
from pathlib import Path

from nsyskit.config import Config
from nsyskit.config.k8s_parse import quantity_bytes
from nsyskit.errors import ConfigError, ConfigErrors
from nsyskit.targets.base import ClusterSteps, Job, Outcome


def problems(cfg: Config) -> list[ConfigError]:
    """Every setting a cluster job cannot run with (what render and the cluster would reject)."""
    errors: list[ConfigError] = []

    def err(key: str, value: object, problem: str, fix: str) -> None:
        errors.append(ConfigError(key, value, problem, fix, cfg.sources.get(key, "")))

    if cfg.nodes < 1:
        err("NODES", cfg.nodes, "an MPIJob needs at least one worker", "set NODES to 1 or more")
    if cfg.procs_per_node < 1:
        err("PROCS_PER_NODE", cfg.procs_per_node, "each worker needs at least one slot", "set PROCS_PER_NODE to 1 or more")
    elif cfg.gpus_per_node and cfg.procs_per_node % cfg.gpus_per_node:
        err("GPUS_PER_NODE", cfg.gpus_per_node,
            f"does not divide PROCS_PER_NODE={cfg.procs_per_node}, so the ranks of a worker cannot share its GPUs evenly",
            f"set PROCS_PER_NODE to a multiple of GPUS_PER_NODE (usually equal: {cfg.gpus_per_node}), or GPUS_PER_NODE to a divisor of it")  # fmt: skip
    if not cfg.registry:
        err("REGISTRY", cfg.registry, f"the cluster must pull the image {cfg.image_ref} from a registry, but REGISTRY is empty",
            "set REGISTRY (e.g. ACCOUNT.dkr.ecr.REGION.amazonaws.com) and run 'invoke push'")  # fmt: skip
    sizes = cfg.k8s_worker_sizes  # auto resolved; a message shows 'auto (5120Mi)'
    shown = {key: f"auto ({sizes[key]})" if raw == "auto" else raw for key, raw in
             (("memory", cfg.k8s_memory), ("shm", cfg.k8s_shm_size), ("hugepages", cfg.k8s_hugepages))}  # fmt: skip
    if sizes["hugepages"] and not sizes["memory"]:
        err("K8S_HUGEPAGES", shown["hugepages"], "Kubernetes admits huge pages only with a memory request, and K8S_MEMORY is empty",
            "set K8S_MEMORY (e.g. 256Gi, or auto), or K8S_HUGEPAGES=0")  # fmt: skip
    if sizes["memory"] and sizes["shm"] and quantity_bytes(sizes["shm"]) > quantity_bytes(sizes["memory"]):
        err("K8S_SHM_SIZE", shown["shm"], f"is larger than K8S_MEMORY={shown['memory']}, and /dev/shm counts against it",
            "lower K8S_SHM_SIZE or raise K8S_MEMORY")  # fmt: skip
    if cfg.k8s_report_volume == "pvc" and not cfg.k8s_report_pvc:
        err("K8S_REPORT_PVC", "", "K8S_REPORT_VOLUME=pvc needs the name of a claim",
            "set K8S_REPORT_PVC to an existing ReadWriteMany claim, or K8S_REPORT_VOLUME=hostpath")  # fmt: skip
    if cfg.instance_type and not label_value_ok(cfg.instance_type):
        err("INSTANCE_TYPE", cfg.instance_type, "is not a valid Kubernetes label value",
            "use an instance type such as p5.48xlarge, or leave it empty for no node selector")  # fmt: skip
    return errors


def label_value_ok(value: str) -> bool:
    """True for a valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    return bool(re.fullmatch(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", value))


class K8sTarget(ClusterSteps):
    """kubectl: render the MPIJob (CRD-validated), apply it, watch its conditions, copy the reports out of the pods."""

    name = "k8s"
    module = "nsyskit.k8s"
    submit_waits = False

    def validate(self, cfg: Config, root: Path) -> None:
        """Every problem at once, before anything is written."""
        if errors := problems(cfg):
            raise ConfigErrors(errors)

    def render(self, cfg: Config, root: Path, run_id: str | None = None) -> Job:
        """The MPIJob (and injector files) in a fresh jobs/k8s-<time>/, valid against the CRD."""
        from nsyskit import k8s

        job_dir, name, files = k8s.render_job(cfg, root)
        job = Job(self.name, job_dir, name, list(files.values()), lines=k8s.rendered_lines(cfg, root, job_dir, name, files))
        job.how_to_submit = f"kubectl apply -f {k8s._relative(files[k8s.render.MPIJOB_FILE], root)}"
        return job

    def submit(self, cfg: Config, job: Job) -> None:
        """kubectl apply."""
        from nsyskit import k8s

        job.lines += k8s.submit(Path(job.job_dir).parent.parent, job.job_dir, job.job_id)
        job.submitted = True

    def wait(self, cfg: Config, job: Job) -> Outcome:
        """Until the MPIJob succeeded or failed: the launcher's exit code (1 for a failure without one)."""
        from nsyskit import k8s

        state, code = k8s.wait_for(job.job_id, cfg.k8s_namespace)
        if state == "Failed" and not code:
            code, reason = 1, "the MPIJob failed without a launcher exit code (see 'invoke status --k8s')"
        else:
            code, reason = code or 0, f"the launcher exited {code}" if code else ""
        logs = f"'invoke logs --k8s --job {job.job_dir.name}'"
        return Outcome(state, code, logs, reason, lines=[f"MPIJob {job.job_id} ended {state} with exit code {code}"])


TARGET = K8sTarget()
