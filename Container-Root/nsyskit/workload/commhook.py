"""DDP communication hook: each gradient bucket's allreduce inside an NVTX range named and domained after the process
group's backend (`ncclAllReduce` in NCCL, `glooAllReduce` in gloo), its bytes as payload.

So that a CPU run (gloo, no NCCL) shows its communication, message sizes and comm share in nsys, as NCCL's own
NVTX ranges do on GPUs, labelled with the backend that really moved the data. The range is a start/end range (not push/pop): it opens when DDP hands the bucket over
and closes when the allreduce future completes, on whichever thread that happens.
"""

from __future__ import annotations

import ctypes
import os

DOMAINS = {"nccl": b"NCCL", "gloo": b"gloo"}  # NVTX domain per backend; others use their own name
RANGE_NAME = "{backend}AllReduce (DDP bucket {index})"
PAYLOAD_UINT64, MESSAGE_ASCII, ATTRIBUTES_VERSION = 1, 1, 2  # nvtxEventAttributes_t constants (NVTX v2 ABI)


class _Attributes(ctypes.Structure):
    """nvtxEventAttributes_t: message, color, category and a numeric payload of an NVTX event."""

    _fields_ = [
        ("version", ctypes.c_uint16), ("size", ctypes.c_uint16), ("category", ctypes.c_uint32),
        ("colorType", ctypes.c_int32), ("color", ctypes.c_uint32), ("payloadType", ctypes.c_int32),
        ("reserved0", ctypes.c_int32), ("payload", ctypes.c_uint64), ("messageType", ctypes.c_int32),
        ("message", ctypes.c_char_p),
    ]  # fmt: skip


class NvtxDomain:
    """Start/end ranges with a uint64 payload in one NVTX domain (libnvToolsExt); no-ops where it is missing."""

    def __init__(self, name: bytes = DOMAINS["nccl"]) -> None:
        self.library = self.domain = None
        try:
            library = ctypes.CDLL(os.environ.get("NSYSKIT_NVTX_LIBRARY") or "libnvToolsExt.so.1")
        except OSError:
            return
        library.nvtxDomainCreateA.restype = ctypes.c_void_p
        library.nvtxDomainCreateA.argtypes = [ctypes.c_char_p]
        library.nvtxDomainRangeStartEx.restype = ctypes.c_uint64
        library.nvtxDomainRangeStartEx.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Attributes)]
        library.nvtxDomainRangeEnd.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        self.library, self.domain = library, library.nvtxDomainCreateA(name)

    def start(self, message: str, payload: int) -> int:
        """Open a range named `message` carrying `payload`; returns its id (0 when NVTX is unavailable)."""
        if self.library is None:
            return 0
        attributes = _Attributes(
            ATTRIBUTES_VERSION, ctypes.sizeof(_Attributes), 0, 0, 0, PAYLOAD_UINT64, 0, payload, MESSAGE_ASCII,
            message.encode(),
        )  # fmt: skip
        return self.library.nvtxDomainRangeStartEx(self.domain, ctypes.byref(attributes))

    def end(self, range_id: int) -> None:
        """Close a range opened by start()."""
        if self.library is not None and range_id:
            self.library.nvtxDomainRangeEnd(self.domain, range_id)


def bucket_bytes(bucket) -> int:
    """The size in bytes of a DDP gradient bucket's flat buffer."""
    buffer = bucket.buffer()
    return buffer.numel() * buffer.element_size()


def register(ddp, nvtx: NvtxDomain | None = None) -> NvtxDomain:
    """Register on `ddp` an allreduce hook that wraps each bucket in an NVTX range of its backend (payload: bytes)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    backend = str(dist.get_backend()).lower()
    domain = nvtx or NvtxDomain(DOMAINS.get(backend, backend.encode()))

    def allreduce_in_nvtx_range(process_group, bucket):
        name = RANGE_NAME.format(backend=backend, index=bucket.index())
        range_id = domain.start(name, bucket_bytes(bucket))

        def finished(future):
            domain.end(range_id)
            return future.value()

        return default_hooks.allreduce_hook(process_group, bucket).then(finished)

    ddp.register_comm_hook(None, allreduce_in_nvtx_range)
    return domain
