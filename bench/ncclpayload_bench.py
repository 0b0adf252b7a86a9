"""Benchmark what decoding NCCL's payload blobs (binaryData, issue 39) adds to the map of one rank.

Two copies of one realistic rank (bench/realistic_export.py, every kernel an NCCL launch: N NCCL-domain ranges, each
around its kernel, and PyTorch's nccl:<op> range around that): one states each message size as a scalar payload
(uint64Value, no decoding), the other as the NCCL 2.28 payload blob `nsys export --include-blobs=true` writes (the
32-byte header, communicator, size, reduction op) with the schema tables. Each row: the median of --repeat maps
(analyze-part's map_reports, in this process, the two alternating so the machine's load weighs on both). Goal: the
blobs add at most 10% to the map. The two maps' collectives tables must be the same (checked, printed).

Usage: .venv/bin/python bench/ncclpayload_bench.py [--ranges 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "unit" / "analysis"), str(ROOT / "bench")]

import realistic_export  # noqa: E402
from counters_bench import side_by_side  # noqa: E402  (bench/ is the script's folder: on sys.path)
from nccl_payloads import LAYOUTS, SCHEMA_BASE, schemas  # noqa: E402

GOAL_PCT = 10.0
COMM = 0xF00DFACE12345678


def make_ranks(folder: Path, ranges: int) -> tuple[Path, Path]:
    """(the rank with scalar payloads, the same rank with payload blobs): `ranges` NCCL ranges each."""
    import sqlite3

    realistic_export.NCCL_EVERY = 1  # every kernel an NCCL launch: one NCCL range (one blob) per kernel
    (folder / "scalar").mkdir()
    scalar = realistic_export.make_realistic_rank(folder / "scalar" / "rank_0.sqlite", ranges)
    (folder / "blobs").mkdir()
    blobs = shutil.copy(scalar, folder / "blobs" / "rank_0.sqlite")
    con = sqlite3.connect(blobs)
    layout = LAYOUTS["2.28"]

    def payload(text: str, size: int) -> bytes:
        schema, length, _entries = layout[text]
        body = struct.pack("<QQ", COMM, size) + bytes(length - 16)
        return struct.pack("<QQQQ", 1, SCHEMA_BASE + schema, length, 0) + body

    con.create_function("payload_blob", 2, payload, deterministic=True)
    con.execute("UPDATE NVTX_EVENTS SET binaryData = CAST(payload_blob(text, uint64Value) AS TEXT), uint64Value = NULL "
                "WHERE domainId = 1 AND eventType = 59")  # fmt: skip
    from nsys_fixtures import PAYLOAD_SCHEMA_DDL

    for ddl in PAYLOAD_SCHEMA_DDL:
        con.execute(ddl)
    for schema, (size, entries) in schemas("2.28").items():
        con.execute("INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (1, ?, NULL, 1, NULL, ?, ?, NULL)", (schema, len(entries), size))
        con.executemany("INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (1, ?, ?, NULL, ?, ?, NULL, NULL, ?)",
                        [(schema, i, kind, name, offset) for i, (kind, name, offset) in enumerate(entries)])  # fmt: skip
    con.commit()
    con.close()
    return scalar, Path(blobs)


def timed_map(rank: Path, out: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of every thread) of one map of the rank's folder into `out`."""
    from nsyskit.analysis.mapreduce.parts import map_reports

    shutil.rmtree(out, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    map_reports([rank.parent], out)
    return time.perf_counter() - start, time.process_time() - cpu


def sizes_table(out: Path) -> str:
    """The merged collectives table of a map's part, as text (the two forms must give the same)."""
    from nsyskit.analysis.mapreduce.parts import merge_parts

    return str(list(merge_parts(out)[0].nccl_sizes.rows()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranges", type=int, default=1_000_000, help="NCCL ranges (payload blobs) of the rank")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        scalar, blobs = make_ranks(folder, args.ranges)
        timed_map(scalar, folder / "out-scalar")  # warm-up: the files in the page cache, the helpers built
        timed_map(blobs, folder / "out-blobs")
        same = sizes_table(folder / "out-scalar") == sizes_table(folder / "out-blobs")
        plain, decoded = [], []
        for _ in range(args.repeat):
            plain.append(timed_map(scalar, folder / "out-scalar"))
            decoded.append(timed_map(blobs, folder / "out-blobs"))
        print(f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat} maps, seconds; one rank, "
              f"{args.ranges:,} NCCL ranges")  # fmt: skip
        side_by_side(("map, sizes as scalar payloads (uint64Value)", plain),
                     ("map, sizes as payload blobs (binaryData)", decoded), "blobs add", GOAL_PCT, width=48)  # fmt: skip
        print(f"same collectives table from both: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
