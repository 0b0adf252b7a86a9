"""One rank's NCCL log as its collective calls in call order (op, message bytes, communicator, its size): what the
trace's analysis joins to NCCL ranges whose sizes the trace does not hold (analysis/compute/nccllogjoin.py).

The kit's runs write one NCCL_DEBUG_FILE per rank (NAME.nccl.log beside NAME's report) with COLL lines
('<Op>: opCount <hex> sendbuff .. recvbuff .. count N datatype D op O root R comm 0x.. [nranks=N] stream 0x..'),
one per call, in the order the process made them. Bytes are count x the datatype's size: the per-rank size NCCL's
NVTX payload states too (AllGather's send count, ReduceScatter's receive count, AlltoAll's per-peer count).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nsyskit.nccllog.scan.dtypes import DATATYPES

# The source (host:pid:tid [dev]) and a whole collective line; a cut or garbled line does not match (left out).
CALL = re.compile(
    rb"([^ \n]+):(\d+):\d+ \[\d+\] NCCL INFO ([A-Z][A-Za-z]+): opCount [0-9a-fA-Fx]+ sendbuff \S+ recvbuff \S+ "
    rb"(?:acc \S+ )?count (\d+) datatype (\d+) op \S+ root \S+ comm (\S+) \[nranks=(\d+)\]"
)
LOG_SUFFIXES = (".nccl.log", ".nccl.log.gz")


@dataclass(frozen=True)
class LoggedCalls:
    """A process's collective calls in call order: op as logged (AllReduce, Send...), bytes, communicator, nranks;
    `processes`: the distinct host:pid sources (one for a rank's own log)."""

    path: Path
    op: list[str]
    nbytes: np.ndarray
    comm: list[str]
    nranks: np.ndarray
    processes: int

    def __len__(self) -> int:
        return len(self.op)


def log_beside(report: Path) -> Path | None:
    """The rank's NCCL log the kit's wrapper writes beside its report (NAME.nccl.log, or gzipped), else None."""
    stem = report.with_suffix("").name  # NAME.sqlite, NAME.nsys-rep (a host name in NAME may hold dots)
    return next((p for p in (report.with_name(stem + s) for s in LOG_SUFFIXES) if p.is_file()), None)


def read_calls(path: Path) -> LoggedCalls:
    """The collective calls of an NCCL log (a datatype NCCL does not define gives no size: NaN)."""
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    found = CALL.findall(text)
    sizes = {code: size for code, (_name, size) in DATATYPES.items()}
    nbytes = np.asarray([int(count) * sizes.get(int(dtype), np.nan) for _h, _p, _o, count, dtype, _c, _n in found],
                        dtype=np.float64)  # fmt: skip
    return LoggedCalls(
        path, [op.decode() for _h, _p, op, *_rest in found], nbytes, [c.decode() for *_x, c, _n in found],
        np.asarray([int(n) for *_x, n in found], dtype=np.int64), len({(h, p) for h, p, *_rest in found}),
    )  # fmt: skip
