"""nccl-tests (and rccl-tests) outputs as people have them: every column layout, launcher prefixes, cut rows.

API (what `invoke nccl-tests` and `invoke analyze --fabric` use):

- `measured_tests(paths) -> list[NcclTest]`: the tests in files, globs or run folders (a folder: every text file
  under it that holds a table). Raises `NoNcclTestsTable` (one line naming the file) for a file named one by one
  that holds no table, and where nothing holds one (a folder's failed outputs beside good ones do not raise).
  A test has `op` (nccl-tests' name: all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce,
  sendrecv; None where the output never names its binary), `rows` (each: `size` in bytes as nccl-tests
  prints it, `count`, `type`, `redop`, `root`, `out_of_place` and `in_place` with `time_us`, `algbw`, `busbw`
  in GB/s = 1e9 B/s, and `wrong`), `avg_busbw`, `failures` and `warnings` (each names file:line).
- `ceiling_from(paths) -> Ceiling`, or `Ceiling(tests)`: `ceiling.ops` (the ops measured), `ceiling.has(op)`,
  and `ceiling.busbw_at(op, size_bytes) -> float`: out-of-place busbw interpolated linearly in log(size)
  between the nearest measured sizes (the end's value outside them; the best run where several measured the
  same size). `op` may be nccl-tests' name, the binary's (`all_reduce_perf`) or NCCL's (`AllReduce`,
  `AllGather`, `ReduceScatter`, `AllToAll`, `Broadcast`, `Reduce`, `SendRecv`); an op without a test raises
  KeyError. `size_bytes` follows nccl-tests' size column: for all_gather, reduce_scatter and alltoall the
  whole buffer (n x the per-rank chunk).
- `canonical_op(name)`: that mapping of names.
- `read_paths(arguments) -> Reading` (files with tests, files without a table) and `read_file(path)`.
- `nccl_tests_report(arguments, diff, plot) -> Outcome`: the whole 'invoke nccl-tests' (reading, --diff, the
  plot, the error to exit with); `print_tests` and `print_diff` show it.
"""

from __future__ import annotations

from pathlib import Path

from nsyskit.errors import NcclTestsError
from nsyskit.nccltests.ceiling import Ceiling
from nsyskit.nccltests.model import OPS, FileResult, NcclTest, Placement, Problem, Row, canonical_op
from nsyskit.nccltests.reading import Reading, no_table_error, read_file, read_paths
from nsyskit.nccltests.render import print_diff, print_tests
from nsyskit.nccltests.report import Outcome, check_plot_target, nccl_tests_report

__all__ = [
    "OPS",
    "Ceiling",
    "Outcome",
    "FileResult",
    "NcclTest",
    "Placement",
    "Problem",
    "Reading",
    "Row",
    "canonical_op",
    "check_plot_target",
    "ceiling_from",
    "measured_tests",
    "nccl_tests_report",
    "no_table_error",
    "print_diff",
    "print_tests",
    "read_file",
    "read_paths",
]


def measured_tests(paths: list[str | Path]) -> list[NcclTest]:
    """The tests in PATHS (files, globs, run folders). NoNcclTestsTable names the first file named one by one that
    holds no table, or the first failed output of a folder where none holds a table; a folder's failed outputs
    beside good ones stay in read_paths' answer (each test also keeps its own failures)."""
    reading = read_paths([str(p) for p in paths])
    named = [result for result in reading.without_table if result.path in reading.named]
    if named or (reading.without_table and not reading.tests):
        raise no_table_error((named or reading.without_table)[0])
    return reading.tests


def ceiling_from(paths: list[str | Path]) -> Ceiling:
    """The measured ceiling (out-of-place busbw per op and size) of the nccl-tests outputs in PATHS; NcclTestsError
    when every test in them ran on one rank (no link crossed: nothing to compare a run's collectives with)."""
    ceiling = Ceiling(measured_tests(paths))
    if not ceiling.points and ceiling.one_rank:
        raise NcclTestsError(
            ceiling.one_rank[0], f"every nccl-tests table given ({len(ceiling.one_rank)}) ran on one rank, where no "
            "link is crossed (busbw 0 for AllReduce, a local copy for the others): no fabric ceiling to compare with",
            "run the NCCL tests on the nodes of the training run with 2 or more ranks (WORKLOAD=nccl-tests, "
            "PROCS_PER_NODE=GPUS_PER_NODE) and give that output to --fabric",
        )  # fmt: skip
    return ceiling
