"""The run's bus bandwidth against message size: per collective, exact size and communicator size, the median busbw
of its operations (report.html's plot, the shape nccl-tests' own curves have)."""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute import ncclfold
from nsyskit.analysis.compute.ncclbandwidth import WorldSize, bandwidths, size_factor
from nsyskit.analysis.compute.nccldigest import NcclRollup
from nsyskit.analysis.compute.table import Table


def busbw_by_size(total: NcclRollup) -> Table:
    """Per collective, nccl-tests size (bytes) and communicator size n: the count and median busbw (GB/s) of the
    operations timed on the GPU, every origin together; sizes ascending (the bandwidth-against-size plot's lines)."""
    world = total.world or WorldSize(max(1, len(total.by_rank)), "rank reports")
    folded = total.folded()
    cells = folded.cells
    found: dict[tuple[str, float, int], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    sizes_of: dict[str, np.ndarray] = {}
    for cell, (op, size, gpu) in enumerate(zip(cells["op"].tolist(), cells["size_bytes"].tolist(),
                                               cells["gpu"].tolist(), strict=True)):  # fmt: skip
        if gpu != 1 or size != size:  # a bandwidth needs a known size and the GPU's time
            continue
        if op not in sizes_of:
            sizes_of[op] = folded.sizes(op, world, total.logged)[0]
        n = int(sizes_of[op][cell])
        values, counts = folded.of([cell])
        timed = values > 0
        _alg, bus = bandwidths(op, n, np.full(int(timed.sum()), size), values[timed])
        speeds, weights = found.setdefault((op, size * size_factor(op, n), n), ([], []))
        speeds.append(bus)
        weights.append(counts[timed])
    joined = {key: (np.concatenate(speeds), np.concatenate(weights)) for key, (speeds, weights) in found.items()}
    keys = sorted(key for key, (_speeds, weights) in joined.items() if weights.sum())
    return Table({
        "op": np.asarray([k[0] for k in keys], dtype=object), "size_bytes": np.asarray([k[1] for k in keys], dtype=np.float64),
        "nranks": np.asarray([k[2] for k in keys], dtype=np.int64),
        "count": np.asarray([int(joined[k][1].sum()) for k in keys], dtype=np.int64),
        "busbw_median_gbps": np.asarray([ncclfold.quantiles(*joined[k], [0.5])[0] for k in keys], dtype=np.float64),
    })  # fmt: skip
