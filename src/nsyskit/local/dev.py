"""The long-running container (invoke run --local --detach, exec, logs, stop): the image with the reports mounted."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

from docker.errors import APIError, NotFound

from nsyskit import engine
from nsyskit.config import Config
from nsyskit.errors import JobNotFound, UsageError
from nsyskit.local.cluster import LABEL_ROLE, LABEL_RUN, host_config, remove_run, warn_capabilities
from nsyskit.ranks import launch

DEV_NAME = "nsyskit-dev"
DEV_RUN_ID = "dev"  # report names of the long-running container start with it


def dev_report_dir(root: Path, cfg: Config) -> Path:
    """reports/dev/: where reports made inside the long-running container land on the host."""
    return Path(root) / cfg.report_dir / DEV_RUN_ID


def start(cfg: Config, root: Path) -> str:
    """Start the long-running container (idle, for exec); says what it did."""
    client = engine.connect()
    try:
        existing = client.containers.get(DEV_NAME)
        if existing.status == "running":
            return f"{DEV_NAME} is already running ({existing.image.tags[0] if existing.image.tags else existing.image.id[:19]}); 'invoke exec' opens a shell"
        existing.remove(force=True)
    except NotFound:
        pass
    engine.require_image(client, cfg.image_ref)
    reports = dev_report_dir(root, cfg)
    reports.mkdir(parents=True, exist_ok=True)
    warn_capabilities(cfg)
    try:
        client.containers.run(
            cfg.image_ref, ["sleep", "infinity"], name=DEV_NAME, hostname="dev", detach=True, init=True,
            labels={LABEL_RUN: DEV_RUN_ID, LABEL_ROLE: "dev"},
            environment=launch.wrapper_env(cfg, launch.CONTAINER_REPORT_DIR, "torchrun", job_id=DEV_RUN_ID),
            **host_config(cfg, reports),  # the same as a run's containers: SYS_ADMIN too when sampling
        )  # fmt: skip
    except APIError as exc:
        with contextlib.suppress(NotFound):
            client.containers.get(DEV_NAME).remove(force=True)  # created but not started: leave no husk
        raise engine.start_failed(exc, cfg.gpus_per_node, cfg.sources.get("GPUS_PER_NODE", "")) from None
    example = " ".join(launch.torchrun_command(cfg))
    return f"started {DEV_NAME} from {cfg.image_ref}; reports in {reports}\ntry: invoke exec --command '{example}'"


def _container():
    try:
        return engine.connect().containers.get(DEV_NAME)
    except NotFound:
        raise JobNotFound(f"no {DEV_NAME} container", fix="start it with 'invoke run --local --detach'") from None


def exec_in(command: str | None) -> int:
    """Run a command in the long-running container (streamed) and return its exit code; no command: a shell."""
    container = _container()
    if container.status != "running":
        raise JobNotFound(f"{DEV_NAME} is {container.status}", fix="restart it with 'invoke run --local --detach'")
    if command is None:
        docker_cli = shutil.which("docker")
        if docker_cli is None or not sys.stdin.isatty():
            raise UsageError("an interactive shell needs the docker CLI and a terminal", fix="pass --command 'CMD' instead")
        os.execv(docker_cli, [docker_cli, "exec", "-it", DEV_NAME, "bash"])  # hands the terminal to docker
    exec_id = container.client.api.exec_create(container.id, ["bash", "-lc", command])["Id"]
    for chunk in container.client.api.exec_start(exec_id, stream=True):
        sys.stdout.write(chunk.decode(errors="replace"))
        sys.stdout.flush()
    return container.client.api.exec_inspect(exec_id)["ExitCode"] or 0


def logs(follow: bool) -> None:
    """Print the long-running container's output (and keep following it with follow=True)."""
    container = _container()
    if follow:
        for chunk in container.logs(stream=True, follow=True):
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
    else:
        sys.stdout.write(container.logs().decode(errors="replace"))


def containers(run_id: str | None = None, running_only: bool = False) -> list[tuple[str, str]]:
    """(name, state) of the nsyskit containers of run_id (None: of every run and the long-running one)."""
    selector = {"label": f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN}
    found = engine.connect().containers.list(all=not running_only, filters=selector)
    return sorted((c.name, c.status) for c in found)


def stop(run_id: str | None = None, everything: bool = False) -> list[str]:
    """Remove the long-running container, or the containers/network of run_id, or of every nsyskit run."""
    client = engine.connect()
    if everything:
        return remove_run(client)
    return remove_run(client, run_id or DEV_RUN_ID)
