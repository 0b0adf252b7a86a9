"""Who this process is in the job: rank, world size, local rank, node and master address, from any launcher.

MASTER_ADDR has one source: the launcher exports it (torchrun itself; mpirun -x MASTER_ADDR from
nsyskit.ranks.launch.mpirun_command, for the local and k8s runs; the sbatch script, from Slurm's node list).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

DEFAULT_MASTER_PORT = "29500"


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


def master_addr(env: dict[str, str], launcher: str) -> str:
    """Rank 0's host, as the launcher exported it in MASTER_ADDR (a RuntimeError naming the fix when it did not)."""
    addr = env.get("MASTER_ADDR", "").strip()
    if not addr:
        raise RuntimeError(
            f"rank 0's address is unknown under {launcher}: the launcher must export MASTER_ADDR "
            "(nsyskit's launchers do: mpirun -x MASTER_ADDR=HOST, the sbatch script exports it)"
        )
    return addr


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
        launcher = "mpirun"
        addr = master_addr(env, launcher)  # mpirun does not say where rank 0 is
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        local = _int(env, "SLURM_LOCALID") or 0
        local_world = _int(env, "SLURM_NTASKS_PER_NODE") or max(1, world // max(1, _int(env, "SLURM_NNODES") or 1))
        node = _int(env, "SLURM_NODEID")
        launcher = "slurm"
        addr = master_addr(env, launcher)
    else:
        rank, world, local, local_world, node = 0, 1, 0, 1, 0
        addr, launcher = env.get("MASTER_ADDR") or "127.0.0.1", "single"
    if node is None:
        node = rank // max(1, local_world)  # block mapping: ranks fill one node after the other
    return RankInfo(rank, world, local, local_world, node, addr, port, launcher)


def short_hostname() -> str:
    """This host's name without the domain (what report names use)."""
    return socket.gethostname().split(".")[0]
