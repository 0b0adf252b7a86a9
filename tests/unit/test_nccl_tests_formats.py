"""The reader on variants the real corpus lacks: every layout under every launcher prefix, rows cut by OpenMPI
tags and NCCL INFO lines, several tests per file, truncation at every point, failures of each kind."""

from __future__ import annotations

import pytest

from nsyskit.nccltests import read_file
from tests.unit.nccl_tests_variants import HEAD_COLUMNS, INFO, Output, measurements, pieces, prefixed, write_test


def _read(tmp_path, text: str, name: str = "out.log"):
    path = tmp_path / name
    path.write_text(text)
    return read_file(path)


def _numbers(rows):
    """(size, out busbw, in busbw, out wrong) as the generator printed them, in numbers."""
    return [(r.size, float(r.out[2]), float(r.inplace[2]), r.out[3]) for r in rows]


def _read_numbers(test):
    return [(r.size, r.out_of_place.busbw, r.in_place.busbw, r.out_of_place.wrong) for r in test.rows]


@pytest.mark.parametrize("layout", sorted(HEAD_COLUMNS))
def test_every_layout_reads_back_every_number(tmp_path, layout):
    output = Output()
    rows = write_test(output, layout=layout)
    (test,) = _read(tmp_path, output.text()).tests
    assert _read_numbers(test) == _numbers(rows)
    assert [r.line for r in test.rows] == output.row_lines
    assert [(r.out_of_place.time_us, r.out_of_place.algbw) for r in test.rows] == [
        (float(r.out[0]), float(r.out[1])) for r in rows
    ]
    assert test.avg_busbw == 67.9217 and test.avg_line == output.avg_lines[0]
    assert len(test.layout) == HEAD_COLUMNS[layout]
    assert test.name == "all_reduce_perf" and test.op == "all_reduce" and test.ranks == 16


PREFIXES = {
    "openmpi": "[1,0]<stdout>:",
    "srun -l": "0: ",
    "skypilot+openmpi": "(head, rank=0, pid=3808) [1,0]<stdout>:",
    "ray": "(RayTrainWorker pid=2211, ip=10.0.0.7) ",
    "kubectl --prefix": "[pod/nccl-launcher-x7/mpi] ",
    "kubectl --timestamps": "2025-03-01T10:00:00.123456789Z ",
    "intel mpi": "[0] ",
}


@pytest.mark.parametrize("layout", ["L1-redop", "L2", "L3"])
@pytest.mark.parametrize("prefix", sorted(PREFIXES))
def test_launcher_prefixes_change_nothing(tmp_path, prefix, layout):
    output = Output()
    rows = write_test(output, layout=layout, between=INFO)
    (test,) = _read(tmp_path, prefixed(output.text(), PREFIXES[prefix])).tests
    assert _read_numbers(test) == _numbers(rows)
    assert test.avg_busbw == 67.9217


def test_openmpi_tags_cut_into_the_middle_of_rows(tmp_path):
    """--tag-output tags each flush: the tag stands before the out-of-place and in-place pieces too."""
    output = Output()
    rows = write_test(output)
    text = output.text()
    for row in rows:
        plain = "".join(pieces("L2", row))
        cut = "".join("[1,0]<stdout>:" + piece for piece in pieces("L2", row))
        text = text.replace(plain + "\n", cut + "\n", 1)
    assert text.count("<stdout>:") == 3 * len(rows)
    (test,) = _read(tmp_path, text).tests
    assert _read_numbers(test) == _numbers(rows)


@pytest.mark.parametrize("layout", ["L1-none", "L2", "L3"])
def test_info_lines_inside_rows_and_between_them(tmp_path, layout):
    """NCCL INFO written between a row's pieces ends the line there; the row's rest comes after other lines."""
    output = Output()
    rows = write_test(output, layout=layout, glued=INFO, between=INFO)
    text = output.text()
    assert "-1" + INFO in text or layout == "L1-none"
    (test,) = _read(tmp_path, text).tests
    assert _read_numbers(test) == _numbers(rows)
    assert [r.line for r in test.rows] == output.row_lines


def test_several_tests_in_one_file_keep_their_names_and_rows(tmp_path):
    output = Output()
    written = {
        "all_reduce": write_test(output, "all_reduce", banner=True),
        "all_gather": write_test(output, "all_gather", layout="L1-none", banner=False, command=True, average="1.5"),
        "broadcast": write_test(output, "broadcast", layout="L1-root", banner=False, command=True, average="2.5"),
        "sendrecv": write_test(output, "sendrecv", layout="L3", average="3.5"),
    }
    tests = _read(tmp_path, output.text()).tests
    assert [t.op for t in tests] == list(written)
    assert [t.avg_busbw for t in tests] == [67.9217, 1.5, 2.5, 3.5]
    for test, rows in zip(tests, written.values(), strict=True):
        assert _read_numbers(test) == _numbers(rows)
    assert [t.name_source for t in tests] == ["banner", "command", "command", "banner"]
    assert tests[3].rows[0].in_place.wrong == "N/A"  # sendrecv's in-place is not checked


@pytest.mark.parametrize("keep", [0, 1, 5, 11])
def test_a_truncated_run_gives_the_rows_so_far_and_a_warning(tmp_path, keep):
    output = Output()
    rows = write_test(output)
    cut = output.lines[: output.row_lines[keep] - 1]  # everything before row KEEP
    result = _read(tmp_path, "\n".join(cut) + "\n")
    if keep == 0:
        assert result.tests == [] and result.empty_headers
        return
    (test,) = result.tests
    assert _read_numbers(test) == _numbers(rows[:keep])
    assert test.avg_busbw is None
    (warning,) = test.warnings
    assert "no 'Avg bus bandwidth' line" in warning.message and warning.line == output.row_lines[keep - 1]


def test_a_row_cut_after_its_out_of_place_columns_is_kept_with_a_warning(tmp_path):
    output = Output()
    rows = write_test(output, average=None)
    last = rows[-1]
    text = "\n".join(output.lines[: output.row_lines[-1] - 1]) + "\n" + "".join(pieces("L2", last)[:2]) + "\n"
    (test,) = _read(tmp_path, text).tests
    assert len(test.rows) == len(rows)
    assert test.rows[-1].out_of_place.busbw == float(last.out[2]) and test.rows[-1].in_place is None
    assert any("only its out-of-place columns" in w.message for w in test.warnings)


def test_wrong_results_are_a_failure_naming_the_first_wrong_row(tmp_path):
    output = Output()
    rows = measurements(wrong="0")
    rows[3:] = measurements(wrong="96", sizes=9, start=rows[3].size)
    write_test(output, rows=rows)
    (test,) = _read(tmp_path, output.text()).tests
    (failure,) = test.failures
    assert failure.line == output.row_lines[3] and "#wrong 96" in failure.message and "9 row(s)" in failure.message
    assert str(failure).startswith(f"{tmp_path / 'out.log'}:{output.row_lines[3]}:")
    assert [r.out_of_place.wrong_count for r in test.rows] == [0, 0, 0] + [96] * 9


def test_validation_off_gives_na_cells_and_no_failure(tmp_path):
    output = Output()
    write_test(output, rows=measurements(wrong="N/A"))
    (test,) = _read(tmp_path, output.text()).tests
    assert {r.out_of_place.wrong for r in test.rows} == {"N/A"} and test.failures == []
    assert all(r.out_of_place.wrong_count is None for r in test.rows)


def test_out_of_memory_mid_table_keeps_the_rows_and_names_the_line(tmp_path):
    output = Output()
    rows = write_test(output, average=None)
    at = output.row_lines[6]
    lines = output.lines[:at] + ["node-a: Test CUDA failure common.cu:733 'out of memory'"]
    (test,) = _read(tmp_path, "\n".join(lines) + "\n").tests
    assert _read_numbers(test) == _numbers(rows[:7])
    assert [(f.line, "out of memory" in f.message) for f in test.failures] == [(at + 1, True)]


def test_a_failed_start_has_no_table_and_its_failure_line(tmp_path):
    output = Output()
    write_test(output)
    header = output.lines.index("# Using devices")
    lines = output.lines[: header + 17] + [
        "node-a: Test NCCL failure common.cu:1279 'remote process exited or there was a network error / '",
        " .. node-a pid 1016: Test failure common.cu:1100",
    ]
    result = _read(tmp_path, "\n".join(lines) + "\n")
    assert result.tests == []
    assert [f.line for f in result.all_failures()] == [header + 18, header + 19]


def test_sizes_of_ten_gigabytes_and_more_fill_their_column(tmp_path):
    """A size wider than its 12-character column leaves no space at the start of the row."""
    output = Output()
    rows = write_test(output, rows=measurements(start=1 << 39, sizes=3))
    assert output.lines[output.row_lines[1] - 1].startswith("1099511627776 ")
    (test,) = _read(tmp_path, output.text()).tests
    assert _read_numbers(test) == _numbers(rows)


def test_rows_without_the_column_header_are_read_with_the_layout_they_fit(tmp_path):
    """An output cut by its author (the head of the file removed) still gives its rows, with a warning."""
    output = Output()
    rows = write_test(output)
    header = output.lines.index(next(line for line in output.lines if "busbw" in line))
    (test,) = _read(tmp_path, "\n".join(output.lines[header + 2 :]) + "\n").tests
    assert _read_numbers(test) == _numbers(rows)
    assert test.avg_busbw == 67.9217 and test.warnings


def test_a_header_without_hash_marks_reads_as_one(tmp_path):
    """Documentation that strips the '#' comment markers (and indents) keeps a readable table."""
    output = Output()
    rows = write_test(output, layout="L3")
    text = "".join("  " + line.lstrip("#") + "\n" for line in output.lines)
    (test,) = _read(tmp_path, text).tests
    assert _read_numbers(test) == _numbers(rows) and test.avg_busbw == 67.9217


def test_windows_line_ends_change_nothing(tmp_path):
    output = Output()
    rows = write_test(output, layout="L2")
    (test,) = _read(tmp_path, output.text().replace("\n", "\r\n")).tests
    assert _read_numbers(test) == _numbers(rows) and test.avg_busbw == 67.9217


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce",
                                "sendrecv"])  # fmt: skip
def test_an_output_that_never_names_its_binary_gets_the_operation_its_rows_show(tmp_path, op):
    output = Output()
    write_test(output, op, banner=False)
    (test,) = _read(tmp_path, output.text(), name="run-17.log").tests
    assert (test.op, test.name_source) == (op, "inferred")


def test_a_file_named_after_its_test_names_it(tmp_path):
    output = Output()
    write_test(output, "alltoall", banner=False)
    (test,) = _read(tmp_path, output.text(), name="nccl_alltoall-16gpu.out").tests
    assert (test.op, test.name_source) == ("alltoall", "file name")


def test_when_the_rows_cannot_tell_the_test_stays_unnamed(tmp_path):
    """Validation off: sendrecv and a 2-rank all_reduce print the same factor and N/A checks alike."""
    output = Output()
    write_test(output, "sendrecv", banner=False, rows=measurements("sendrecv", wrong="N/A"))
    (test,) = _read(tmp_path, output.text(), name="run.log").tests
    assert test.op is None and test.label == "unnamed test"
