"""The run's bus bandwidth against message size: per collective, exact size and communicator size, the median busbw
of its operations (report.html's plot, the shape nccl-tests' own curves have)."""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute.ncclbandwidth import WorldSize, bandwidths, communicator_sizes, quantiles, size_factor
from nsyskit.analysis.compute.nccldigest import NcclRollup
from nsyskit.analysis.compute.table import Table


def busbw_by_size(total: NcclRollup) -> Table:
    """Per collective, nccl-tests size (bytes) and communicator size n: the count and median busbw (GB/s) of the
    operations timed on the GPU, every origin together; sizes ascending (the bandwidth-against-size plot's lines)."""
    world = total.world or WorldSize(max(1, len(total.by_rank)), "rank reports")
    found: dict[tuple[str, float, int], list[np.ndarray]] = {}
    for part in total.digests:
        sizes, gpu = part.kinds["size_bytes"], part.kinds["gpu"] == 1
        for op, values, codes in zip(part.groups["op"], part.group_durations(), part.group_kinds(), strict=True):
            n_kind, _sources = communicator_sizes(part.kinds, str(op), world, total.logged)
            for kind in np.flatnonzero(np.bincount(codes, minlength=len(sizes))).tolist():
                if not gpu[kind] or np.isnan(sizes[kind]):
                    continue
                timed = values[(codes == kind) & (values > 0)]
                _alg, bus = bandwidths(str(op), int(n_kind[kind]), np.full(len(timed), sizes[kind]), timed)
                nccl_tests_size = float(sizes[kind]) * size_factor(str(op), int(n_kind[kind]))
                found.setdefault((str(op), nccl_tests_size, int(n_kind[kind])), []).append(bus)
    keys = sorted(k for k in found if sum(map(len, found[k])))
    return Table({
        "op": np.asarray([k[0] for k in keys], dtype=object), "size_bytes": np.asarray([k[1] for k in keys], dtype=np.float64),
        "nranks": np.asarray([k[2] for k in keys], dtype=np.int64),
        "count": np.asarray([sum(map(len, found[k])) for k in keys], dtype=np.int64),
        "busbw_median_gbps": np.asarray([quantiles(found[k])[1] for k in keys], dtype=np.float64),
    })  # fmt: skip
