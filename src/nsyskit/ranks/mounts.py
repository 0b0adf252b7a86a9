"""MOUNTS: the user's code and data as bind mounts HOST:CONTAINER[:ro] (local containers, Pyxis, MPIJob hostPath)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from nsyskit.ranks.workloads import SettingProblem

MODES = ("ro", "rw")
SEPARATOR = ","  # between mounts in MOUNTS, as in Pyxis' --container-mounts (so no path may hold one)
EXAMPLE = "/home/me/code:/code:ro,/fsx/data:/data"


class MountProblem(SettingProblem):
    """What is wrong with MOUNTS and how to fix it (the config loader adds the key and the value)."""


@dataclass(frozen=True)
class Mount:
    """One bind mount: a folder or file of the host (or of every node) seen at CONTAINER inside the ranks' image."""

    host: str
    container: str
    read_only: bool = False

    def text(self) -> str:
        """HOST:CONTAINER[:ro], as MOUNTS and Pyxis' --container-mounts write it."""
        return f"{self.host}:{self.container}" + (":ro" if self.read_only else "")


def _parse_one(entry: str) -> Mount:
    """One HOST:CONTAINER[:ro|rw] entry, both paths absolute."""
    parts = entry.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in MODES):
        raise MountProblem(f"has the malformed mount {entry!r}", f"use HOST:CONTAINER[:ro], comma-separated, e.g. {EXAMPLE}")
    host, container = parts[0], parts[1]
    for side, path in (("host", host), ("container", container)):
        if not path.startswith("/"):
            raise MountProblem(f"mount {entry!r}: the {side} path {path!r} is not absolute",
                               f"give absolute paths, e.g. {os.path.abspath(path or '.') if side == 'host' else '/code'}")  # fmt: skip
    return Mount(host.rstrip("/") or "/", container.rstrip("/") or "/", len(parts) == 3 and parts[2] == "ro")


def parse_mounts(raw: str) -> tuple[Mount, ...]:
    """MOUNTS: HOST:CONTAINER[:ro] entries separated by commas (empty: none); the same container path twice is refused."""
    mounts = tuple(_parse_one(entry.strip()) for entry in raw.split(SEPARATOR) if entry.strip())
    seen: set[str] = set()
    for mount in mounts:
        if mount.container in seen:
            raise MountProblem(f"mounts two things at {mount.container}", "give each mount its own container path")
        seen.add(mount.container)
    return mounts


def missing_host_paths(mounts: tuple[Mount, ...]) -> list[Mount]:
    """The mounts whose host path does not exist here (checked before a local run or a Slurm submit)."""
    return [mount for mount in mounts if not os.path.exists(mount.host)]
