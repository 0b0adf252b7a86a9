"""Tasks that deploy the profiled job to a cluster target (--k8s or --slurm) and manage it there."""

from __future__ import annotations

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, load, project_root, task
from nsyskit.errors import NsyskitError

TARGET_HELP = {"k8s": "Kubernetes: a Kubeflow MPIJob.", "slurm": "Slurm: an sbatch job (Pyxis or host mode).", "profile": PROFILE_HELP}
JOB_HELP = "Job to act on (Slurm job id or MPIJob name); default: the last one deployed from this project."


@task(help={**TARGET_HELP, "dry_run": "Render and validate only; print where the files are.", "wait": "Wait for the job to end and exit with its exit code.",
            "nodes": "Override NODES.", "procs_per_node": "Override PROCS_PER_NODE.",
            "profiler": "Override PROFILER: nsys (timeline), ncu (Nsight Compute per kernel), torch (PyTorch profiler, HTA)."})
def deploy(c, k8s=False, slurm=False, dry_run=False, wait=False, profile=None, nodes=None, procs_per_node=None,
           profiler=None):  # fmt: skip
    """Render the job into jobs/<id>/ and submit it (kubectl apply / sbatch); --dry-run stops after rendering."""
    from nsyskit.deploy import target

    cfg = load(c, profile, nodes=nodes, procs_per_node=procs_per_node, profiler=profiler)
    result = target(k8s, slurm).deploy(cfg, project_root(c), dry_run=dry_run, wait=wait)
    for line in result.lines:
        console.out.print(line)
    if result.exit_code:
        raise NsyskitError(f"job {result.job_id} ended with exit code {result.exit_code}; files in {result.job_dir}")


@task(help={**TARGET_HELP, "job": JOB_HELP})
def undeploy(c, k8s=False, slurm=False, job=None, profile=None):
    """Delete the MPIJob or cancel the Slurm job."""
    from nsyskit.deploy import target

    console.out.print(target(k8s, slurm).undeploy(load(c, profile), project_root(c), job))


@task(help={**TARGET_HELP, "job": JOB_HELP})
def status(c, k8s=False, slurm=False, job=None, profile=None):
    """Show the job's state (kubectl get / squeue and sacct)."""
    from nsyskit.deploy import target

    console.out.print(target(k8s, slurm).status(load(c, profile), project_root(c), job))


@task(help={**TARGET_HELP, "job": JOB_HELP, "follow": "Keep printing new output until the job ends."})
def logs(c, k8s=False, slurm=False, job=None, follow=False, profile=None):
    """Print the job's output (launcher log / Slurm output file); neither flag: the long-running local container's."""
    from nsyskit.deploy import target
    from nsyskit.local import dev as local_dev

    if not k8s and not slurm:
        local_dev.logs(follow)  # local Docker: the container of 'invoke run --local --detach'
        return
    target(k8s, slurm).logs(load(c, profile), project_root(c), job, follow)


@task(help={**TARGET_HELP, "job": JOB_HELP})
def collect(c, k8s=False, slurm=False, job=None, profile=None):
    """Gather the job's reports into reports/<run-id>/ for 'invoke analyze'."""
    from nsyskit.deploy import target

    folder = target(k8s, slurm).collect(load(c, profile), project_root(c), job)
    console.out.print(f"reports collected in {folder}")
