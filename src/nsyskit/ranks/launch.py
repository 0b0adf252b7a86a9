"""The one renderer of what every launcher runs: the wrapper's environment, the per-rank commands and mpirun; and what keeps a workload from launching."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from nsyskit.config import Config
from nsyskit.errors import ConfigError, ConfigErrors
from nsyskit.ranks import mounts, nsysargs, workloads

# Paths inside the image (Container-Root/ is copied to /).
WRAPPER = "/usr/local/bin/nsys-profile"
EXAMPLE = workloads.EXAMPLE
CONTAINER_REPORT_DIR = "/reports"
HOSTFILE = "/etc/mpi/hostfile"  # where the Kubeflow MPI operator mounts it; the local run mounts its own there
# NCCL 2.26+ stamps the log lines of these levels (older NCCL ignores both variables). With INFO stamped, the COLL
# lines say when each call was made: the log join (analysis/compute/nccllogjoin.py) checks its call-order fit
# against the trace's clock and picks among fits order alone cannot tell apart. The format is strftime's plus
# NCCL's %Nf (N sub-second digits); %z makes the local time absolute. NCCL prints '_' as a space (spaces are
# awkward in command lines): '[2026-11-29 02:01:41.123456 +0000] host:pid:tid [0] NCCL INFO ...'.
NCCL_TIMESTAMP_LEVELS = "WARN,INFO"  # WARN: NCCL's default, kept
NCCL_TIMESTAMP_FORMAT = "[%F_%T.%6f_%z]_"


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
        "NSYSKIT_PROFILE_DELAY": str(cfg.profile_delay),
        "NSYSKIT_PROFILE_DURATION": str(cfg.profile_duration),
        "NSYSKIT_CAPTURE": capture(cfg),
        "NSYSKIT_EFA_METRICS": "1" if cfg.efa_metrics and cfg.efa_per_node > 0 else "0",
        "NSYSKIT_EXTRA_ARGS": cfg.nsys_extra_args,
    }
    if cfg.workload == "command":  # only then: the kit's workloads render exactly as before
        env.update(command_env(cfg))
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
        env["NCCL_DEBUG_TIMESTAMP_LEVELS"] = NCCL_TIMESTAMP_LEVELS
        env["NCCL_DEBUG_TIMESTAMP_FORMAT"] = NCCL_TIMESTAMP_FORMAT
    if cfg.efa_per_node > 0 and cfg.uses_gpu:
        env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_SOCKET_IFNAME": "^lo,docker"})
    return env


def capture(cfg: Config) -> str:
    """NSYSKIT_CAPTURE of the config: where nsys starts and stops recording (nsysargs.capture_mode decides)."""
    return nsysargs.capture_mode(cfg.workload, cfg.profile_range, bool(cfg.profile_steps), cfg.uses_gpu, cfg.step_hook)


def command_env(cfg: Config) -> dict[str, str]:
    """What the wrapper and the step hook read for WORKLOAD=command: the window, whether to count steps, the NVTX range."""
    env = {
        "NSYSKIT_STEP_HOOK": "1" if cfg.step_hook else "0",
        "NSYSKIT_PROFILE_STEPS": f"{cfg.profile_steps[0]}-{cfg.profile_steps[1]}" if cfg.profile_steps else "",
    }
    if cfg.profile_range:
        env["NSYSKIT_NVTX_CAPTURE"] = cfg.profile_range.partition(":")[2]
    return env


def application(cfg: Config) -> list[str]:
    """What each rank runs inside the wrapper, for the example or COMMAND (the NCCL tests have one per test: steps)."""
    return workloads.user_command(cfg.command) if cfg.workload == "command" else workloads.example_command(cfg)


def rank_command(cfg: Config) -> list[str]:
    """What each rank of the example or of COMMAND runs: the wrapper around the application."""
    return [WRAPPER, *application(cfg)]


@dataclass(frozen=True)
class Step:
    """One launch of the workload: the DDP example once, or one NCCL test (each its own mpirun or srun)."""

    name: str  # ddp, command, or the test's name (all_reduce_perf, all_reduce_perf-2)
    rank_command: list[str]  # what each rank runs: the wrapper around the application
    tag: str = ""  # added to the job id of the report names when a run has several steps ('' otherwise)


def steps(cfg: Config, report_dir: str = CONTAINER_REPORT_DIR, wrapped: bool = True) -> list[Step]:
    """The launches of the configured workload, in order, with each rank's command (report_dir: where ranks write).

    wrapped=False leaves the wrapper out (an injector in the pods starts nsys itself).
    """
    wrapper = [WRAPPER] if wrapped else []
    if cfg.workload != "nccl-tests":
        return [Step(cfg.workload, [*wrapper, *application(cfg)])]
    tests = cfg.nccl_test_list
    # Several tests: their reports differ by job id (JOB-all-reduce_node0_rank0_HOST), one test keeps the plain name.
    return [Step(test.name, [*wrapper, *test.command(report_dir)], test.tag if len(tests) > 1 else "") for test in tests]


def step_job_id(job_id: str | None, step: Step) -> str | None:
    """The job id of one step's report names: JOB_ID, or JOB_ID-TAG when the run has several steps."""
    return f"{job_id}-{step.tag}" if job_id and step.tag else job_id


def in_sequence(commands: list[list[str]]) -> list[str]:
    """One command that runs COMMANDS in order and stops at the first that fails (its exit code is the result)."""
    if len(commands) == 1:
        return commands[0]
    return ["bash", "-c", " && ".join(shlex.join(command) for command in commands)]


def mpirun_command(
    cfg: Config,
    hostfile: str | None = HOSTFILE,
    report_dir: str = CONTAINER_REPORT_DIR,
    *,
    master_addr: str,
    job_id: str | None = None,
    wrapped: bool = True,
) -> list[str]:
    """The launcher's mpirun over all nodes' slots, exporting the wrapper environment to every rank.

    master_addr (rank 0's host) is exported as MASTER_ADDR, the one way the ranks learn it (rankinfo reads
    only that): mpirun does not tell the ranks where rank 0 is, and the hostfile exists only on the launcher.
    WORKLOAD=nccl-tests: one mpirun per test, in order (in_sequence); hostfile None: this host's PROCS_PER_NODE slots.
    wrapped=False: the ranks run without the wrapper (see steps).
    """
    return in_sequence([_mpirun(cfg, hostfile, report_dir, step, master_addr, job_id)
                        for step in steps(cfg, report_dir, wrapped)])  # fmt: skip


def _mpirun(cfg: Config, hostfile: str | None, report_dir: str, step: Step, master_addr: str, job_id: str | None) -> list[str]:
    """The mpirun of one step."""
    hosts = ["--hostfile", hostfile] if hostfile else ["--host", f"localhost:{cfg.procs_per_node}"]
    command = [
        "mpirun", "--allow-run-as-root",
        "-np", str(cfg.world_size),
        *hosts,
        "--map-by", f"ppr:{cfg.procs_per_node}:node",
        "--bind-to", "none",
        "--mca", "plm_rsh_args", "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
    ]  # fmt: skip
    env = {**wrapper_env(cfg, report_dir, job_id=step_job_id(job_id, step)), "MASTER_ADDR": master_addr}
    for key, value in env.items():
        command += ["-x", f"{key}={value}"]
    return command + step.rank_command


def single_node_command(cfg: Config, job_id: str | None = None) -> list[str]:
    """What starts the ranks of a one-node run: torchrun for the example and COMMAND, mpirun on this host for the NCCL tests."""
    if workloads.needs_mpi(cfg.workload):  # MPI programs: mpirun starts them, with no ssh to other nodes
        return mpirun_command(cfg, None, master_addr="localhost", job_id=job_id)
    return torchrun_command(cfg)


def torchrun_command(cfg: Config) -> list[str]:
    """One node's torchrun starting PROCS_PER_NODE ranks, each the wrapper around the application (its env: wrapper_env)."""
    return [
        "python3", "-m", "torch.distributed.run",
        "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(cfg.procs_per_node),
        "--no-python",  # each rank runs the wrapper executable, not a Python script
        *rank_command(cfg),
    ]  # fmt: skip


def mount_problems(cfg: Config, target: str) -> list[ConfigError]:
    """MOUNTS whose host path is missing here: local runs mount this machine's, Slurm the shared file system's
    (Kubernetes' hostPath is on the nodes, out of sight)."""
    if target == "k8s":
        return []
    return [ConfigError("MOUNTS", mount.text(), f"mounts {mount.host}, which does not exist on this machine",
                        f"create {mount.host} or fix the host path (HOST:CONTAINER[:ro], absolute paths)",
                        cfg.sources.get("MOUNTS", ""))
            for mount in mounts.missing_host_paths(cfg.mount_list)]  # fmt: skip


def launch_problems(cfg: Config, target: str = "local") -> list[ConfigError]:
    """What keeps the configured workload from starting on these machines (checked by run and deploy, not --dry-run)."""
    if cfg.workload != "nccl-tests":
        return mount_problems(cfg, target)
    source = cfg.sources.get("GPUS_PER_NODE", "")
    if cfg.gpus_per_node == 0:
        return [ConfigError("GPUS_PER_NODE", 0, "leaves no GPU for the NCCL tests (WORKLOAD=nccl-tests)",
                            "run them on GPU machines with GPUS_PER_NODE set (not the local-cpu profile), "
                            "or use WORKLOAD=ddp", source)]  # fmt: skip
    problems = mount_problems(cfg, target)
    for test in cfg.nccl_test_list:
        needed = test.gpus_per_rank * cfg.procs_per_node
        if needed > cfg.gpus_per_node:
            problems.append(ConfigError(
                "NCCL_TESTS", test.text(),
                f"needs {needed} GPUs per node ({test.gpus_per_rank} per rank x PROCS_PER_NODE={cfg.procs_per_node}), "
                f"more than GPUS_PER_NODE={cfg.gpus_per_node}",
                "lower -g/-t or PROCS_PER_NODE (one rank per GPU: -g 1 and PROCS_PER_NODE=GPUS_PER_NODE)",
                cfg.sources.get("NCCL_TESTS", ""),
            ))  # fmt: skip
    return problems


def check_launchable(cfg: Config, target: str = "local") -> None:
    """Raise ConfigErrors when launch_problems finds any."""
    problems = launch_problems(cfg, target)
    if problems:
        raise ConfigErrors(problems)
