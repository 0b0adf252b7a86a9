"""NCCL operations of a rank, normalized to the collective: from the NCCL NVTX domain, PyTorch's nccl:<op> ranges,
else the NCCL kernels; timed on the GPU by the NCCL kernels each range launched; grouped by message size."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping

import numpy as np

from nsyskit.analysis.compute.projection import project
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.payloadblob import COMM_KEY, NO_COMM, NRANKS_KEY, SIZE_KEY
from nsyskit.analysis.read.records import Intervals, Launches, NvtxRanges, among, factorize

NCCL_KERNEL = re.compile(r"nccl", re.IGNORECASE)
# NCCL API ranges (ncclAllReduce, in the NCCL domain or the default one), PyTorch's 'nccl:all_reduce, op_id = 17',
# and gloo's collectives as the kit's example marks them on CPU runs ('glooAllReduce' in the gloo domain).
NCCL_RANGE = re.compile(r"^\s*(?:nccl|gloo)(?::|[A-Z_])")
BACKEND_DOMAINS = {"NCCL": "nccl-nvtx", "gloo": "gloo-nvtx"}  # the origin of a range in that NVTX domain
SIZE_BUCKETS = (
    ("<64KB", 0, 64 << 10),
    ("64KB-1MB", 64 << 10, 1 << 20),
    ("1MB-16MB", 1 << 20, 16 << 20),
    (">16MB", 16 << 20, None),
)
UNKNOWN_SIZE = "unknown"
# Collective names after lower-casing and dropping 'nccl', ':', '_', PyTorch's variants' suffixes.
COLLECTIVES = {
    "allreduce": "AllReduce", "allgather": "AllGather", "reducescatter": "ReduceScatter", "alltoall": "AllToAll",
    "alltoallv": "AllToAll", "send": "Send/Recv", "recv": "Send/Recv", "sendrecv": "Send/Recv",
    "broadcast": "Broadcast", "bcast": "Broadcast", "reduce": "Reduce", "gather": "Gather", "scatter": "Scatter",
    "barrier": "Barrier",
}  # fmt: skip
VARIANT_SUFFIXES = re.compile(r"(?:base|coalesced|intotensor|tensor)+$")
NAME_HEAD_END = re.compile(r"[,(\s]")  # a name's head ends at its first comma, parenthesis or space
NCCL_OPS_COLUMNS = ("op", "origin", "start_ns", "duration_ns", "size_bytes", "bucket", "source", "nranks", "size_origin")
NO_NRANKS = 0  # the report does not state the operation's communicator size (the run's world size stands in later)
# NCCL's NVTX payload entries (nvtx_payload_schemas.h): "No. of ranks" on ncclCommInitRank/CommSplit, "NCCL
# communicator ID" on those and on every collective (2.25+); the blob decoder reads the same names.
SIZE_ORIGINS = ("", "payload", "json", "log")  # where an operation's size comes from ('': unknown)


def collective(name: str) -> str | None:
    """The collective an NCCL range or kernel name stands for (ncclAllReduce, nccl:all_gather_into_tensor,
    ncclDevKernel_SendRecv -> AllReduce, AllGather, Send/Recv); None for NCCL calls that move no data (GroupStart)."""
    return _collective_of(NAME_HEAD_END.split(name.strip(), maxsplit=1)[0].lower())


@functools.lru_cache(maxsize=4096)
def _collective_of(head: str) -> str | None:
    """collective() of a lower-cased name head (cached: 'nccl:all_reduce, op_id = N' share the head of all calls)."""
    core = re.sub(r"^(?:nccl(?:devkernel|kernel)?|gloo)[:_]?", "", head)
    core = re.split(r"_(?:ring|tree|nvls|collnet|pat)", core)[0]  # kernel names: ncclKernel_AllReduce_RING_LL_Sum
    return COLLECTIVES.get(VARIANT_SUFFIXES.sub("", core.replace("_", "").replace(":", "")))


BUCKET_LABELS = [label for label, _, _ in SIZE_BUCKETS] + [UNKNOWN_SIZE]


def size_buckets(sizes: np.ndarray) -> np.ndarray:
    """The message-size bucket of each size in bytes (<64KB, 64KB-1MB, 1MB-16MB, >16MB; 'unknown' for NaN)."""
    return np.asarray(BUCKET_LABELS, dtype=object)[size_bucket_codes(sizes)]


def size_bucket_codes(sizes: np.ndarray) -> np.ndarray:
    """The index in BUCKET_LABELS of each size's bucket (size_buckets)."""
    edges = np.asarray([low for _, low, _ in SIZE_BUCKETS[1:]], dtype=np.float64)
    index = np.searchsorted(edges, np.nan_to_num(sizes, nan=0.0), side="right")
    return np.where(np.isnan(sizes), len(BUCKET_LABELS) - 1, index)


def distinct_sizes(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct sizes ascending, NaN last as one value; each size's index among them): a hash pass finds the few
    distinct sizes and a search codes each one (a sort of every size costs twice as much)."""
    values = np.sort(np.unique(sizes, sorted=False))
    return values, np.searchsorted(values, sizes)


def size_bucket(size: float) -> str:
    """The bucket of one size (see size_buckets)."""
    return str(size_buckets(np.asarray([np.nan if size is None else size], dtype=np.float64))[0])


def payload_sizes(nvtx: NvtxRanges, index: np.ndarray, has_json: np.ndarray | None = None) -> np.ndarray:
    """Message sizes of the ranges at `index`: the numeric payload (a decoded blob's too), else a size/bytes field of
    a JSON payload (`has_json`: which of them hold one, when the caller knows)."""
    return sized_payloads(nvtx, index, has_json)[0]


def sized_payloads(
    nvtx: NvtxRanges, index: np.ndarray, has_json: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(payload_sizes, each size's origin as an index into SIZE_ORIGINS: payload, json, or '' unknown)."""
    sizes = nvtx.payload[index].astype(np.float64)
    origin = np.where(np.isnan(sizes), 0, 1).astype(np.int64)
    has_json = np.not_equal(nvtx.json[index], None) if has_json is None else has_json
    for at in np.flatnonzero(np.isnan(sizes) & has_json):  # only JSON holders
        for key, value in _payload_fields(nvtx.json[index[at]]).items():
            if SIZE_KEY.search(key) and isinstance(value, int | float):
                sizes[at], origin[at] = float(value), 2
                break
    return sizes, origin


def payload_nranks(nvtx: NvtxRanges, index: np.ndarray, has_json: np.ndarray | None = None) -> np.ndarray:
    """The communicator size each range at `index` states (NO_NRANKS where none): its own JSON payload's rank count,
    else that of the ncclCommInitRank/CommSplit range of the same rank that created its communicator (by ID).
    `has_json`: which ranges at `index` hold a JSON payload, when the caller knows."""
    nranks = np.full(len(index), NO_NRANKS, dtype=np.int64)
    has_json = np.not_equal(nvtx.json[index], None) if has_json is None else has_json
    has_blob = nvtx.comm is not None and bool(((nvtx.comm != NO_COMM) | (nvtx.nranks > 0)).any())
    if not has_json.any() and not has_blob:  # a collective states its communicator in its payload, or nothing does
        return nranks
    holders = np.flatnonzero(np.not_equal(nvtx.json, None))
    fields = {int(at): _payload_fields(nvtx.json[at]) for at in holders}
    comm_size = {}  # communicator ID -> its size, from the ranges that state both (the init ranges)
    for found in fields.values():
        comm, size = _field(found, COMM_KEY), _field(found, NRANKS_KEY)
        if comm is not None and isinstance(size, int) and size > 0:
            comm_size[comm] = size
    if has_blob:  # the blobs' communicators (their 64 bits as int64; the JSON route's as Python ints)
        comm_size |= _blob_comm_sizes(nvtx, nranks, index, comm_size)
    for position in np.flatnonzero(np.isin(index, holders)).tolist():
        found = fields[int(index[position])]
        size = _field(found, NRANKS_KEY)
        size = size if isinstance(size, int) and size > 0 else comm_size.get(_field(found, COMM_KEY))
        nranks[position] = size or NO_NRANKS
    return nranks


def _blob_comm_sizes(nvtx: NvtxRanges, nranks: np.ndarray, index: np.ndarray, json_sizes: dict) -> dict:
    """Fill `nranks` (aligned with `index`) from the decoded blobs: a range's own stated size, else its
    communicator's from the init ranges that state both; the blobs' communicator sizes, by the JSON route's keys
    (the id as an unsigned number), for the JSON holders."""
    stated = (nvtx.comm != NO_COMM) & (nvtx.nranks > 0)
    ids = nvtx.comm[stated].view(np.uint64).tolist()
    sizes = dict(zip(ids, nvtx.nranks[stated].tolist(), strict=True)) | json_sizes
    own, comm = nvtx.nranks[index], nvtx.comm[index]
    unstated = (own == 0) & (comm != NO_COMM)
    if unstated.any() and sizes:  # the few known communicators, searched for each call's (no sort of the calls)
        known = np.asarray(sorted(sizes), dtype=np.uint64).view(np.int64)  # the ids' 64 bits, as nvtx.comm holds them
        order = np.argsort(known)
        known, counts = known[order], np.asarray([sizes[k] for k in sorted(sizes)], dtype=np.int64)[order]
        wanted = comm[unstated]
        at = np.minimum(np.searchsorted(known, wanted), len(known) - 1)
        own[unstated] = np.where(known[at] == wanted, counts[at], NO_NRANKS)
    blob_known = own > 0
    nranks[blob_known] = own[blob_known]
    return sizes


def _payload_fields(text: str | None) -> dict[str, object]:
    """A JSON payload's fields by name, one level of nesting flattened (a schema's struct under its own name)."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    flat: dict[str, object] = {}
    for key, value in data.items():
        flat.update({str(k): v for k, v in value.items()} if isinstance(value, dict) else {str(key): value})
    return flat


def _field(fields: dict[str, object], pattern: re.Pattern) -> object:
    """The first field whose name `pattern` matches (None when none does); a bool is no number."""
    value = next((v for k, v in fields.items() if pattern.match(k.strip())), None)
    return None if isinstance(value, bool) else value


def nccl_operations(
    nvtx: NvtxRanges, kernels: Intervals, names: Mapping[int, str], launches: Launches | None = None,
    grouped: tuple[list[str], np.ndarray] | None = None,
) -> Table:  # fmt: skip
    """One row per collective operation: collective, origin (pytorch / nccl-nvtx / gloo-nvtx / kernel), start,
    duration, size, bucket. `grouped`: the texts without their per-call parts (analyzers.group_texts), when known.

    A range's duration is the GPU span of the NCCL kernels it launched when the trace has them (source 'gpu'),
    else its CPU duration ('nvtx'). Without NCCL ranges, each NCCL kernel is one operation.
    """
    unique, codes = nvtx.texts
    # What a text says about NCCL lies before its first comma ('nccl:all_reduce, op_id = 17'): the per-call texts
    # share a few such heads, and the regexes run once per head. A per-call part begins with a comma, so a text's
    # head is its group's head: the heads are found per group, not per text.
    texts, text_of = grouped if grouped is not None else (unique, np.arange(len(unique)))
    heads, head_of_text = factorize([text.partition(",")[0] for text in texts])
    head = head_of_text[text_of][codes] if len(codes) else np.empty(0, dtype=np.int64)  # each range's head
    ops_of_head = np.asarray([collective(h) if NCCL_RANGE.match(h) else None for h in heads], dtype=object)
    torch_head = np.asarray([h.startswith("nccl:") for h in heads], dtype=bool)

    chosen = np.flatnonzero(np.asarray([o is not None for o in ops_of_head], dtype=bool)[head])
    if len(chosen):
        is_nccl_kernel = _nccl_kernel_mask(kernels, names)
        timing = (
            project(nvtx.thread[chosen], nvtx.start[chosen], nvtx.end[chosen], launches, kernels, is_nccl_kernel)
            if launches is not None and len(launches)
            else None
        )
        on_gpu = timing.kernels > 0 if timing is not None else np.zeros(len(chosen), dtype=bool)
        cpu = nvtx.end[chosen] - nvtx.start[chosen]
        has_json = np.not_equal(nvtx.json[chosen], None)  # elementwise: few ranges carry a JSON payload
        sizes, size_origin = sized_payloads(nvtx, chosen, has_json)
        # The text columns by index into their few values (the digest factorizes them: no Python step per row).
        origins = ["nccl-nvtx", "pytorch", *BACKEND_DOMAINS.values()]
        origin = torch_head[head[chosen]].astype(np.int64)
        domains, domain_codes = nvtx.domains
        for index, domain in enumerate(BACKEND_DOMAINS, start=2):  # a range in a backend's own domain is its
            if domain in domains:
                origin[domain_codes[chosen] == domains.index(domain)] = index
        size_values, size_code = distinct_sizes(sizes)  # the buckets of the few distinct sizes; the digest's kinds
        bucket = size_bucket_codes(size_values)[size_code]
        coded = {"op": (ops_of_head.tolist(), head[chosen]), "origin": (origins, origin), "bucket": (BUCKET_LABELS, bucket),
                 "source": (["nvtx", "gpu"], on_gpu.astype(np.int64)), "size_bytes": (size_values, size_code),
                 "size_origin": (list(SIZE_ORIGINS), size_origin)}  # fmt: skip
        return Table({
            "op": ops_of_head[head[chosen]], "origin": np.asarray(origins, dtype=object)[origin], "start_ns": nvtx.start[chosen],
            "duration_ns": np.where(on_gpu, timing.span_ns if timing is not None else 0, cpu).astype(np.int64),
            "size_bytes": sizes, "bucket": np.asarray(BUCKET_LABELS, dtype=object)[bucket],
            "source": np.asarray(["nvtx", "gpu"], dtype=object)[on_gpu.astype(np.int64)],
            "nranks": payload_nranks(nvtx, chosen, has_json),
            "size_origin": np.asarray(SIZE_ORIGINS, dtype=object)[size_origin],
        }, coded=coded)  # fmt: skip
    nccl = _nccl_kernel_mask(kernels, names)
    if not nccl.any():
        return Table(
            {
                name: np.empty(0, dtype=object if name in ("op", "origin", "bucket", "source", "size_origin") else np.int64)
                for name in NCCL_OPS_COLUMNS
            }
        )
    ids = kernels.extra["name"][nccl]
    label = {int(i): collective(names.get(int(i), "")) or names.get(int(i), "").split("(")[0] for i in np.unique(ids)}
    sizes = np.full(int(nccl.sum()), np.nan)
    return Table({
        "op": np.asarray([label[int(i)] for i in ids], dtype=object), "origin": np.full(len(ids), "kernel", dtype=object),
        "start_ns": kernels.start[nccl], "duration_ns": kernels.end[nccl] - kernels.start[nccl],
        "size_bytes": sizes, "bucket": size_buckets(sizes), "source": np.full(len(ids), "gpu", dtype=object),
        "nranks": np.full(len(ids), NO_NRANKS, dtype=np.int64), "size_origin": np.full(len(ids), "", dtype=object),
    })  # fmt: skip


def _nccl_kernel_mask(kernels: Intervals, names: Mapping[int, str]) -> np.ndarray:
    ids = np.asarray(sorted(i for i, n in names.items() if NCCL_KERNEL.search(n or "")), dtype=np.int64)
    return among(kernels.extra.get("name", np.empty(0, dtype=np.int64)), ids)
