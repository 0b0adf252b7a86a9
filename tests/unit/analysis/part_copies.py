"""Many ranks from one part: copies of a mapped part under rank names, each its own rank (the merge at scale)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from nsyskit.analysis.mapreduce.partfile import listing_member, write_npz


def copy_part(part: Path, count: int, folder: Path, ranks: range | None = None) -> list[Path]:
    """`count` parts in `folder` under rank names (rank_N.sqlite, in a run of `count` reports), each `part` with its
    own rank and report in the header and its tables' rank columns; only `ranks` of them written when given (the
    others' parts missing). The parts written."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with np.load(part) as data:
        arrays = dict(data)
    header = json.loads(str(arrays["header"]))
    reports = [str(folder.parent / "run" / f"rank_{rank}.sqlite") for rank in range(count)]
    header["listing"], arrays["listing"] = listing_member({"reports": reports, "ranks": list(range(count)),
                                                           "named": [True] * count})  # fmt: skip
    plain = json.loads(str(arrays["results"]))
    written = []
    for rank in ranks if ranks is not None else range(count):
        report = reports[rank]
        arrays["header"] = np.asarray(json.dumps({**header, "report": report, "rank": rank}))
        plain[0]["rank"] = plain[0]["summary"]["rank"] = rank
        arrays["results"] = np.asarray(json.dumps(plain))
        columns = arrays["columns"].copy()  # each table's rank column, rewritten where the part packed it
        for table in plain[0]["tables"].values():
            if "array" in table.get("rank", {}):
                dtype, shape, offset = table["rank"]["array"]
                columns[offset : offset + np.dtype(dtype).itemsize * int(np.prod(shape))] = np.full(
                    shape, rank, dtype=dtype).view(np.uint8).ravel()  # fmt: skip
        arrays["columns"] = columns
        written.append(folder / f"rank_{rank}.sqlite.part.npz")
        with open(written[-1], "wb") as out:  # compressed as the map writes it: the merge reads what a cluster gives
            write_npz(out, arrays)
    return written
