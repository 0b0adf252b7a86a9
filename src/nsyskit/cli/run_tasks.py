"""Tasks that run the profiled example to its end on a target (default: local containers) and manage nsyskit-dev."""

from __future__ import annotations

from invoke import Exit

from nsyskit import console
from nsyskit.cli import COMMAND_HELP, MOUNT_HELP, PROFILE_HELP, load, mount_setting, project_root, task
from nsyskit.errors import UsageError

RUN_HELP = {
    "local": "Run in local Docker containers (the default target).",
    "k8s": "Run as a Kubeflow MPIJob: deploy, wait for it, collect its reports.",
    "slurm": "Run as a Slurm job: deploy, wait for it, collect its reports.",
    "detach": "Start the long-running container nsyskit-dev instead (for 'invoke exec/logs/undeploy --local').",
    "nodes": "Override NODES: nodes (local: containers; more than 1 starts workers with sshd and an mpirun launcher).",
    "procs_per_node": "Override PROCS_PER_NODE: ranks per node.",
    "steps": "Override STEPS.",
    "profile_steps": "Override PROFILE_STEPS (FIRST-LAST, or '' for the whole run).",
    "profile_ranks": "Override PROFILE_RANKS: all, local0 or a list like 0,3.",
    "profiler": "Override PROFILER: nsys (timeline), ncu (Nsight Compute per kernel), torch (PyTorch profiler, HTA).",
    "model_size": "Override MODEL_SIZE: tiny, gpt2, gpt2-medium.",
    "workload": "Override WORKLOAD: ddp (the DDP example), nccl-tests (the tests of NCCL_TESTS; needs GPUs) or command (--command on every rank).",
    "command": COMMAND_HELP,
    "mount": MOUNT_HELP,
    "run_id": "Name of the run folder reports/<run-id>/ (local only; default: UTC time + random suffix).",
    "progress": "Live progress display (default: yes; --no-progress prints only the result).",
    "profile": PROFILE_HELP,
}


@task(help=RUN_HELP, iterable=["mount"])
def run(c, local=False, k8s=False, slurm=False, detach=False, nodes=None, procs_per_node=None, steps=None,
        profile_steps=None, profile_ranks=None, model_size=None, run_id=None, progress=True, profile=None,
        profiler=None, workload=None, command=None, mount=None):  # fmt: skip
    """Run the workload (the DDP example, the NCCL tests or your command) under its profiler to its end (deploy, wait, collect); reports, logs and run.json in reports/<run-id>/."""
    from nsyskit import targets

    target = targets.choose("local", local=local, k8s=k8s, slurm=slurm)
    if target.name != "local" and (detach or run_id):
        raise UsageError(f"--{'detach' if detach else 'run-id'} is for local runs only", fix="drop it, or run with --local")
    cfg = load(c, profile, nodes=nodes, procs_per_node=procs_per_node, steps=steps, profile_steps=profile_steps,
               profile_ranks=profile_ranks, model_size=model_size, profiler=profiler, workload=workload,
               command=command, mounts=mount_setting(mount))  # fmt: skip
    if detach:
        from nsyskit.local import dev

        console.out.print(dev.start(cfg, project_root(c)))
        return
    result, folder = targets.run(target, cfg, project_root(c), run_id=run_id, progress=progress)
    for line in result.lines:
        console.out.print(line)
    if target.name != "local":
        console.out.print(f"reports collected in {folder}")


@task(name="exec", help={"command": "Command to run in nsyskit-dev (default: an interactive shell)."})
def exec_(c, command=None):
    """Run a command (or open a shell) in the long-running container started by 'invoke run --local --detach'."""
    from nsyskit.local import dev as local_dev

    code = local_dev.exec_in(command)
    if code:
        raise Exit(code=code)


@task(
    help={
        "run_id": "Remove the containers and network left by this run instead.",
        "all": "Remove every nsyskit run container and network.",
    }
)
def stop(c, run_id=None, all=False):
    """Alias of 'invoke undeploy --local': remove nsyskit-dev (or a run's containers with --run-id, every one with --all)."""
    from nsyskit.local import dev as local_dev
    from nsyskit.local.runfolder import check_run_id

    if run_id and all:
        raise UsageError("--run-id and --all exclude each other", fix="give one of them")
    if run_id:
        check_run_id(run_id)
    removed = local_dev.stop(run_id, everything=all)
    console.out.print(f"removed {', '.join(removed)}" if removed else "nothing to remove")
