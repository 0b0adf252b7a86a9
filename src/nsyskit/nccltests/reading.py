"""Reading FILE|RUN arguments into per-file results, and the one line for a file that holds no table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.errors import NoNcclTestsTable
from nsyskit.nccltests.inputs import read_bytes, resolve
from nsyskit.nccltests.model import FileResult, NcclTest
from nsyskit.nccltests.naming import name_tests
from nsyskit.nccltests.table import read_buffer


@dataclass
class Reading:
    """What a set of arguments gave: the files with tests, in argument order, and those without any table."""

    files: list[FileResult] = field(default_factory=list)
    without_table: list[FileResult] = field(default_factory=list)
    named: set[str] = field(default_factory=set)  # the files named one by one (not found in a folder)

    @property
    def tests(self) -> list[NcclTest]:
        """Every test of every file, in file order."""
        return [test for result in self.files for test in result.tests]


def read_file(path: Path) -> FileResult:
    """One file's tests, failures and warnings (a test its output never names: after the file, else its rows)."""
    result = read_buffer(read_bytes(path), str(path))
    name_tests(result.tests, path)
    return result


def no_table_error(result: FileResult) -> NoNcclTestsTable:
    """The one line for a file with no table: what it holds instead (a failure, a stray average line)."""
    failures = result.all_failures()
    if failures:
        first = failures[0]
        problem = f"no nccl-tests table: the run failed at line {first.line}: {first.message}"
        fix = "act on that failure and run the test again"
    elif result.stray_avg:
        line, value = result.stray_avg[0]
        problem = (f"no nccl-tests table: an 'Avg bus bandwidth' line ({value:g} GB/s, line {line}) without the "
                   "table above it (the output was cut)")  # fmt: skip
        fix = "give the whole output of the test (its column header and rows)"
    elif result.empty_headers:
        problem = (f"no nccl-tests table: the column header at line {result.empty_headers[0]} has no row under it "
                   "(the output was cut)")  # fmt: skip
        fix = "give the whole output of the test (its rows and the 'Avg bus bandwidth' line)"
    else:
        problem = "no nccl-tests table (no column header or row of size, count, type, time, algbw, busbw)"
        fix = "give the output of a nccl-tests binary (e.g. all_reduce_perf), or the run folder that holds it"
    return NoNcclTestsTable(result.path, problem, fix)


def _fingerprint(test: NcclTest) -> tuple:
    """What makes two tables the same measurement: every row's size and both busbw, and the average."""
    return (test.avg_busbw, tuple((r.size, r.out_of_place.busbw, r.in_place and r.in_place.busbw) for r in test.rows))


def _workload_outputs_first(path: Path) -> tuple[int, str]:
    """Folder files in reading order: the workload's own outputs (under nccl-tests/) before logs that echo them."""
    return (0 if "nccl-tests" in path.parts[:-1] else 1, str(path))


def read_paths(arguments: list[str]) -> Reading:
    """Read every file the arguments name; in run folders, only the files that hold a table or a failure, and each
    table once (a launcher's log repeats rank 0's output that the workload also keeps as nccl-tests/NAME.out)."""
    named, in_folders = resolve(arguments)
    reading = Reading(named={str(path) for path in named})
    for path in named:
        result = read_file(path)
        (reading.files if result.tests else reading.without_table).append(result)
    seen = {_fingerprint(test) for test in reading.tests}
    for path in sorted(in_folders, key=_workload_outputs_first):
        result = read_file(path)
        repeated = [test for test in result.tests if _fingerprint(test) in seen]
        result.tests = [test for test in result.tests if test not in repeated]
        seen |= {_fingerprint(test) for test in result.tests}
        if result.tests:
            reading.files.append(result)
        elif result.all_failures() and not repeated:
            reading.without_table.append(result)
    if not named and not reading.files and not reading.without_table:
        folders = ", ".join(str(a) for a in arguments)
        raise NoNcclTestsTable(folders, "no file in it holds a nccl-tests table",
                               "give the run folder of a nccl-tests workload, or the output file itself")  # fmt: skip
    return reading
