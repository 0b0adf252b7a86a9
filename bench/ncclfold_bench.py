"""The NCCL durations fold on ranks whose durations differ, as real ranks' do: time and peak memory per rank count.

bench/mapreduce_bench.py merges byte copies of one part, so every rank brings the same durations and the fold's
distinct values stay those of one rank. Real ranks jitter: the distinct values grow with the ranks until each
operation's range of integer nanoseconds fills. This bench builds synthetic ranks' digests (80k operations in 100
cells: 10 groups of 10 kinds, durations log-uniform 10 us-10 ms per cell with 5% normal jitter, uint32 and ordered as
nccldigest orders a rank's), folds them with DurationFold.add_digest, each count in a fresh process, and prints the
fold's time (the ranks' generation taken out), its peak memory and the time per rank against the first count's.

    .venv/bin/python bench/ncclfold_bench.py --ranks 1024 4096
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

OPERATIONS, GROUPS, KINDS = 80_000, 10, 10
CELLS = GROUPS * KINDS


def digests_of(count: int, seed: int = 0):
    """`count` ranks' NCCL digests (nccldigest.NcclDigest), each with its durations ordered as the digest orders them."""
    from nsyskit.analysis.compute.nccldigest import NcclDigest, _code_dtype, _kinds, _sorted_in_groups
    from nsyskit.analysis.compute.table import Table

    rng = np.random.default_rng(seed)
    base = np.exp(rng.uniform(np.log(1e4), np.log(1e7), CELLS)).astype(np.int64)
    share = rng.dirichlet(np.full(CELLS, 0.5))
    kinds = _kinds([float(1 << (10 + 2 * k)) for k in range(KINDS)], [8] * KINDS, [1] * KINDS)
    for _ in range(count):
        cell = rng.choice(CELLS, OPERATIONS, p=share)
        durations = np.maximum(base[cell] + (rng.standard_normal(OPERATIONS) * base[cell] * 0.05).astype(np.int64), 1)
        group, kind = cell // KINDS, cell % KINDS
        ordered, codes = _sorted_in_groups(group, durations, kind)
        groups = Table({"op": np.asarray([f"op{g}" for g in range(GROUPS)], dtype=object),
                        "origin": np.full(GROUPS, "nccl-nvtx", dtype=object), "bucket": np.full(GROUPS, ">16MB", dtype=object),
                        "count": np.bincount(group, minlength=GROUPS)})  # fmt: skip
        yield NcclDigest(groups, ordered.astype(np.uint32), {}, kinds, codes.astype(_code_dtype(KINDS)))


def one(count: int) -> dict:
    """Fold `count` ranks here: the fold's seconds (generation excluded), distinct values, peak memory."""
    from nsyskit.analysis.compute.ncclfold import DurationFold

    fold, folding = DurationFold(), 0.0
    for digest in digests_of(count):
        started = time.perf_counter()
        fold.add_digest(digest)
        folding += time.perf_counter() - started
    started = time.perf_counter()
    _table, cell, _durations, _counts = fold.cells()
    folding += time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ranks": count, "fold_s": folding, "distinct": len(cell), "peak_mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096], help="rank counts, the first the baseline")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a fresh process's single count
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    rows = []
    for count in args.ranks:
        done = subprocess.run([sys.executable, __file__, "--one", str(count)], capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout))
    base = rows[0]["fold_s"] / rows[0]["ranks"]
    print(f"{'ranks':>7} {'fold':>8} {'ms a rank':>10} {'distinct values':>16} {'peak':>9} {'per rank vs ' + str(rows[0]['ranks']):>18}")
    for row in rows:
        ratio = row["fold_s"] / row["ranks"] / base
        print(f"{row['ranks']:>7,} {row['fold_s']:>7.1f}s {row['fold_s'] / row['ranks'] * 1e3:>10.2f} {row['distinct']:>16,} "
              f"{row['peak_mb']:>6,.0f} MB {ratio:>17.2f}x")


if __name__ == "__main__":
    main()
