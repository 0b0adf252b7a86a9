"""Generated NCCL traces whose calls state their sizes as NCCL's extended NVTX payloads, in the two forms nsys exports
them (`--include-blobs=true`: binaryData bytes through the schema tables; jsonText), in NCCL's two layouts: 2.16-2.24
(no communicator: the size first) and 2.25+ (the communicator's 64-bit id first, the size at 8, an int at 16).

The layouts and schema ids are NCCL's (nvtx_payload_schemas.h, nvtx.h); the blob header is the 32 bytes public
decoders read (domain, schema id, payload size, a fourth field never read)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from nsys_fixtures import Export, Kernel, Launch, Range

SCHEMA_BASE = 1 << 24
REDOP_ENUM = SCHEMA_BASE + 20  # the reduction op's enum type: its id moves between NCCL releases
INT, UINT64, SIZE = 5, 18, 22
COMM_NAME, SIZE_NAME = "NCCL communicator ID", "Message size [bytes]"
# (schema id offset, payload size, entries (type, name, offset or None: the first, NULL in exports)) per call.
LAYOUTS = {
    "2.28": {
        "ncclCommInitRank": (11, 24, [(UINT64, COMM_NAME, None), (INT, "No. of ranks", 8), (INT, "Rank", 12), (INT, "CUDA device", 16)]),
        "ncclAllReduce": (5, 24, [(UINT64, COMM_NAME, None), (SIZE, SIZE_NAME, 8), (REDOP_ENUM, "Reduction operation", 16)]),
        "ncclAllGather": (4, 16, [(UINT64, COMM_NAME, None), (SIZE, SIZE_NAME, 8)]),
        "ncclReduceScatter": (7, 24, [(UINT64, COMM_NAME, None), (SIZE, SIZE_NAME, 8), (REDOP_ENUM, "Reduction operation", 16)]),
        "ncclBroadcast": (6, 24, [(UINT64, COMM_NAME, None), (SIZE, SIZE_NAME, 8), (INT, "Root", 16)]),
        "ncclSend": (9, 24, [(UINT64, COMM_NAME, None), (SIZE, SIZE_NAME, 8), (INT, "Peer rank", 16)]),
        "ncclAlltoAll": (16, 16, [(UINT64, COMM_NAME, None), (SIZE, SIZE_NAME, 8)]),
    },
    "2.19": {
        "ncclCommInitRank": (0, 24, [(UINT64, COMM_NAME, None), (INT, "No. of ranks", 8), (INT, "Rank", 12), (INT, "CUDA device", 16)]),
        "ncclAllReduce": (5, 16, [(SIZE, SIZE_NAME, None), (REDOP_ENUM, "Reduction operation", 8)]),
        "ncclAllGather": (4, 8, [(SIZE, SIZE_NAME, None)]),
        "ncclReduceScatter": (7, 16, [(SIZE, SIZE_NAME, None), (REDOP_ENUM, "Reduction operation", 8)]),
        "ncclBroadcast": (6, 16, [(SIZE, "Bytes", None), (INT, "Root", 8)]),
        "ncclSend": (9, 16, [(SIZE, "Bytes", None), (INT, "Peer rank", 8)]),
    },
}  # fmt: skip
FORMATS = {INT: "<i", UINT64: "<Q", SIZE: "<Q", REDOP_ENUM: "<i"}
KERNELS = {
    "ncclAllReduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclAllGather": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclReduceScatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclBroadcast": "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclSend": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "ncclAlltoAll": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
}
COMMS = {0xF00DFACE12345678: 8, 0x9E3779B97F4A7C15: 2}  # two communicators (ids above 2^63 too) and their sizes


@dataclass(frozen=True)
class Call:
    """One planted NCCL call: API name, communicator, message bytes (as NCCL states them), kernel ns."""

    api: str
    comm: int
    size: int
    kernel_ns: int


def planted_calls() -> list[Call]:
    """Every collective on both communicators, at sizes in several buckets."""
    big, small = list(COMMS)
    calls = []
    for i, api in enumerate(["ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend",
                             "ncclAlltoAll"]):  # fmt: skip
        for j, comm in enumerate((big, small)):
            calls.append(Call(api, comm, (4096 << (4 * i)) + 1024 * j, 20_000 + 7_000 * i + 3_000 * j))
    return calls


def _values(api: str, call: Call | None, comm: int) -> dict[str, object]:
    """The payload's field values by entry name."""
    if call is None:
        return {COMM_NAME: comm, "No. of ranks": COMMS[comm], "Rank": 0, "CUDA device": 0}
    return {COMM_NAME: comm, SIZE_NAME: call.size, "Bytes": call.size, "Reduction operation": 0, "Root": 0,
            "Peer rank": 1}  # fmt: skip


def blob(layout: str, api: str, values: dict[str, object], disputed: int = 0) -> bytes:
    """An exported payload: the 32-byte header, then the struct the schema describes."""
    schema, size, entries = LAYOUTS[layout][api]
    body = bytearray(size)
    for kind, name, offset in entries:
        struct.pack_into(FORMATS[kind], body, offset or 0, values[name])
    return struct.pack("<QQQQ", 1, SCHEMA_BASE + schema, size, disputed) + bytes(body)


def as_json(layout: str, api: str, values: dict[str, object]) -> str:
    """The same payload as nsys's jsonText states it: the schema's fields by name."""
    _schema, _size, entries = LAYOUTS[layout][api]
    return json.dumps({name: ("Sum" if kind == REDOP_ENUM else values[name]) for kind, name, _ in entries})


def schemas(layout: str) -> dict[int, tuple[int, list]]:
    """The layout's schema table rows (Export.payload_schemas)."""
    return {SCHEMA_BASE + sid: (size, entries) for sid, size, entries in LAYOUTS[layout].values()}


def nccl_export(layout: str, form: str, calls: list[Call] | None = None) -> Export:
    """A rank that inits both communicators, then makes the planted calls (NCCL domain ranges, each launching one
    kernel of the planted time); payloads as `form` ('blob' or 'json') says."""
    calls = [c for c in (planted_calls() if calls is None else calls) if c.api in LAYOUTS[layout]]  # 2.19: no AlltoAll

    def payload(api: str, call: Call | None, comm: int) -> dict:
        values = _values(api, call, comm)
        return {"blob": blob(layout, api, values)} if form == "blob" else {"json": as_json(layout, api, values)}

    ranges = [Range(10 + i, 20 + i, "ncclCommInitRank", domain="NCCL", **payload("ncclCommInitRank", None, comm))
              for i, comm in enumerate(COMMS)]  # fmt: skip
    launches, kernels, at = [], [], 1_000
    for corr, call in enumerate(calls, start=1):
        ranges.append(Range(at, at + 500, call.api, domain="NCCL", **payload(call.api, call, call.comm)))
        launches.append(Launch(at + 100, at + 200, corr))
        kernels.append(Kernel(at + 300, at + 300 + call.kernel_ns, KERNELS[call.api], correlation=corr))
        at += call.kernel_ns + 10_000
    return Export(kernels=kernels, ranges=ranges, launches=launches, version="2025.3.2.0",
                  payload_schemas=schemas(layout))  # fmt: skip
