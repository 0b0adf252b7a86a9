"""Reach the Docker engine, and on Debian/Ubuntu as root install and start one when none is running."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
from docker.errors import DockerException

from nsyskit import console, hostpkgs
from nsyskit.errors import EngineUnavailable

DOCKERD_LOG = Path("/var/log/nsyskit/dockerd.log")
START_TIMEOUT_S = 90


def connect() -> docker.DockerClient:
    """A client for the engine the environment points at (DOCKER_HOST or the default socket), or EngineUnavailable."""
    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except DockerException as exc:
        raise EngineUnavailable(
            f"no Docker engine reachable ({_where()}): {_short(exc)}; run 'invoke setup' to install/start one"
        ) from exc


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
        if os.environ.get("DOCKER_HOST"):
            # The user pointed us at a specific engine: starting a local one would hide that.
            raise EngineUnavailable(
                f"no Docker engine reachable at DOCKER_HOST={os.environ['DOCKER_HOST']}: start that engine, "
                "or unset DOCKER_HOST to let 'invoke setup' start a local one"
            ) from exc
    if os.geteuid() != 0 or not hostpkgs.is_debian_like():
        raise EngineUnavailable(
            "no Docker engine is running and nsyskit can only install one on Debian/Ubuntu as root: "
            "install Docker Engine (https://docs.docker.com/engine/install/) and start it, or set DOCKER_HOST"
        )
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
                raise EngineUnavailable(f"dockerd did not answer within {START_TIMEOUT_S} s; log {DOCKERD_LOG}: {tail}") from None
            time.sleep(1)
    did.append(f"started dockerd (log: {DOCKERD_LOG})")
    return client, "; ".join(did)
