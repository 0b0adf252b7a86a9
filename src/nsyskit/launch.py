"""The one renderer of what every launcher runs: the wrapper's environment, the per-rank command and mpirun."""

from __future__ import annotations

from nsyskit.config import Config

# Paths inside the image (Container-Root/ is copied to /).
WRAPPER = "/usr/local/bin/nsys-profile"
EXAMPLE = "/nsyskit/workload/train.py"
CONTAINER_REPORT_DIR = "/reports"
HOSTFILE = "/etc/mpi/hostfile"  # where the Kubeflow MPI operator mounts it; the local run mounts its own there


def wrapper_env(
    cfg: Config, report_dir: str = CONTAINER_REPORT_DIR, launcher: str = "mpirun", *, job_id: str | None = None
) -> dict[str, str]:
    """NSYSKIT_* settings the rank-aware wrapper reads, plus the NCCL/EFA environment of GPU runs.

    job_id (optional) becomes NSYSKIT_JOB_ID, the first field of every report name; without it the wrapper
    uses SLURM_JOB_ID, else 'job'.
    """
    env = {
        "NSYSKIT_REPORT_DIR": report_dir,
        "NSYSKIT_LAUNCHER": launcher,
        "NSYSKIT_PROFILE_RANKS": cfg.profile_ranks,
        "NSYSKIT_TRACE": cfg.nsys_trace,
        "NSYSKIT_SAMPLE": cfg.nsys_sample,
        "NSYSKIT_DELAY": str(cfg.nsys_delay),
        "NSYSKIT_DURATION": str(cfg.nsys_duration),
        # On GPU the example brackets PROFILE_STEPS with cudaProfilerStart/Stop; on CPU it marks them with NVTX.
        "NSYSKIT_CAPTURE": "cudaProfilerApi" if cfg.profile_steps and cfg.uses_gpu else "none",
        "NSYSKIT_EFA_METRICS": "1" if cfg.efa_metrics and cfg.efa_per_node > 0 else "0",
        "NSYSKIT_EXTRA_ARGS": cfg.nsys_extra_args,
    }
    if cfg.profiler != "nsys":  # only then: nsys runs render exactly as before
        env["NSYSKIT_PROFILER"] = cfg.profiler
    if cfg.profiler == "ncu":
        env.update({
            "NSYSKIT_NCU_SET": cfg.ncu_set, "NSYSKIT_NCU_KERNEL": cfg.ncu_kernel,
            "NSYSKIT_NCU_LAUNCH_SKIP": str(cfg.ncu_launch_skip), "NSYSKIT_NCU_LAUNCH_COUNT": str(cfg.ncu_launch_count),
            "NSYSKIT_NCU_REPLAY_MODE": cfg.ncu_replay_mode,
        })  # fmt: skip
    if job_id:
        env["NSYSKIT_JOB_ID"] = job_id
    if cfg.uses_gpu and cfg.nccl_debug:
        env["NCCL_DEBUG"] = cfg.nccl_debug.upper()
        env["NCCL_DEBUG_SUBSYS"] = cfg.nccl_debug_subsys
    if cfg.efa_per_node > 0 and cfg.uses_gpu:
        env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_SOCKET_IFNAME": "^lo,docker"})
    return env


def rank_command(cfg: Config) -> list[str]:
    """What each rank runs: the wrapper around the example with the run settings."""
    command = [
        WRAPPER, "python3", EXAMPLE,
        "--model-size", cfg.model_size,
        "--batch-size", str(cfg.batch_size),
        "--seq-len", str(cfg.seq_len),
        "--steps", str(cfg.steps),
    ]  # fmt: skip
    if cfg.profile_steps:
        command += ["--profile-steps", f"{cfg.profile_steps[0]}-{cfg.profile_steps[1]}"]
    if cfg.profiler == "torch":  # the example profiles itself into the wrapper's $NSYSKIT_TORCH_TRACE
        command.append("--torch-profile")
    return command


def mpirun_command(
    cfg: Config,
    hostfile: str = HOSTFILE,
    report_dir: str = CONTAINER_REPORT_DIR,
    *,
    master_addr: str,
    job_id: str | None = None,
) -> list[str]:
    """The launcher's mpirun over all nodes' slots, exporting the wrapper environment to every rank.

    master_addr (rank 0's host) is exported as MASTER_ADDR, the one way the ranks learn it (rankinfo reads
    only that): mpirun does not tell the ranks where rank 0 is, and the hostfile exists only on the launcher.
    """
    command = [
        "mpirun", "--allow-run-as-root",
        "-np", str(cfg.world_size),
        "--hostfile", hostfile,
        "--map-by", f"ppr:{cfg.procs_per_node}:node",
        "--bind-to", "none",
        "--mca", "plm_rsh_args", "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
    ]  # fmt: skip
    env = {**wrapper_env(cfg, report_dir, job_id=job_id), "MASTER_ADDR": master_addr}
    for key, value in env.items():
        command += ["-x", f"{key}={value}"]
    return command + rank_command(cfg)


def torchrun_command(cfg: Config) -> list[str]:
    """One node's torchrun starting PROCS_PER_NODE ranks, each the wrapper around the example (its env: wrapper_env)."""
    return [
        "python3", "-m", "torch.distributed.run",
        "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(cfg.procs_per_node),
        "--no-python",  # each rank runs the wrapper executable, not a Python script
        *rank_command(cfg),
    ]  # fmt: skip
