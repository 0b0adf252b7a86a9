"""Pure functions from the counted collective calls to result tables (lists of rows with named columns)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from nsyskit.nccllog.scan.dtypes import BUCKET_NAMES, datatype, size_bucket


class CallGroup(NamedTuple):
    """Identical collective calls: same op, element count, datatype and communicator size."""

    op: str
    count: int
    dtype_code: int
    dtype: str | None  # None: a datatype value NCCL does not define
    bytes: int | None  # count x element size; None when the datatype is unknown
    nranks: int | None  # None: the line was cut short before [nranks=N]
    calls: int


def gpu_label(host: str, dev: int | str) -> str:
    """How a GPU is named in the tables: the host and CUDA device as NCCL prints them, 'host[dev]'."""
    return f"{host}[{dev}]"


def call_groups(coll: Mapping[tuple, int]) -> list[CallGroup]:
    """Decode the scanner's counts {(op, count, datatype, nranks): calls} into CallGroups."""
    groups = []
    for (op, count, dtype, nranks), calls in coll.items():
        code = int(dtype)
        known = datatype(code)
        groups.append(
            CallGroup(
                op=op.decode("utf-8", "replace"),
                count=count,
                dtype_code=code,
                dtype=known[0] if known else None,
                bytes=count * known[1] if known else None,
                nranks=int(nranks) if nranks else None,
                calls=calls,
            )
        )
    return groups


def sized(groups: Iterable[CallGroup]) -> list[CallGroup]:
    """The groups the byte statistics count: a known datatype and a count above zero (as the public awk scripts)."""
    return [g for g in groups if g.bytes is not None and g.count > 0]


def per_op_stats(groups: Iterable[CallGroup]) -> list[dict]:
    """Per op: calls, min/avg/max bytes per call and total bytes; largest total first."""
    acc: dict[str, list] = {}
    for g in sized(groups):
        row = acc.setdefault(g.op, [0, g.bytes, g.bytes, 0])
        row[0] += g.calls
        row[1] = min(row[1], g.bytes)
        row[2] = max(row[2], g.bytes)
        row[3] += g.calls * g.bytes
    rows = [
        {"op": op, "calls": c, "min_bytes": lo, "avg_bytes": total / c, "max_bytes": hi, "total_bytes": total}
        for op, (c, lo, hi, total) in acc.items()
    ]
    return sorted(rows, key=lambda r: (-r["total_bytes"], r["op"]))


def histogram_per_op(groups: Iterable[CallGroup]) -> list[dict]:
    """Calls per op in each message-size bucket (<64KB, 64KB-1MB, 1MB-16MB, >16MB); most calls first."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for g in sized(groups):
        counts[g.op][size_bucket(g.bytes)] += g.calls
    return sorted(_bucket_rows("op", counts), key=lambda r: (-r["calls"], r["op"]))


def histogram_per_gpu(per_gpu: Mapping[tuple[str, str | None], int]) -> list[dict]:
    """Calls per GPU (host[dev]) in each message-size bucket, from {(gpu, bucket or None): calls}; by GPU name."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for (gpu, bucket), calls in per_gpu.items():
        if bucket is not None:
            counts[gpu][bucket] += calls
    return sorted(_bucket_rows("gpu", counts), key=lambda r: r["gpu"])


def _bucket_rows(key: str, counts: Mapping[str, Counter]) -> list[dict]:
    rows = []
    for name, buckets in counts.items():
        row = {key: name}
        row.update({bucket: buckets[bucket] for bucket in BUCKET_NAMES})
        row["calls"] = sum(buckets.values())
        rows.append(row)
    return rows


def aggregate_table(groups: Iterable[CallGroup]) -> list[dict]:
    """Distinct calls: calls x op x count x dtype x bytes per call (plus total bytes); largest total first."""
    acc: Counter = Counter()
    for g in sized(groups):
        acc[(g.op, g.count, g.dtype, g.bytes)] += g.calls
    rows = [
        {
            "calls": calls,
            "op": op,
            "count": count,
            "dtype": dtype,
            "bytes_per_call": nbytes,
            "total_bytes": calls * nbytes,
        }
        for (op, count, dtype, nbytes), calls in acc.items()
    ]
    return sorted(rows, key=lambda r: (-r["total_bytes"], -r["calls"], r["op"], r["count"], r["dtype"]))


def communicators(groups: Iterable[CallGroup]) -> list[dict]:
    """Per op, bytes per call and the communicator size the calls state ([nranks=N]): the calls (what the trace's
    analysis takes its collectives' communicator sizes from where the trace states none)."""
    acc: Counter = Counter()
    for g in sized(groups):
        if g.nranks:
            acc[(g.op, g.bytes, g.nranks)] += g.calls
    return [{"op": op, "bytes": nbytes, "nranks": nranks, "calls": calls} for (op, nbytes, nranks), calls in sorted(acc.items())]


def unknown_datatypes(groups: Iterable[CallGroup]) -> list[dict]:
    """Calls whose datatype value NCCL does not define (left out of the byte statistics): op, datatype, calls."""
    acc: Counter = Counter()
    for g in groups:
        if g.bytes is None:
            acc[(g.op, g.dtype_code)] += g.calls
    return [{"op": op, "datatype": code, "calls": calls} for (op, code), calls in sorted(acc.items())]


def totals(groups: Iterable[CallGroup], gpus: int) -> dict:
    """Calls in all, sized calls, zero-count calls, total bytes, GPUs, communicator sizes seen in collective lines."""
    groups = list(groups)
    good = sized(groups)
    return {
        "calls": sum(g.calls for g in groups),
        "sized_calls": sum(g.calls for g in good),
        "zero_count_calls": sum(g.calls for g in groups if g.count == 0),
        "unknown_datatype_calls": sum(g.calls for g in groups if g.bytes is None),
        "total_bytes": sum(g.calls * g.bytes for g in good),
        "gpus": gpus,
        "nranks": sorted({g.nranks for g in groups if g.nranks is not None}),
    }
