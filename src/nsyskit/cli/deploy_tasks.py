"""Tasks that deploy the profiled job to a target (--local, --k8s or --slurm) and act on it there."""

from __future__ import annotations

from nsyskit import console
from nsyskit.cli import COMMAND_HELP, MOUNT_HELP, PROFILE_HELP, load, mount_setting, project_root, task

TARGET_HELP = {
    "local": "Local Docker containers on this machine.",
    "k8s": "Kubernetes: a Kubeflow MPIJob.",
    "slurm": "Slurm: an sbatch job (Pyxis or host mode).",
    "profile": PROFILE_HELP,
}
JOB_HELP = ("Job to act on (Slurm job id, MPIJob name or job folder; local: run id); default: the last one "
            "deployed from this project (local: the long-running container for undeploy/status/logs).")  # fmt: skip
OVERRIDES_HELP = {
    "nodes": "Override NODES: nodes (local: containers; more than 1 starts workers with sshd and an mpirun launcher).",
    "procs_per_node": "Override PROCS_PER_NODE: ranks per node.",
    "profiler": "Override PROFILER: nsys (timeline), ncu (Nsight Compute per kernel), torch (PyTorch profiler, HTA).",
    "workload": "Override WORKLOAD: ddp (the DDP example), nccl-tests (the tests of NCCL_TESTS; needs GPUs, except with --dry-run) or command (--command on every rank).",
    "command": COMMAND_HELP,
    "mount": MOUNT_HELP,
}


def chosen(local: bool, k8s: bool, slurm: bool, default: str | None = None):
    """The target of the flags (exactly one; DEFAULT when none is given and the task has one)."""
    from nsyskit import targets

    return targets.choose(default, local=local, k8s=k8s, slurm=slurm)


@task(help={**TARGET_HELP, **OVERRIDES_HELP, "dry_run": "Render and validate only; print where the files are (Slurm: "
            "the script too, and what a real submit would refuse as warnings).",
            "wait": "Wait for the job to end; a failed job makes the task exit with the job's exit code."},
      iterable=["mount"])  # fmt: skip
def deploy(c, local=False, k8s=False, slurm=False, dry_run=False, wait=False, profile=None, nodes=None,
           procs_per_node=None, profiler=None, workload=None, command=None, mount=None):  # fmt: skip
    """Validate the config, render the job (jobs/<id>/ or reports/<run-id>/) and submit it; --dry-run stops after rendering."""
    from nsyskit import targets

    target = chosen(local, k8s, slurm)
    cfg = load(c, profile, nodes=nodes, procs_per_node=procs_per_node, profiler=profiler, workload=workload,
               command=command, mounts=mount_setting(mount))  # fmt: skip
    result = targets.deploy(target, cfg, project_root(c), dry_run=dry_run, wait=wait)
    for line in result.lines:
        console.out.print(line, markup=False, highlight=False)  # a script's [ ] and paths are text, not markup
    if result.warnings:
        from rich.markup import escape

        for warning in result.warnings:
            console.warn(escape(warning))


@task(help={**TARGET_HELP, "job": JOB_HELP})
def undeploy(c, local=False, k8s=False, slurm=False, job=None, profile=None):
    """Delete the MPIJob, cancel the Slurm job, or remove a local run's containers (default: nsyskit-dev)."""
    console.out.print(chosen(local, k8s, slurm).undeploy(load(c, profile), project_root(c), job))


@task(help={**TARGET_HELP, "job": JOB_HELP})
def status(c, local=False, k8s=False, slurm=False, job=None, profile=None):
    """Show the job's state (kubectl get / scontrol, squeue and sacct / the local containers)."""
    console.out.print(chosen(local, k8s, slurm).status(load(c, profile), project_root(c), job))


@task(help={**TARGET_HELP, "job": JOB_HELP, "follow": "Keep printing new output until the job ends."})
def logs(c, local=False, k8s=False, slurm=False, job=None, follow=False, profile=None):
    """Print the job's output (launcher log / Slurm output file); no target flag: --local (nsyskit-dev, or --job RUN_ID)."""
    chosen(local, k8s, slurm, default="local").logs(load(c, profile), project_root(c), job, follow)


@task(help={**TARGET_HELP, "job": JOB_HELP})
def collect(c, local=False, k8s=False, slurm=False, job=None, profile=None):
    """Gather the ended job's reports into REPORT_DIR/<run-id>/ for 'invoke analyze' (local: already there)."""
    folder = chosen(local, k8s, slurm).collect(load(c, profile), project_root(c), job)
    console.out.print(f"reports collected in {folder}")
