"""Shared by the nccl-log tests: the fixture logs and the real logs, a collective line, per-GPU and per-op views."""

from __future__ import annotations

from pathlib import Path

from fixtures.realdata import REAL_DATA, need

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"
NEMO = DATA / "nemo_4gpu.log"
SRUN = DATA / "srun_megatron.log"
RANK_A = DATA / "debugfile.nodeA.3001.log"
RANK_B = DATA / "debugfile.nodeB.3002.log.gz"
KIT = DATA / "kit_mpirun.log"
GARBLED = DATA / "garbled.log"
KB, MB = 1024, 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]
REAL = REAL_DATA / "nccl-logs"
DTYPE_BYTES = {7: 4, 9: 2, 6: 2, 4: 8, 1: 1}


def real(name: str) -> Path:
    """A real log of ../shared/real-data/nccl-logs (named by its number prefix); skips a clone without them."""
    (path,) = need(REAL).glob(f"{name}-*.log")
    return path


def real_folder() -> Path:
    """../shared/real-data/nccl-logs; skips a clone without it (fails where the real data is required)."""
    return need(REAL)


def coll(
    host: str, pid: int, dev: int, op: str, count: int, dtype: int, comm: str, nranks: int, op_count: int = 1
) -> str:
    """One NCCL collective INFO line as NCCL 2.x prints it."""
    return (
        f"{host}:{pid}:{pid + 7} [{dev}] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x7f{op_count:08x} recvbuff "
        f"0x7e{op_count:08x} count {count} datatype {dtype} op 0 root 0 comm {comm} [nranks={nranks}] stream 0x55aa"
    )


def gpus(report) -> dict[str, int]:
    """Calls per GPU of the per-GPU table."""
    return {row["gpu"]: row["calls"] for row in report.histogram_per_gpu}


def ops(report) -> dict[str, tuple[int, int]]:
    """op -> (calls, total bytes)."""
    return {row["op"]: (row["calls"], row["total_bytes"]) for row in report.per_op}
