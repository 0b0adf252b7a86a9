"""The Slurm target: the job as an sbatch script, Pyxis or host mode (nsyskit.slurm), in the Target contract."""

from __future__ import annotations

import re
from pathlib import Path

from nsyskit.config import Config
from nsyskit.errors import ConfigError, ConfigErrors
from nsyskit.jobdir import jobs_root
from nsyskit.ranks.workloads import needs_mpi
from nsyskit.targets.base import ClusterSteps, Job, Outcome


def problems(cfg: Config, root: Path) -> list[ConfigError]:
    """Every setting (and the project path) an sbatch job cannot run with."""
    errors = image_problems(cfg)
    jobs = jobs_root(root)
    if re.search(r"\s", str(jobs)):  # #SBATCH --output/--chdir name the job folder under it
        errors.append(ConfigError("project folder", str(Path(root).resolve()),
                                  "contains blanks, which #SBATCH --output/--chdir cannot quote",
                                  "move the project to a path without blanks"))  # fmt: skip
    for key, value in (("NODES", cfg.nodes), ("PROCS_PER_NODE", cfg.procs_per_node)):
        if value < 1:
            errors.append(ConfigError(key, value, "must be 1 or more", f"set {key} to 1 or more", cfg.sources.get(key, "")))
    if needs_mpi(cfg.workload) and cfg.slurm_mpi == "none" and cfg.sources.get("SLURM_MPI", "default") != "default":
        errors.append(ConfigError("SLURM_MPI", "none", "starts the NCCL tests (MPI programs) without PMI, so every rank "
                                  "would run alone as rank 0 of 1", "set SLURM_MPI=pmix (or pmi2; empty: the cluster's "
                                  "MpiDefault), or leave it unset", cfg.sources.get("SLURM_MPI", "")))  # fmt: skip
    if not cfg.slurm_submit_prefix:  # this host is a cluster node: what the nodes will need can be checked here
        errors += shared_paths_problems(cfg, root)
    return errors


def image_problems(cfg: Config) -> list[ConfigError]:
    """SLURM_CONTAINER_IMAGE=registry without a REGISTRY to pull from (Pyxis mode)."""
    if cfg.slurm_mode == "pyxis" and cfg.slurm_container_image == "registry" and not cfg.registry:
        return [ConfigError(
            "SLURM_CONTAINER_IMAGE", "registry", "Pyxis would pull the pushed image but REGISTRY is empty",
            "set REGISTRY and run 'invoke push', or run 'invoke enroot-import' and set SLURM_CONTAINER_IMAGE=sqsh, "
            "or SLURM_MODE=host", cfg.sources.get("SLURM_CONTAINER_IMAGE", ""),
        )]  # fmt: skip
    return []


def shared_paths_problems(cfg: Config, root: Path) -> list[ConfigError]:
    """The paths the compute nodes will need, checked on the submitting host (which sees the same shared file
    system): SLURM_SHARED_DIR, the squashfs image Pyxis runs, and the project folder (its job folder) on it."""
    from nsyskit.config.slurm_parse import image_file
    from nsyskit.slurm.render import sqsh_path

    errors: list[ConfigError] = []
    shared = Path(cfg.slurm_shared_dir)
    source = cfg.sources.get("SLURM_SHARED_DIR", "")
    if not shared.is_dir():
        errors.append(ConfigError(
            "SLURM_SHARED_DIR", cfg.slurm_shared_dir, "does not exist on this host (Pyxis would fail to mount it: "
            "'source path does not exist')", "set SLURM_SHARED_DIR to the shared file system mounted at the same "
            "path on every node (e.g. /fsx)", source,
        ))  # fmt: skip
    elif not Path(root).resolve().is_relative_to(shared.resolve()):
        errors.append(ConfigError(
            "SLURM_SHARED_DIR", cfg.slurm_shared_dir, f"does not hold the project folder {Path(root).resolve()}, "
            "so the compute nodes cannot see its job folder and reports", "move the project onto the shared file "
            f"system (under {cfg.slurm_shared_dir}), or set SLURM_SHARED_DIR to the shared folder that holds it", source,
        ))  # fmt: skip
    if cfg.slurm_mode == "pyxis":
        key, image = "SLURM_CONTAINER_IMAGE", cfg.slurm_container_image
        squashfs = sqsh_path(cfg) if image == "sqsh" else image_file(image)
        if squashfs and not Path(squashfs).is_file():
            make = "run 'invoke enroot-import' to write it" if image == "sqsh" else "give an existing .sqsh"
            errors.append(ConfigError(
                key, image, f"names the squashfs image {squashfs}, which does not exist",
                f"{make}, or set {key}=dockerd://{cfg.image}:{cfg.tag} (Pyxis imports the image from the nodes' "
                "Docker daemon)", cfg.sources.get(key, ""),
            ))  # fmt: skip
    return errors


class SlurmTarget(ClusterSteps):
    """sbatch/squeue/sacct/scancel on a Slurm cluster whose file system is shared with this machine."""

    name = "slurm"
    module = "nsyskit.slurm"
    submit_waits = False
    dry_run_previews = True  # a dry run renders where /fsx is absent (a laptop): its problems become warnings

    def validate(self, cfg: Config, root: Path) -> None:
        """Every problem at once, before anything is written."""
        if errors := problems(cfg, root):
            raise ConfigErrors(errors)

    def render(self, cfg: Config, root: Path, run_id: str | None = None) -> Job:
        """The sbatch script and an empty reports/ in a fresh jobs/slurm-<time>/."""
        from nsyskit import slurm

        script = slurm.render_job(cfg, root)
        job = Job(self.name, script.parent, files=[script], lines=[f"rendered {script} ({cfg.slurm_mode} mode)"])
        job.how_to_submit = f"sbatch {script}"
        job.preview = script.read_text()
        return job

    def submit(self, cfg: Config, job: Job) -> None:
        """sbatch; the job id."""
        from nsyskit import slurm

        job.job_id = slurm.submit(cfg, job.job_dir)
        job.submitted = True
        job.lines += [f"submitted Slurm job {job.job_id} ({cfg.slurm_mode} mode): {job.files[0]}",
                      f"log: {slurm.log_path(job.job_dir, job.job_id)}"]  # fmt: skip

    def wait(self, cfg: Config, job: Job) -> Outcome:
        """Until the job ends: COMPLETED with exit code 0 succeeds; any other state fails with its code (1 if none)."""
        from nsyskit import slurm

        final = slurm.wait(cfg, job.job_dir, job.job_id)
        log = str(slurm.log_path(job.job_dir, job.job_id))
        failed = final.state != "COMPLETED" or final.exit_code
        code = (final.exit_code or 1) if failed else 0
        reason = f"reason {final.reason}" if final.reason and final.reason != "None" else ""
        return Outcome(final.state, code, log, reason,
                       lines=[f"job {job.job_id} COMPLETED (exit code 0)"])  # fmt: skip


TARGET = SlurmTarget()
