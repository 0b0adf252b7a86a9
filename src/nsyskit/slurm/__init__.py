"""Slurm: render the sbatch script into jobs/<id>/, submit, watch, cancel and collect it (steps of nsyskit.targets.slurm)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from nsyskit import console
from nsyskit.config import Config
from nsyskit.errors import JobNotFound
from nsyskit.jobdir import find_job_dir, fresh_job_dir, read_record, write_record
from nsyskit.local import runfolder
from nsyskit.slurm import scheduler
from nsyskit.slurm.render import REPORTS, SCRIPT, container_image, log_path, render_script
from nsyskit.targets.follow import print_log

TARGET = "slurm"


def render_job(cfg: Config, root: Path) -> Path:
    """Render the job into a fresh job folder (script and empty report folder); return the script's path."""
    with fresh_job_dir(root, TARGET) as job_dir:  # a render error leaves no folder
        script = job_dir / SCRIPT
        script.write_text(render_script(cfg, root, job_dir))
        script.chmod(0o755)
        (job_dir / REPORTS).mkdir()
        write_record(job_dir, mode=cfg.slurm_mode, script=SCRIPT, nodes=cfg.nodes, procs_per_node=cfg.procs_per_node,
                     world_size=cfg.world_size, submitted=False, image=image_that_runs(cfg), workload=cfg.workload,
                     nccl_tests=runfolder.nccl_test_record(cfg),
                     image_id=local_image_id(container_image(cfg)) if cfg.slurm_mode == "pyxis" else "")  # fmt: skip
    return script


def image_that_runs(cfg: Config, mode: str | None = None) -> str:
    """What the ranks run in: the image Pyxis gets (the .sqsh path, or the URI, with its digest when it names one),
    or in host mode (`mode`, else SLURM_MODE) the nodes' own software."""
    if (mode or cfg.slurm_mode) != "pyxis":
        return "host (no container: the nodes' nsys, python and the kit's wrapper)"
    return container_image(cfg)


def local_image_id(image: str) -> str:
    """The content digest (image ID) of a dockerd:// image in this host's Docker daemon, '' when not known here."""
    if not image.startswith("dockerd://"):
        return ""
    import subprocess

    try:
        done = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image.removeprefix("dockerd://")],
                              capture_output=True, text=True, timeout=20)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def submit(cfg: Config, job_dir: Path) -> str:
    """sbatch the rendered script; the Slurm job id (recorded in job.json with the log's name)."""
    job_id = scheduler.submit(cfg, job_dir / SCRIPT)
    write_record(job_dir, job_id=job_id, submitted=True, log=log_path(job_dir, job_id).name)
    return job_id


def wait(cfg: Config, job_dir: Path, job_id: str) -> scheduler.JobState:
    """Block until the job ends (showing its state meanwhile); its final state, recorded in job.json."""
    console.info(f"submitted Slurm job {job_id}; waiting for it to end (log: {log_path(job_dir, job_id)})")
    phases = console.Phases(f"job {job_id}")
    final = scheduler.wait(cfg, job_id, on_poll=lambda s: phases.update(s.state))
    write_record(job_dir, state=final.state, exit_code=final.exit_code)
    return final


def _submitted(root: Path, job: str | None) -> tuple[Path, str]:
    """The job folder and Slurm job id of `job` (default: the last one); an error if it was never submitted."""
    job_dir = find_job_dir(root, TARGET, job)
    job_id = read_record(job_dir).get("job_id")
    if not job_id:
        raise JobNotFound(f"{job_dir} was never submitted (rendered with --dry-run, or sbatch failed)",
                          fix="run 'invoke deploy --slurm', or pass --job")
    return job_dir, str(job_id)


def undeploy(cfg: Config, root: Path, job: str | None) -> str:
    """scancel the job."""
    job_dir, job_id = _submitted(root, job)
    scheduler.cancel(cfg, job_id)
    return f"cancelled Slurm job {job_id} ({job_dir})"


def status(cfg: Config, root: Path, job: str | None) -> str:
    """The job's state (scontrol, squeue, sacct) and where its files are."""
    job_dir, job_id = _submitted(root, job)
    lines = scheduler.describe(cfg, job_id)
    lines.append(f"folder: {job_dir}  log: {log_path(job_dir, job_id)}")
    return "\n".join(lines)


def logs(cfg: Config, root: Path, job: str | None, follow: bool) -> None:
    """Print the job's output file (all ranks, labelled by srun); with follow, keep printing until the job ends."""
    job_dir, job_id = _submitted(root, job)
    log = log_path(job_dir, job_id)

    def ended() -> bool:
        state = scheduler.query(cfg, job_id)
        return state is None or state.final

    if not print_log(log, follow, ended):
        console.warn(f"no output yet at {log} (the job may still be pending)")


def _link_or_copy(source: Path, target: Path) -> None:
    """Hard-link (reports can be large; same file system) or else copy one file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def collect(cfg: Config, root: Path, job: str | None) -> Path:
    """Gather the ended job's reports, logs, nsys command lines and script into REPORT_DIR/<run-id>/ with a run.json."""
    job_dir, job_id = _submitted(root, job)
    state = scheduler.query(cfg, job_id)
    if state is not None and not state.final:
        raise JobNotFound(
            f"Slurm job {job_id} is {state.state}, not ended", fix="wait until it ends ('invoke status --slurm'), then collect"
        )
    run_id = job_dir.name
    dest = Path(root) / cfg.report_dir / run_id
    dest.mkdir(parents=True, exist_ok=True)
    files = []
    for source in sorted((job_dir / REPORTS).rglob("*")):
        if source.is_file():
            _link_or_copy(source, dest / source.relative_to(job_dir / REPORTS))
            files.append(str(source.relative_to(job_dir / REPORTS)))
    for extra in (log_path(job_dir, job_id), job_dir / SCRIPT):
        if extra.is_file():
            _link_or_copy(extra, dest / extra.name)
    record = read_record(job_dir)
    log = log_path(job_dir, job_id)
    runfolder.write_run_record(
        dest, cfg, TARGET, run_id, log.read_text(errors="replace") if log.is_file() else "",
        exit_code=state.exit_code if state else record.get("exit_code"), ended_how=state.state if state else record.get("state") or "",
        nodes=record.get("nodes"), procs_per_node=record.get("procs_per_node"), world_size=record.get("world_size"),
        launcher="srun", image=record.get("image") or image_that_runs(cfg, record.get("mode")),
        workload=record.get("workload", "ddp"), nccl_tests=record.get("nccl_tests", []),
        details={"mode": record.get("mode"), "job_id": job_id, "job_dir": str(job_dir), "log": log.name,
                 **({"image_id": record["image_id"]} if record.get("image_id") else {})},
    )  # fmt: skip
    if not any(name.endswith((".nsys-rep", ".qdstrm", ".ncu-rep", ".pt.trace.json.gz")) for name in files):
        console.warn(f"no profiler report in {job_dir / REPORTS}: see the job's log {log_path(job_dir, job_id)}")
    return dest
