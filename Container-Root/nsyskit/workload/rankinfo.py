"""Who this process is in the job: rank, world size, local rank, node and master address, from any launcher."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

DEFAULT_MASTER_PORT = "29500"
DEFAULT_HOSTFILE = "/etc/mpi/hostfile"  # where the Kubeflow MPI operator (and the local multi-node run) puts it


@dataclass(frozen=True)
class RankInfo:
    """This process's place in the job and how to reach rank 0."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node: int
    master_addr: str
    master_port: str
    launcher: str  # torchrun, mpirun, slurm or single


def _int(env: dict[str, str], *keys: str) -> int | None:
    """The first of `keys` set in env, as an int."""
    for key in keys:
        if env.get(key, "").strip():
            return int(env[key])
    return None


def first_host_of_hostfile(path: str) -> str | None:
    """The host of the hostfile's first entry (rank 0 runs there with block mapping), or None."""
    try:
        with open(path) as handle:
            for line in handle:
                words = line.split("#", 1)[0].split()
                if words:
                    return words[0]
    except OSError:
        return None
    return None


def first_host_of_nodelist(nodelist: str) -> str:
    """The first host of a Slurm node list such as 'gpu-[3-5,8],cpu1' (what 'scontrol show hostnames' prints first)."""
    first = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not first:
        return nodelist
    prefix, ranges = first.group(1), first.group(2)
    if not ranges:
        return prefix
    start = ranges.split(",")[0].split("-")[0]
    return prefix + start


def detect(env: dict[str, str] | None = None) -> RankInfo:
    """Rank information from torchrun (RANK...), Open MPI (OMPI_COMM_WORLD_*) or Slurm (SLURM_*), else a single process."""
    env = dict(os.environ if env is None else env)
    port = env.get("MASTER_PORT") or DEFAULT_MASTER_PORT
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = _int(env, "LOCAL_RANK") or 0
        local_world = _int(env, "LOCAL_WORLD_SIZE") or world
        node = _int(env, "GROUP_RANK")
        addr = env.get("MASTER_ADDR") or "127.0.0.1"
        launcher = "torchrun"
    elif "OMPI_COMM_WORLD_RANK" in env:
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        local = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK") or 0
        local_world = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE") or 1
        node = None
        # mpirun does not say where rank 0 is: the launcher exports MASTER_ADDR, else the hostfile's first host.
        addr = env.get("MASTER_ADDR") or first_host_of_hostfile(env.get("NSYSKIT_HOSTFILE", DEFAULT_HOSTFILE))
        if not addr:
            raise RuntimeError(
                "rank 0's address is unknown under mpirun: export MASTER_ADDR (mpirun -x MASTER_ADDR=HOST) "
                "or make the hostfile readable at $NSYSKIT_HOSTFILE"
            )
        launcher = "mpirun"
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        local = _int(env, "SLURM_LOCALID") or 0
        local_world = _int(env, "SLURM_NTASKS_PER_NODE") or max(1, world // max(1, _int(env, "SLURM_NNODES") or 1))
        node = _int(env, "SLURM_NODEID")
        addr = env.get("MASTER_ADDR") or first_host_of_nodelist(env.get("SLURM_JOB_NODELIST", "") or "127.0.0.1")
        launcher = "slurm"
    else:
        rank, world, local, local_world, node = 0, 1, 0, 1, 0
        addr, launcher = env.get("MASTER_ADDR") or "127.0.0.1", "single"
    if node is None:
        node = rank // max(1, local_world)  # block mapping: ranks fill one node after the other
    return RankInfo(rank, world, local, local_world, node, addr, port, launcher)


def short_hostname() -> str:
    """This host's name without the domain (what report names use)."""
    return socket.gethostname().split(".")[0]
