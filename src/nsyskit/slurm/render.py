"""Render the sbatch script of a Slurm job (Pyxis or host mode): config and job folder in, text out."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2

from nsyskit.assets import kit_root
from nsyskit.config import Config
from nsyskit.ranks.launch import CONTAINER_REPORT_DIR, steps, wrapper_env
from nsyskit.ranks.workloads import needs_mpi
from nsyskit.templates import render_template

TEMPLATE_DIR = "slurm"  # under the project root, beside k8s/
JOB_NAME = "nsyskit"
MASTER_PORT = 29500
SCRIPT = "job.sbatch"
WHAT = {"ddp": "the DDP example", "nccl-tests": "the NCCL tests", "command": "your command"}  # the script's first line
REPORTS = "reports"  # the job folder's subfolder every rank writes into
LOG_PATTERN = "slurm-%j.out"  # sbatch replaces %j by the job id
# nsys expands %q{VAR} from each rank's environment; NSYSKIT_HOST is the rank's own host name, set by the wrapper
# (HOSTNAME is not: srun passes on the batch script's environment, so it would name the submitting host).
REPORT_NAME = "nsyskit_%q{SLURM_JOB_ID}_node_%q{SLURM_NODEID}_rank_%q{SLURM_PROCID}_%q{NSYSKIT_HOST}"


def log_path(job_dir: Path, job_id: str) -> Path:
    """Where the job's output (all ranks, labelled by srun) goes."""
    return Path(job_dir) / LOG_PATTERN.replace("%j", str(job_id))


def sqsh_path(cfg: Config) -> str:
    """The squashfs image of 'invoke enroot-import' (SLURM_SQSH, else SLURM_SHARED_DIR/enroot/IMAGE+TAG.sqsh)."""
    return cfg.slurm_sqsh or f"{cfg.slurm_shared_dir}/enroot/{cfg.image.replace('/', '+')}+{cfg.tag}.sqsh"


def pull_host(cfg: Config) -> str:
    """The registry host the nodes pull from (REGISTRY_ENDPOINT when Docker uses another host than REGISTRY)."""
    return getattr(cfg, "registry_endpoint", "") or cfg.registry


def container_image(cfg: Config) -> str:
    """What Pyxis' --container-image gets: REGISTRY#IMAGE:TAG, the enroot-import .sqsh, or SLURM_CONTAINER_IMAGE."""
    choice = cfg.slurm_container_image
    if choice == "sqsh":
        return sqsh_path(cfg)
    if choice != "registry":
        return choice
    return f"{pull_host(cfg)}#{cfg.image}:{cfg.tag}"  # REGISTRY is set: nsyskit.targets.slurm checks it first


def container_mounts(cfg: Config, report_dir: Path) -> str:
    """Pyxis mounts: the job's report folder on /reports, the shared file system at its own path, then the extras
    (SLURM_CONTAINER_MOUNTS, then MOUNTS: the user's code and data)."""
    mounts = [f"{report_dir}:{CONTAINER_REPORT_DIR}", f"{cfg.slurm_shared_dir}:{cfg.slurm_shared_dir}"]
    mounts += [m for m in cfg.slurm_container_mounts.split(",") if m]
    mounts += [mount.text() for mount in cfg.mount_list]
    return ",".join(dict.fromkeys(mounts))


def command_lines(words: list[str]) -> list[str]:
    """Shell-quoted command split for reading: the program and its script first, then one '--flag value' a line."""
    lines: list[str] = []
    for word in words:
        if lines and not word.startswith("--"):
            lines[-1] += " " + shlex.quote(word)
        else:
            lines.append(shlex.quote(word))
    return lines


def mpi_plugin(cfg: Config) -> str:
    """srun --mpi: SLURM_MPI, except that MPI programs (the NCCL tests) get pmix while SLURM_MPI keeps its default none."""
    if needs_mpi(cfg.workload) and cfg.slurm_mpi == "none" and cfg.sources.get("SLURM_MPI", "default") == "default":
        return "pmix"
    return cfg.slurm_mpi


def context(cfg: Config, job_dir: Path) -> dict:
    """The template variables of one job."""
    job_dir = Path(job_dir)
    report_dir = job_dir / REPORTS
    pyxis = cfg.slurm_mode == "pyxis"
    task_report_dir = CONTAINER_REPORT_DIR if pyxis else str(report_dir)
    env = wrapper_env(cfg, report_dir=task_report_dir, launcher="slurm")
    srun_options = [f"--mpi={mpi_plugin(cfg)}"] if mpi_plugin(cfg) else []
    return {
        "mode": cfg.slurm_mode,
        "what": WHAT[cfg.workload],
        "job_name": JOB_NAME,
        "job_dir": str(job_dir),
        "log_pattern": str(job_dir / LOG_PATTERN),
        "nodes": cfg.nodes,
        "tasks_per_node": cfg.procs_per_node,
        "gpus_per_node": cfg.gpus_per_node,
        "exclusive": cfg.slurm_exclusive,
        "partition": cfg.slurm_partition,
        "account": cfg.slurm_account,
        "time_limit": cfg.slurm_time_limit,
        "report_dir": str(report_dir),
        "env": sorted(env.items()),
        "report_name": REPORT_NAME,
        "master_port": MASTER_PORT,
        "srun_options": srun_options,
        "container_image": container_image(cfg) if pyxis else "",
        "container_mounts": container_mounts(cfg, report_dir) if pyxis else "",
        # One srun per launch (the example once, or each NCCL test); with several, each names its reports apart.
        "steps": [{"name": step.name, "command": command_lines(step.rank_command),
                   "report_name": REPORT_NAME.replace("%q{SLURM_JOB_ID}", f"%q{{SLURM_JOB_ID}}-{step.tag}") if step.tag else ""}
                  for step in steps(cfg, task_report_dir)],
    }  # fmt: skip


def environment(root: Path) -> jinja2.Environment:
    """The Jinja2 environment of the templates in ROOT/slurm/ (strict: an unknown variable is an error)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(kit_root(root) / TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # shell, not HTML: values are quoted with the q filter
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return env


def render_script(cfg: Config, root: Path, job_dir: Path) -> str:
    """The sbatch script of SLURM_MODE (pyxis or host) for a job rendered into job_dir."""
    return render_template(environment(root), f"{cfg.slurm_mode}.sbatch.j2", TEMPLATE_DIR, context(cfg, job_dir))
