"""The measured ceiling that 'analyze --fabric' puts beside a run's collectives: out-of-place busbw per op,
interpolated on log(size), under every name an op goes by."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from nsyskit.errors import NcclTestsError, NoNcclTestsTable
from nsyskit.nccltests import Ceiling, canonical_op, ceiling_from, measured_tests, read_file
from tests.fixtures.realdata import REAL_DATA, ROOT, need
from tests.unit.nccl_tests_variants import Output, measurements, write_test


@pytest.mark.parametrize(
    ("name", "op"),
    [("all_reduce_perf", "all_reduce"), ("all_reduce_perf_mpi", "all_reduce"), ("AllReduce", "all_reduce"),
     ("AllGather", "all_gather"), ("ReduceScatter", "reduce_scatter"), ("AllToAll", "alltoall"),
     ("Broadcast", "broadcast"), ("Reduce", "reduce"), ("SendRecv", "sendrecv"), ("alltoall_perf", "alltoall"),
     ("reduce_scatter", "reduce_scatter"), ("./build/sendrecv_perf", "sendrecv"), ("hypercube_perf", "hypercube"),
     ("ofi_hook_perf", None), ("", None)],
)  # fmt: skip
def test_op_names_map_to_nccl_tests_names(name, op):
    assert canonical_op(name) == op


def _tests(tmp_path, *specs):
    output = Output()
    for spec in specs:
        write_test(output, **spec)
    path = tmp_path / "out.log"
    path.write_text(output.text())
    return measured_tests([path])


def test_measured_sizes_give_their_own_busbw_and_between_them_the_log_interpolation(tmp_path):
    rows = measurements("all_reduce", start=1024, sizes=8)
    ceiling = Ceiling(_tests(tmp_path, {"rows": rows}))
    assert ceiling.ops == ("all_reduce",)
    for row in rows:
        assert ceiling.busbw_at("AllReduce", row.size) == float(row.out[2])
    low, high = rows[4], rows[5]  # sizes 16 KiB and 32 KiB: the geometric middle is halfway in log size
    middle = math.sqrt(low.size * high.size)
    assert ceiling.busbw_at("all_reduce", middle) == pytest.approx((float(low.out[2]) + float(high.out[2])) / 2)
    quarter = low.size * 2**0.25
    expected = float(low.out[2]) + 0.25 * (float(high.out[2]) - float(low.out[2]))
    assert ceiling.busbw_at("all_reduce_perf", quarter) == pytest.approx(expected)


def test_outside_the_measured_sizes_the_nearest_end_counts(tmp_path):
    rows = measurements("all_gather", start=4096, sizes=6)
    ceiling = Ceiling(_tests(tmp_path, {"op": "all_gather", "rows": rows}))
    assert ceiling.busbw_at("AllGather", 1) == float(rows[0].out[2])
    assert ceiling.busbw_at("AllGather", 1 << 40) == float(rows[-1].out[2])


def test_an_op_without_a_test_raises_naming_the_ops_there_are(tmp_path):
    ceiling = Ceiling(_tests(tmp_path, {"op": "all_reduce"}, {"op": "sendrecv"}))
    assert ceiling.has("SendRecv") and ceiling.has("all_reduce") and not ceiling.has("AllGather")
    with pytest.raises(KeyError, match="measured: all_reduce, sendrecv"):
        ceiling.busbw_at("AllGather", 1 << 20)


def test_the_best_of_several_runs_is_the_ceiling_and_in_place_never_counts(tmp_path):
    slow = measurements("all_reduce", start=1 << 20, sizes=3)

    def scaled(row, out: float, inplace: float):
        return type(row)(row.size, row.count, (*row.out[:2], f"{float(row.out[2]) * out:.2f}", "0"),
                         (*row.inplace[:2], f"{float(row.out[2]) * inplace:.2f}", "0"))  # fmt: skip

    fast = [scaled(r, 1.5, 1.0) for r in slow]
    slow = [scaled(r, 1.0, 3.0) for r in slow]  # in-place faster than any out-of-place: must not count
    ceiling = Ceiling(_tests(tmp_path, {"rows": slow}, {"rows": fast, "average": "1.0"}))
    assert [ceiling.busbw_at("all_reduce", r.size) for r in slow] == [float(r.out[2]) for r in fast]


def test_size_zero_rows_are_left_out(tmp_path):
    rows = measurements("alltoall", start=0, sizes=1) + measurements("alltoall", start=64, sizes=4)
    ceiling = Ceiling(_tests(tmp_path, {"op": "alltoall", "rows": rows}))
    assert [size for size, _ in ceiling.points["alltoall"]] == [64, 128, 256, 512]


def test_ceiling_of_a_real_multi_test_file():
    path = need(REAL_DATA / "nccl-tests" / "xxrjun_nccl-tests-cluster_multinode-N10-G8.log")
    ceiling = ceiling_from([path])
    assert ceiling.ops == ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
    row = next(line for line in path.read_text().splitlines() if line.split()[:1] == ["33554432"])
    assert ceiling.busbw_at("AllReduce", 33554432) == float(row.split()[7])


def test_paths_without_a_table_raise_one_line_naming_the_file(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("nothing here\n")
    with pytest.raises(NoNcclTestsTable, match=f"^{path}: no nccl-tests table"):
        ceiling_from([path])


def test_a_run_folder_with_one_failed_test_still_gives_the_others(tmp_path):
    """In a nccl-tests run folder, one test that failed before its table does not hide the ones that ran."""
    folder = tmp_path / "run" / "nccl-tests"
    folder.mkdir(parents=True)
    output = Output()
    write_test(output, "all_reduce")
    (folder / "all_reduce_perf.out").write_text(output.text())
    (folder / "alltoall_perf.out").write_text("node-a: Test NCCL failure common.cu:1279 'remote process exited'\n")
    assert [t.op for t in measured_tests([tmp_path / "run"])] == ["all_reduce"]
    with pytest.raises(NoNcclTestsTable, match="alltoall_perf.out: no nccl-tests table: the run failed at line 1"):
        measured_tests([folder / "all_reduce_perf.out", folder / "alltoall_perf.out"])


KIT_ONE_GPU = ROOT / "tests" / "data" / "real" / "nccl-tests" / "h200_all_reduce_perf_v2.13.11_1gpu.out"


def test_a_real_one_gpu_run_is_told_by_its_one_rank_line_and_by_its_numbers_alone(tmp_path):
    # One H200: busbw 0.00 at every size (2(n-1)/n = 0), algbw up to 2,119 GB/s (the GPU's own copy)
    (test,) = measured_tests([KIT_ONE_GPU])
    assert test.ranks == 1 and test.crosses_no_link
    unnamed = tmp_path / "all_reduce_perf.out"  # the same output with its '#  Rank' line cut (not every launcher prints it)
    unnamed.write_text("".join(line for line in KIT_ONE_GPU.read_text().splitlines(True) if "#  Rank" not in line))
    (cut,) = measured_tests([unnamed])
    assert cut.ranks is None and cut.crosses_no_link



def test_the_real_one_rank_runs_are_those_their_sources_say_ran_one_rank():
    # SOURCES.tsv's 'ranks' column, written by whoever collected the files: '1 (single GPU)', 'its own 1-rank job',
    # 'the second reduce_perf run uses 1 GPU'
    import csv

    folder = need(REAL_DATA / "nccl-tests")
    with open(folder / "SOURCES.tsv") as stream:
        said = {row["filename"] for row in csv.DictReader(stream, delimiter="\t")
                if re.match(r"1 \(", row["ranks"]) or re.search(r"1-rank|uses 1 GPU", row["ranks"])}  # fmt: skip
    found = {Path(t.path).name for path in sorted(folder.glob("*.log")) for t in read_file(path).tests if t.crosses_no_link}
    assert found == said and len(found) >= 3


def test_one_rank_tests_stay_out_of_the_ceiling_and_alone_are_one_error_naming_the_file(tmp_path):
    with pytest.raises(NcclTestsError) as raised:
        ceiling_from([KIT_ONE_GPU])
    assert str(KIT_ONE_GPU) in str(raised.value) and "one rank" in str(raised.value) and "fix: " in str(raised.value)
    ceiling = Ceiling(measured_tests([KIT_ONE_GPU]) + _tests(tmp_path, {"rows": measurements("all_reduce", start=1024, sizes=8)}))
    header = next(n for n, line in enumerate(KIT_ONE_GPU.read_text().splitlines(), 1) if " size " in line and "count" in line)
    assert ceiling.one_rank == [f"{KIT_ONE_GPU}:{header}"] and ceiling.busbw_at("all_reduce", 1024) > 0
