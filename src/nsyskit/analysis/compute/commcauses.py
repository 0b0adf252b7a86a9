"""Each rank's facts about its communication that the run-level tables lose: when its slowest collective of each
kind ran (the step), and whether its NCCL kernels share a stream with its compute kernels.

Extractors for compute.evidence (registered in EXTRACTORS): pure functions of one rank's tables, vectorized.
A key names the group it describes as 'op|origin|bucket|fact' (evidence keys are text, values numbers).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nsyskit.analysis.compute import analyzers
from nsyskit.analysis.compute.evidence import EXTRACTORS, RankInputs

OUTLIER_X = 5.0  # a collective over this many times the median of its operation and size bucket ...
OUTLIER_MIN_NS = 1_000_000  # ... and at least this much longer (ns): microsecond jitter is no outlier
SERIAL_OVERLAP_PCT = 1.0  # a GPU's NCCL time overlapping compute under this share: communication runs serialized
SEPARATOR = "|"


def group_key(op: str, origin: str, bucket: str, fact: str) -> str:
    """The evidence key of one (op, origin, bucket) group's fact."""
    return SEPARATOR.join((op, origin, bucket, fact))


def slowest_collectives(inputs: RankInputs) -> Iterator[tuple[str, str, float]]:
    """Per (op, origin, bucket) group of the rank whose slowest operation lies over OUTLIER_X times the rank's own
    median: that operation's duration, start and step (-1 outside every window step)."""
    ops = inputs.nccl_operations
    if ops is None or len(ops) < 3:
        return
    names = [ops.factorized(column) for column in ("op", "origin", "bucket")]
    sizes = [len(values) for values, _codes in names]
    code = (names[0][1] * sizes[1] + names[1][1]) * sizes[2] + names[2][1]
    durations, starts = ops["duration_ns"], ops["start_ns"]
    # few groups: as 16-bit keys the stable sort is numpy's radix sort, linear (int64 keys: a merge sort, 4x longer)
    order = np.argsort(code.astype(np.uint16) if sizes[0] * sizes[1] * sizes[2] <= 1 << 16 else code, kind="stable")
    bounds = np.flatnonzero(np.r_[True, code[order][1:] != code[order][:-1], True])
    steps = inputs.steps
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        members = order[a:b]
        if len(members) < 3:  # no median to stand out from
            continue
        worst = members[np.argmax(durations[members])]
        median = float(np.median(durations[members]))
        if durations[worst] <= OUTLIER_X * median or durations[worst] - median < OUTLIER_MIN_NS:
            continue
        g = int(code[worst])
        key = (names[0][0][g // (sizes[1] * sizes[2])], names[1][0][(g // sizes[2]) % sizes[1]], names[2][0][g % sizes[2]])
        yield "nccl_outlier", group_key(*map(str, key), "worst_ns"), float(durations[worst])
        yield "nccl_outlier", group_key(*map(str, key), "start_ns"), float(starts[worst])
        yield "nccl_outlier", group_key(*map(str, key), "step"), float(_step_of(steps, int(starts[worst])))


def _step_of(steps, start: int) -> int:
    """The window step whose span holds `start` (-1: none)."""
    if steps is None or not len(steps):
        return -1
    order = np.argsort(steps["start_ns"], kind="stable")
    at = int(np.searchsorted(steps["start_ns"][order], start, side="right")) - 1
    if at < 0:
        return -1
    row = order[at]
    inside = start < steps["start_ns"][row] + steps["duration_ns"][row]
    return int(steps["step"][row]) if inside else -1


def shared_streams(inputs: RankInputs) -> Iterator[tuple[str, str, float]]:
    """On each GPU whose communication never overlaps its compute (under SERIAL_OVERLAP_PCT of the NCCL time): whether
    NCCL kernels run on a stream that compute kernels use too (then no overlap is possible). The streams are read
    only then (a healthy rank pays nothing): the kernels again, with their stream column."""
    table = inputs.breakdown
    if table is None or not len(table) or inputs.reader is None:
        return
    comm, compute, both = table["comm_ns"], table["compute_ns"], table["compute_comm_overlap_ns"]
    serial = (comm > 0) & (compute > 0) & (both * 100.0 < SERIAL_OVERLAP_PCT * comm)
    if not serial.any():
        return
    kernels = inputs.reader.kernels(inputs.pid, stream=True)
    if "stream" not in kernels.extra:  # an export without streams: the breakdown alone tells
        return
    nccl = np.isin(kernels.extra["name"], analyzers.nccl_name_ids(inputs.kernel_names))
    for device in table["device"][serial]:
        on = kernels.device == device
        comm_streams = np.unique(kernels.extra["stream"][on & nccl])
        shared = np.isin(kernels.extra["stream"][on & ~nccl], comm_streams)
        yield "serialized_streams", f"{int(device)}{SEPARATOR}shared_stream", float(shared.any())
        yield "serialized_streams", f"{int(device)}{SEPARATOR}compute_kernels_on_comm_streams", float(shared.sum())


EXTRACTORS.extend((slowest_collectives, shared_streams))
