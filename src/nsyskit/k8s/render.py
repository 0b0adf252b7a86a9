"""Pure rendering of the Kubernetes files of a job (MPIJob, injector helm values, pod label) from the config."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import jinja2

from nsyskit.assets import kit_root
from nsyskit.config import Config
from nsyskit.ranks import launch, nsysargs, workloads
from nsyskit.templates import render_template

TEMPLATES = "k8s"  # the templates folder under the project root
MPIJOB_FILE = "mpijob.yaml"
VALUES_FILE = "injector-values.yaml"
LABEL_FILE = "pod-label.yaml"

# Labels nsyskit puts on its pods, so status/logs/collect find them without the operator's own labels.
JOB_LABEL = "nsyskit/job"
ROLE_LABEL = "nsyskit/role"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# The injection label each NVIDIA injector watches for, and the chart that installs it.
INJECTORS = {
    "devtools-sidecar-injector": {
        "label": ("nvidia-devtools-sidecar-injector", "enabled"),
        "chart": "https://helm.ngc.nvidia.com/nvidia/devtools/charts/devtools-sidecar-injector-1.0.0.tgz",
    },
    "nsight-operator": {
        "label": ("nvidia-nsight-profile", "enabled"),
        "chart": "https://helm.ngc.nvidia.com/nvidia/devtools/charts/nsight-operator-1.1.0.tgz",
    },
}
# Which processes the injector wraps: the example that the ranks run, or the NCCL test binaries (not rank0tee).
INJECTION_MATCH = "^.*" + re.escape(launch.EXAMPLE) + ".*$"
NCCL_TESTS_MATCH = "^(\\S*/)?(" + "|".join(workloads.installed_binaries()) + ")( .*)?$"
SSH_PORT = 22


def worker_host(job: str, index: int) -> str:
    """DNS name of worker `index` of MPIJob `job`, as the operator writes it into the hostfile (service <job>-worker)."""
    return f"{job}-worker-{index}.{job}-worker"


def launcher_command(cfg: Config, job: str) -> list[str]:
    """What the launcher runs: launch.mpirun_command, with the ranks unwrapped when an injector profiles them."""
    # mpirun does not tell the ranks where rank 0 is: export worker 0's name, as the local multi-node run does.
    # With an injector, which starts nsys itself, the ranks run unwrapped: the wrapper too would profile them twice.
    return launch.mpirun_command(cfg, master_addr=worker_host(job, 0), job_id=job, wrapped=cfg.k8s_profiler == "wrapper")


def worker_command() -> list[str]:
    """What every worker runs: sshd in the foreground, so the launcher's mpirun can start ranks over ssh."""
    # Host keys are made at start when the image has none (images should not share baked-in keys).
    return ["/bin/bash", "-c", "mkdir -p /run/sshd && ssh-keygen -A && exec /usr/sbin/sshd -De"]


def report_volume(cfg: Config, job: str) -> dict[str, Any]:
    """The worker volume that holds reports: a per-job hostPath folder, or the claim (with a per-job subPath)."""
    if cfg.k8s_report_volume == "pvc":
        return {
            "volume": {"name": "reports", "persistentVolumeClaim": {"claimName": cfg.k8s_report_pvc}},
            "sub_path": job,
        }
    path = f"{cfg.k8s_report_host_path}/{job}"
    return {"volume": {"name": "reports", "hostPath": {"path": path, "type": "DirectoryOrCreate"}}, "sub_path": None}


def worker_resources(cfg: Config) -> dict[str, str | int]:
    """Requests = limits of each worker: GPUs, EFA devices, huge pages and memory (extended resources need both equal)."""
    resources: dict[str, str | int] = {}
    if cfg.gpus_per_node:
        resources["nvidia.com/gpu"] = cfg.gpus_per_node
    if cfg.efa_per_node:
        resources["vpc.amazonaws.com/efa"] = cfg.efa_per_node
    sizes = cfg.k8s_worker_sizes  # K8S_MEMORY and K8S_HUGEPAGES, auto resolved (none of a GPU node's on CPU)
    if sizes["hugepages"]:
        resources["hugepages-2Mi"] = sizes["hugepages"]
    if sizes["memory"]:
        resources["memory"] = sizes["memory"]
    return resources


def capabilities(cfg: Config) -> list[str]:
    """Linux capabilities the workers need: IPC_LOCK to pin EFA memory, SYS_ADMIN for nsys CPU sampling or ncu on GPUs."""
    caps = []
    if cfg.efa_per_node:
        caps.append("IPC_LOCK")
    if cfg.nsys_sample != "none" or cfg.needs_gpu_counters:  # ncu: GPU counters are admin-only by default
        caps.append("SYS_ADMIN")
    return caps


def injector_label(cfg: Config) -> tuple[str, str] | None:
    """The (key, value) pod label of the configured injector, or None for the wrapper."""
    injector = INJECTORS.get(cfg.k8s_profiler)
    return injector["label"] if injector else None


def injector_nsys_args(cfg: Config) -> str:
    """'nsys profile' arguments for the injector: the wrapper's (nsysargs), with per-pod, per-rank report names.

    The settings an injector cannot honour (a rank selection, EFA counters) are refused by 'invoke config --check'.
    """
    # {..} are filled in by the injector, %{..} by nsys from the process environment (mpirun sets the rank).
    placeholders = {
        "devtools-sidecar-injector": "%{POD_FULLNAME}_rank%{OMPI_COMM_WORLD_RANK}_{PROCESS_NAME}_{TIMESTAMP}_{UID}",
        "nsight-operator": "%{NVDT_POD_FULLNAME}_rank%{OMPI_COMM_WORLD_RANK}_{NVDT_PROCESS_NAME}_{NVDT_TIMESTAMP}_{NVDT_UID}",
    }[cfg.k8s_profiler]
    output = f"{launch.CONTAINER_REPORT_DIR}/{placeholders}"
    args = nsysargs.profile_args(launch.wrapper_env(cfg), output)
    # Plain words: the injector's own placeholders ({..}) must reach it unquoted; only words with spaces get quotes.
    return " ".join(shlex.quote(arg) if any(c.isspace() for c in arg) else arg for arg in args)


def injection_match(cfg: Config) -> str:
    """The process command lines the injector wraps: the example's, the NCCL test binaries (not rank0tee), or COMMAND's
    program and its first argument (after any 'env K=V', which execs it)."""
    if cfg.workload == "nccl-tests":
        return NCCL_TESTS_MATCH
    if cfg.workload != "command":
        return INJECTION_MATCH
    words = workloads.user_command(cfg.command)
    while words and (words[0] == "env" or ("=" in words[0] and not words[0].startswith("/"))):
        words = words[1:]
    return "^.*" + re.escape(" ".join(words[:2])) + ".*$"


def context(cfg: Config, job: str) -> dict[str, Any]:
    """Everything the templates need, computed here so the templates only lay out YAML."""
    volume = report_volume(cfg, job)
    label = injector_label(cfg)
    return {
        "job": job,
        "cfg": cfg,
        "namespace": cfg.k8s_namespace,
        "image": cfg.image_ref,
        "job_label": JOB_LABEL,
        "role_label": ROLE_LABEL,
        "launcher_command": launcher_command(cfg, job),
        "worker_command": worker_command(),
        "ssh_port": SSH_PORT,
        "slots": cfg.procs_per_node,
        "workers": cfg.nodes,
        "resources": worker_resources(cfg),
        "shm_size": cfg.k8s_worker_sizes["shm"],
        "capabilities": capabilities(cfg),
        "node_selector": {INSTANCE_TYPE_LABEL: cfg.instance_type} if cfg.instance_type else {},
        "clean_pod_policy": cfg.k8s_clean_pod_policy.capitalize(),
        "report_volume": volume["volume"],
        "report_sub_path": volume["sub_path"],
        "report_dir": launch.CONTAINER_REPORT_DIR,
        "mount_reports": label is None,  # with an injector, its helm values mount the report volume
        "injector": cfg.k8s_profiler if label else None,
        "injector_label": label,
        "injector_chart": INJECTORS[cfg.k8s_profiler]["chart"] if label else None,
        "injector_args": injector_nsys_args(cfg) if label else None,
        "injection_match": injection_match(cfg),
        "user_mounts": [{"name": f"mount-{index}", "host": mount.host, "container": mount.container,
                         "read_only": mount.read_only} for index, mount in enumerate(cfg.mount_list)],  # fmt: skip
        "injector_volume": _injector_volume(cfg),
    }


def _injector_volume(cfg: Config) -> dict[str, Any]:
    """The report volume the injector mounts into every labelled pod (the base folder: pod names tell jobs apart)."""
    if cfg.k8s_report_volume == "pvc":
        return {"name": "nsys-reports", "persistentVolumeClaim": {"claimName": cfg.k8s_report_pvc}}
    return {"name": "nsys-reports", "hostPath": {"path": cfg.k8s_report_host_path, "type": "DirectoryOrCreate"}}


def environment(root: Path) -> jinja2.Environment:
    """A strict Jinja2 environment over ROOT/k8s whose `q` filter writes a YAML-safe (JSON) scalar."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(kit_root(root) / TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = lambda value: json.dumps(value, ensure_ascii=False)
    return env


def render(cfg: Config, job: str, root: Path) -> dict[str, str]:
    """The files of the job, name -> text: the MPIJob, plus the injector's helm values and pod label when one is used."""
    env = environment(root)
    ctx = context(cfg, job)
    files = {MPIJOB_FILE: render_template(env, "mpijob.yaml.j2", TEMPLATES, ctx)}
    if ctx["injector"]:
        files[VALUES_FILE] = render_template(env, f"{ctx['injector']}-values.yaml.j2", TEMPLATES, ctx)
        files[LABEL_FILE] = render_template(env, "pod-label.yaml.j2", TEMPLATES, ctx)
    return files
