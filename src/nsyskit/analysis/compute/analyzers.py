"""Analyzers: pure functions from reader columns to named-column Tables (no I/O, no printing)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from nsyskit.analysis.compute import sweep
from nsyskit.analysis.compute.kernelnames import short_names
from nsyskit.analysis.compute.nccl import NCCL_KERNEL as NCCL_NAME
from nsyskit.analysis.compute.nccl import (  # noqa: F401  (their home moved to nccl.py)
    SIZE_BUCKETS,
    UNKNOWN_SIZE,
    nccl_operations,
    payload_sizes,
    size_bucket,
)
from nsyskit.analysis.compute.nvtxnames import (  # noqa: F401  (their home is nvtxnames.py)
    PER_CALL_SUFFIX,
    STEP_NAME,
    STEP_NUMBER,
    STEP_WORDS,
    group_text,
    group_texts,
    is_step_label,
    nvtx_labels,
)
from nsyskit.analysis.compute.projection import Projection
from nsyskit.analysis.compute.ranks import cross_rank, over_the_others, stragglers  # noqa: F401  (home: ranks.py)
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.records import Intervals, NvtxRanges, among, distinct, refactorize
from nsyskit.native import groups as native_groups

PROFILE_WINDOW = "profile_window"  # the example's capture range: steps outside it are warm-up
EXAMPLE_RANGES = ("step", "data", "forward", "backward", "optimizer", PROFILE_WINDOW)
MAX_INT64 = (1 << 63) - 1
MAX_COUNTING_GROUPS = np.iinfo(np.uint16).max  # more keys: one sort (numpy's radix argsort takes 16-bit groups)
STAT_COLUMNS = ("total_ns", "instances", "avg_ns", "median_ns", "min_ns", "max_ns", "stddev_ns")
BREAKDOWN_COLUMNS = (
    "device", "window_ns", "busy_ns", "compute_ns", "comm_ns", "memory_ns", "idle_ns",
    "compute_comm_overlap_ns", "compute_memory_overlap_ns", "comm_memory_overlap_ns", "exposed_comm_ns",
)  # fmt: skip


def duration_stats(keys: np.ndarray, durations: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per distinct key: total, instances, average, median, min, max and sample stddev of the durations (ns).

    Few distinct keys in a small range (kernel names): a counting sort groups them (groups.c, else numpy's radix
    argsort) and a selection per group finds the median, linear time. Otherwise one sort of (key, duration) packed
    into int64 (or a lexsort); then reduceat.
    """
    keys, durations = np.asarray(keys, dtype=np.int64), np.asarray(durations, dtype=np.int64)
    if len(keys) == 0:
        return np.empty(0, dtype=np.int64), {c: np.empty(0) for c in STAT_COLUMNS}
    key_low = int(keys.min())
    key_span = int(keys.max()) - key_low
    if key_span < max(1 << 20, len(keys)):
        offsets = keys - key_low
        grouped = native_groups.grouped(offsets, durations, key_span + 1)
        if grouped is not None:
            counts = np.diff(grouped[1])
            present = np.flatnonzero(counts)
            if len(present) <= MAX_COUNTING_GROUPS:
                return present + key_low, _group_stats(grouped[0], grouped[1][present], counts[present])
        else:
            counts = np.bincount(offsets)
            present = np.flatnonzero(counts)
            if len(present) <= MAX_COUNTING_GROUPS:
                return present + key_low, _group_stats(*_grouped(offsets, durations, present, counts[present]))
    return _sorted_stats(keys, durations, key_low, key_span)


def _grouped(offsets: np.ndarray, durations: np.ndarray, present: np.ndarray, counts: np.ndarray):
    """(durations grouped by offset, stably; each group's first index; counts): numpy's counting sort."""
    group_of = np.zeros(int(present[-1]) + 1, dtype=np.uint16)
    group_of[present] = np.arange(len(present), dtype=np.uint16)
    # A stable argsort of 16-bit integers is numpy's radix sort: O(n), unlike a comparison sort of 64-bit values.
    grouped = durations[np.argsort(group_of[offsets], kind="stable")]
    firsts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=firsts[1:])
    return grouped, firsts, counts


def _group_stats(grouped: np.ndarray, firsts: np.ndarray, counts: np.ndarray):
    """Statistics per group of a counting sort (group g: counts[g] values from firsts[g], in their first order);
    medians by selection, not sorting."""
    totals = np.add.reduceat(grouped, firsts)
    means = totals / counts
    deviation = grouped - np.repeat(means, counts)
    squares = np.add.reduceat(deviation * deviation, firsts)  # the values' order in each group is part of its sum
    chosen = native_groups.middles(grouped, firsts, counts)
    if chosen is None:
        chosen = np.empty((2, len(counts)), dtype=np.int64)
        for index, (first, count) in enumerate(zip(firsts.tolist(), counts.tolist(), strict=True)):
            middle = sorted({(count - 1) // 2, count // 2})
            found = np.partition(grouped[first : first + count], middle)[middle]
            chosen[:, index] = found[0], found[-1]
    return {
        "total_ns": totals, "instances": counts, "avg_ns": means, "median_ns": (chosen[0] + chosen[1]) / 2.0,
        "min_ns": np.minimum.reduceat(grouped, firsts), "max_ns": np.maximum.reduceat(grouped, firsts),
        "stddev_ns": np.where(counts > 1, np.sqrt(squares / np.maximum(counts - 1, 1)), 0.0),
    }  # fmt: skip


def _sorted_stats(keys: np.ndarray, durations: np.ndarray, key_low: int, key_span: int):
    """duration_stats by one sort: many distinct keys or keys spread over a wide range."""
    dur_low = int(durations.min())
    dur_bits = max(1, int(durations.max() - dur_low).bit_length())
    key_bits = max(1, key_span.bit_length())
    if dur_bits + key_bits <= 62:
        packed = np.sort(((keys - key_low) << dur_bits) | (durations - dur_low))
        skeys = (packed >> dur_bits) + key_low
        sdur = (packed & ((1 << dur_bits) - 1)) + dur_low
    else:
        order = np.lexsort((durations, keys))
        skeys, sdur = keys[order], durations[order]
    firsts = np.flatnonzero(np.r_[True, skeys[1:] != skeys[:-1]])
    lasts = np.r_[firsts[1:], len(skeys)] - 1
    counts = lasts - firsts + 1
    totals = np.add.reduceat(sdur, firsts)
    means = totals / counts
    deviation = sdur - np.repeat(means, counts)
    squares = np.add.reduceat(deviation * deviation, firsts)
    stddev = np.where(counts > 1, np.sqrt(squares / np.maximum(counts - 1, 1)), 0.0)
    median = (sdur[firsts + (counts - 1) // 2] + sdur[firsts + counts // 2]) / 2.0
    stats = {
        "total_ns": totals, "instances": counts, "avg_ns": means, "median_ns": median,
        "min_ns": sdur[firsts], "max_ns": sdur[lasts], "stddev_ns": stddev,
    }  # fmt: skip
    return skeys[firsts], stats


def kernel_summary(kernels: Intervals, names: Mapping[int, str]) -> Table:
    """nsys stats' kernel summary: per kernel name time %, total, instances, avg, median, min, max, stddev (ns)."""
    return summary_by_name(kernels.extra.get("name", np.empty(0, dtype=np.int64)), kernels.end - kernels.start, names)


def summary_by_name(name_ids: np.ndarray, durations: np.ndarray, names: Mapping[int, str]) -> Table:
    """Duration statistics per StringId, labelled with the names, in nsys stats' column order."""
    ids, stats = duration_stats(name_ids, durations)
    table = _summary_table([names.get(int(i), f"<string {int(i)}>") for i in ids], stats)
    columns = dict(table.columns)
    name = columns.pop("name")
    return Table({"name": name, "short_name": short_names(name), **columns})  # kernels: the short name beside


def _summary_table(labels: Sequence[str], stats: Mapping[str, np.ndarray]) -> Table:
    grand = float(np.sum(stats["total_ns"])) if len(labels) else 0.0
    pct = stats["total_ns"] * 100.0 / grand if grand else np.zeros(len(labels))
    table = Table(
        {"name": np.asarray(list(labels), dtype=object), "time_pct": np.asarray(pct, dtype=np.float64), **stats}
    )
    return table.sorted_by("total_ns") if len(table) else table


def nccl_name_ids(names: Mapping[int, str]) -> np.ndarray:
    """StringIds of kernel names that are NCCL kernels (communication)."""
    return np.asarray(sorted(i for i, n in names.items() if NCCL_NAME.search(n or "")), dtype=np.int64)


def gpu_breakdown(
    kernels: Intervals, nccl_ids: np.ndarray, memory: Sequence[Intervals], window: tuple[int, int] | None = None
) -> Table:
    """Per device: compute / communication (NCCL kernels) / memory (memcpy+memset) / idle time and their overlaps.

    Exact: each category is the union of its intervals on that device (streams overlap), intersections follow
    from |A∩B| = |A| + |B| - |A∪B|. The window is the span of the rank's GPU activity unless given.
    """
    mem_start = np.concatenate([m.start for m in memory]) if memory else np.empty(0, dtype=np.int64)
    mem_end = np.concatenate([m.end for m in memory]) if memory else np.empty(0, dtype=np.int64)
    mem_dev = np.concatenate([m.device for m in memory]) if memory else np.empty(0, dtype=np.int64)
    every_device = np.concatenate([kernels.device, mem_dev])
    one = len(every_device) and every_device.min() == every_device.max()  # one GPU per rank (the usual case)
    devices = every_device[:1] if one else distinct(every_device)
    if len(devices) == 0:
        return Table.empty(BREAKDOWN_COLUMNS + tuple(c.replace("_ns", "_pct") for c in BREAKDOWN_COLUMNS[2:]))
    if window is None:  # the span of the activity itself: nothing lies outside it, nothing to clip
        low = int(min(kernels.start.min(initial=np.iinfo(np.int64).max), mem_start.min(initial=np.iinfo(np.int64).max)))
        high = int(max(kernels.end.max(initial=0), mem_end.max(initial=0)))
    else:
        low, high = window
    # Each kernel's category bit (compute or communication) rides along: the kernel list is never split.
    kernel_kind = np.where(among(kernels.extra["name"], nccl_ids), np.uint8(sweep.COMM), np.uint8(sweep.COMPUTE))
    rows: dict[str, list] = {name: [] for name in BREAKDOWN_COLUMNS}
    for device in devices:
        lists = [(kernels.start, kernels.end, kernel_kind), *((m.start, m.end, sweep.MEMORY) for m in memory)]
        if len(devices) > 1:  # one GPU per rank is the usual case: no selection copies then
            lists = [(s[d == device], e[d == device], c if np.isscalar(c) else c[d == device])
                     for (s, e, c), d in zip(lists, [kernels.device, *(m.device for m in memory)], strict=True)]  # fmt: skip
        if window is not None:
            lists = [(np.clip(s, low, high), np.clip(e, low, high), c) for s, e, c in lists]
        union = sweep.union_lengths(lists)
        c, n, m = union[sweep.COMPUTE], union[sweep.COMM], union[sweep.MEMORY]
        cn, cm = union[sweep.COMPUTE | sweep.COMM], union[sweep.COMPUTE | sweep.MEMORY]
        nm, busy = union[sweep.COMM | sweep.MEMORY], union[sweep.COMPUTE | sweep.COMM | sweep.MEMORY]
        values = {
            "device": int(device), "window_ns": high - low, "busy_ns": busy, "compute_ns": c, "comm_ns": n, "memory_ns": m,
            "idle_ns": (high - low) - busy, "compute_comm_overlap_ns": c + n - cn, "compute_memory_overlap_ns": c + m - cm,
            "comm_memory_overlap_ns": n + m - nm, "exposed_comm_ns": cn - c,
        }  # fmt: skip
        for name, value in values.items():
            rows[name].append(value)
    table = {name: np.asarray(values, dtype=np.int64) for name, values in rows.items()}
    span = np.maximum(table["window_ns"], 1)
    for name in BREAKDOWN_COLUMNS[2:]:
        table[name.replace("_ns", "_pct")] = table[name] * 100.0 / span
    return Table(table)


def memcpy_by_kind(memcpys: Intervals, kind_names: Mapping[int, str]) -> Table:
    """Per copy kind (HtoD, DtoH, DtoD, PtoP, ...): count, bytes, time, bandwidth (GB/s = bytes/ns), and the pageable
    copies' own count, bytes and time (pinned ones are not theirs to answer for)."""
    kinds = memcpys.extra.get("kind", np.empty(0, dtype=np.int64))
    if len(kinds) == 0:
        return Table.empty(("kind", "count", "bytes", "total_ns", "avg_bytes", "bandwidth_gbps", "pageable_count",
                            "pageable_bytes", "pageable_ns"))  # fmt: skip
    unique, inverse = np.unique(kinds, return_inverse=True)
    count = np.bincount(inverse)
    total_bytes = np.bincount(inverse, weights=memcpys.extra["bytes"])
    total_ns = np.bincount(inverse, weights=memcpys.end - memcpys.start)
    pageable = memcpys.extra.get("pageable", 0 * kinds).astype(bool)
    table = Table(
        {
            "kind": np.asarray([kind_names.get(int(k), f"kind {int(k)}") for k in unique], dtype=object),
            "count": count.astype(np.int64),
            "bytes": total_bytes.astype(np.int64),
            "total_ns": total_ns.astype(np.int64),
            "avg_bytes": total_bytes / count,
            "bandwidth_gbps": np.where(total_ns > 0, total_bytes / np.maximum(total_ns, 1), np.nan),
            "pageable_count": np.bincount(inverse, weights=pageable).astype(np.int64),
            "pageable_bytes": np.bincount(inverse[pageable], weights=memcpys.extra["bytes"][pageable],
                                          minlength=len(unique)).astype(np.int64),
            "pageable_ns": np.bincount(inverse[pageable], weights=(memcpys.end - memcpys.start)[pageable],
                                       minlength=len(unique)).astype(np.int64),
        }
    )
    return table.sorted_by("bytes")


def nvtx_summary(nvtx: NvtxRanges, labels: tuple[list[str], np.ndarray] | None = None) -> Table:
    """nsys stats' NVTX range summary per label (see nvtx_labels): instances and duration statistics."""
    if len(nvtx) == 0:
        return _summary_table([], {c: np.empty(0) for c in STAT_COLUMNS})
    unique, inverse = nvtx_labels(nvtx) if labels is None else labels
    ids, stats = duration_stats(inverse, nvtx.end - nvtx.start)
    return _summary_table([str(unique[i]) for i in ids], stats)


def step_times(
    nvtx: NvtxRanges, pattern: re.Pattern[str] = STEP_NAME, skipped: list[str] | None = None,
    grouped: tuple[list[str], np.ndarray] | None = None,
) -> Table:  # fmt: skip
    """The training steps inside the profiled window: one row per NVTX range named like 'step N' (step, start, duration).

    When the rank has `profile_window` ranges (the example's capture range), only steps inside one count: warm-up
    steps outside it are left out. Step numbers beyond int64 are not steps (their names go to `skipped`).
    `grouped`: the texts without their per-call parts (group_texts), when known.
    """
    unique, codes = nvtx.texts
    numbers = np.full(len(unique), -1, dtype=np.int64)
    candidates = range(len(unique))
    if grouped is not None and pattern is STEP_NAME:
        # A text STEP_NAME matches holds no comma, so no per-call part: its group is itself or, its number written N,
        # a step label. Only the texts of such groups are tried (a few hundred groups, not tens of thousands of texts).
        matching = [index for index, text in enumerate(grouped[0]) if is_step_label(text)]
        candidates = np.flatnonzero(np.isin(grouped[1], matching)).tolist()
    for index in candidates:
        text = unique[index]
        match = pattern.match(text)
        if match:
            if int(match.group(1)) > MAX_INT64:
                if skipped is not None:
                    skipped.append(text)
                continue
            numbers[index] = int(match.group(1))
    step = numbers[codes] if len(codes) else np.empty(0, dtype=np.int64)
    keep = step >= 0
    windows = codes == (unique.index(PROFILE_WINDOW) if PROFILE_WINDOW in unique else -1)
    if windows.any():
        inside = np.zeros(len(codes), dtype=bool)
        for low, high in zip(nvtx.start[windows], nvtx.end[windows], strict=True):
            inside |= (nvtx.start >= low) & (nvtx.end <= high)
        keep &= inside
    order = np.argsort(nvtx.start[keep], kind="stable")
    return Table(
        {
            "step": step[keep][order],
            "start_ns": nvtx.start[keep][order],
            "duration_ns": (nvtx.end - nvtx.start)[keep][order],
        }
    )


def nvtx_gpu_summary(
    labels: tuple[list[str], np.ndarray], nvtx: NvtxRanges, projection: Projection, top: int = 15
) -> Table:
    """Per NVTX label: CPU time and the GPU time its ranges project onto the GPU (nvtx_gpu_proj_sum's numbers).

    Rows: the example's ranges (step, forward, backward, optimizer, ...) and the `top` other labels by CPU time.
    'step N' ranges count as one label 'step'.
    """
    columns = ("name", "instances", "cpu_total_ns", "gpu_proj_total_ns", "gpu_proj_avg_ns", "kernels", "kernel_sum_ns")
    if len(nvtx) == 0:
        return Table({c: np.empty(0, dtype=object if c == "name" else np.int64) for c in columns})
    names, codes = labels
    # 'step N' ranges: one label
    unique_list, inverse = refactorize(["step" if is_step_label(name) else name for name in names], codes)
    unique = np.asarray(unique_list, dtype=object)
    count = np.bincount(inverse, minlength=len(unique))
    cpu = np.bincount(inverse, weights=nvtx.end - nvtx.start, minlength=len(unique))
    gpu = np.bincount(inverse, weights=projection.span_ns, minlength=len(unique))
    kernels = np.bincount(inverse, weights=projection.kernels, minlength=len(unique))
    ksum = np.bincount(inverse, weights=projection.kernel_ns, minlength=len(unique))
    example = np.isin(unique, EXAMPLE_RANGES)
    others = np.flatnonzero(~example)
    chosen = np.r_[np.flatnonzero(example), others[np.argsort(-cpu[others], kind="stable")][:top]]
    table = Table(
        {
            "name": unique[chosen].astype(object), "instances": count[chosen].astype(np.int64),
            "cpu_total_ns": cpu[chosen].astype(np.int64), "gpu_proj_total_ns": gpu[chosen].astype(np.int64),
            "gpu_proj_avg_ns": gpu[chosen] / np.maximum(count[chosen], 1), "kernels": kernels[chosen].astype(np.int64),
            "kernel_sum_ns": ksum[chosen].astype(np.int64),
        }
    )  # fmt: skip
    return table
