"""Reach the Docker engine, and on Debian/Ubuntu as root install and start one when none is running."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

from nsyskit import console, hostpkgs
from nsyskit.errors import ConfigError, EngineUnavailable, ImageNotBuilt, NsyskitError

DOCKERD_LOG = Path("/var/log/nsyskit/dockerd.log")
START_TIMEOUT_S = 90


def connect() -> docker.DockerClient:
    """A client for the engine the environment points at (DOCKER_HOST or the default socket), or EngineUnavailable."""
    try:
        client = docker.from_env(timeout=600)  # asks the engine its API version: may fail like ping()
        client.ping()
        return client
    except ValueError as exc:  # docker-py's word for a malformed address
        raise EngineUnavailable(
            f"DOCKER_HOST={_where()!r} is not a Docker engine address ({_short(exc)})",
            fix="use unix:///PATH/docker.sock or tcp://HOST:PORT, or unset DOCKER_HOST",
        ) from None
    except DockerException as exc:
        where = f"DOCKER_HOST={_where()}" if os.environ.get("DOCKER_HOST") else _where()
        raise EngineUnavailable(f"no Docker engine reachable at {where}: {_short(exc)}", fix=_engine_fix(exc)) from exc


def require_image(client: docker.DockerClient, ref: str) -> None:
    """Raise ImageNotBuilt, saying how to get it, unless image REF is in the engine."""
    try:
        client.images.get(ref)
    except ImageNotFound:
        raise ImageNotBuilt(
            f"image {ref} is not in the local engine", [ref], fix="run 'invoke build' (or 'invoke pull') first"
        ) from None


def start_failed(exc: DockerException, gpus_per_node: int, source: str = "") -> NsyskitError:
    """The one-line error for a container the engine would not start (no GPU support named as such)."""
    text = " ".join(str(getattr(exc, "explanation", None) or exc).split())[:300]
    if gpus_per_node and "[[gpu]]" in text:
        return ConfigError(
            "GPUS_PER_NODE", gpus_per_node, f"asks for GPUs, but the Docker engine cannot give containers any ({text})",
            "set GPUS_PER_NODE=0 to run on CPU (e.g. --profile local-cpu), or install the NVIDIA Container Toolkit "
            "and restart dockerd", source,
        )  # fmt: skip
    return EngineUnavailable(f"the Docker engine would not start a container: {text}", fix="act on the engine's message")


def _can_start_one() -> bool:
    """Whether 'invoke setup' can install and start an engine here (as root on Debian/Ubuntu)."""
    return os.geteuid() == 0 and hostpkgs.is_debian_like()


def _engine_fix(exc: Exception) -> str:
    """What to do when the engine does not answer, given who we are and where DOCKER_HOST points."""
    if "ermission denied" in str(exc):
        return "add this user to the docker group (then log in again), or run as root"
    if os.environ.get("DOCKER_HOST"):
        return "start the engine DOCKER_HOST names" + (
            ", or unset DOCKER_HOST and run 'invoke setup' to start a local one" if _can_start_one() else ""
        )
    if _can_start_one():
        return "run 'invoke setup' to install and start one"
    return "install Docker Engine (https://docs.docker.com/engine/install/) and start it, or set DOCKER_HOST"


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def ensure_engine() -> tuple[docker.DockerClient, str]:
    """A reachable engine and what was done to get it ('' when it was already running)."""
    try:
        return connect(), ""
    except EngineUnavailable as exc:
        # DOCKER_HOST names a specific engine: starting a local one would hide that (connect() says the fix).
        # Not root or not Debian/Ubuntu: nothing can be started here (connect() says what to install or change).
        if os.environ.get("DOCKER_HOST") or not _can_start_one() or "ermission denied" in str(exc):
            raise
    did = []
    if not shutil.which("dockerd"):
        console.info("installing docker.io (apt-get)…")
        hostpkgs.install("docker")
        did.append("installed docker.io")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    console.info(f"starting dockerd (log: {DOCKERD_LOG})…")
    with DOCKERD_LOG.open("ab") as log:
        subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            client = connect()
            break
        except EngineUnavailable:
            if time.monotonic() > deadline:
                tail = " | ".join(DOCKERD_LOG.read_text(errors="replace").strip().splitlines()[-3:])
                raise EngineUnavailable(
                    f"dockerd did not answer within {START_TIMEOUT_S} s; log {DOCKERD_LOG}: {tail}", fix="see that log"
                ) from None
            time.sleep(1)
    did.append(f"started dockerd (log: {DOCKERD_LOG})")
    return client, "; ".join(did)
