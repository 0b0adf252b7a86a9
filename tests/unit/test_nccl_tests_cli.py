"""'invoke nccl-tests' as a user runs it: tables, --json (unrounded), --diff per size, the plot, run folders,
one-line errors and the exit codes of failed runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.nccl_tests_variants import Output, measurements, write_test

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args: str, program: str = "invoke") -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"} | {"COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", program, "nccl-tests", *args], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _file(folder: Path, name: str, *tests: dict) -> Path:
    output = Output()
    for test in tests:
        write_test(output, **test)
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(output.text())
    return path


@pytest.mark.parametrize("program", ["invoke", "nsyskit"])
def test_tables_show_both_placements_and_the_average(tmp_path, program):
    path = _file(tmp_path, "all_reduce.out", {"op": "all_reduce"})
    done = run(str(path), program=program)
    assert done.returncode == 0, done.stderr
    rows = measurements("all_reduce")
    assert f"all_reduce_perf (all_reduce, 16 ranks): {path}:" in done.stdout
    assert "Avg bus bandwidth: 67.9217 GB/s" in done.stdout
    last = next(line for line in done.stdout.splitlines() if f" {rows[-1].size} " in line)
    for text in (*rows[-1].out[:3], *rows[-1].inplace[:3], "float", "sum"):
        assert f" {text} " in last


def test_json_is_unrounded_and_has_every_row(tmp_path):
    path = _file(tmp_path, "x.log", {"op": "all_gather", "layout": "L3"}, {"op": "broadcast", "average": "9.25"})
    done = run(str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    tests = data["files"][0]["tests"]
    assert [t["op"] for t in tests] == ["all_gather", "broadcast"]
    assert [t["avg_busbw_gbps"] for t in tests] == [67.9217, 9.25]
    written = measurements("all_gather")
    assert [r["out_of_place"]["busbw_gbps"] for r in tests[0]["rows"]] == [float(r.out[2]) for r in written]
    assert [r["in_place"]["time_us"] for r in tests[0]["rows"]] == [float(r.inplace[0]) for r in written]


def test_diff_gives_the_change_per_size(tmp_path):
    base_rows = measurements("all_reduce")
    halved = [type(r)(r.size, r.count, (r.out[0], r.out[1], f"{float(r.out[2]) / 2:.2f}", "0"), r.inplace)
              for r in base_rows]  # fmt: skip
    base = _file(tmp_path / "a", "ar.log", {"rows": base_rows})
    new = _file(tmp_path / "b", "ar.log", {"rows": halved, "average": "33.96085"})
    done = run(str(new), "--diff", str(base), "--json")
    assert done.returncode == 0, done.stderr
    (pair,) = json.loads(done.stdout)["diff"]["pairs"]
    assert [s["size"] for s in pair["sizes"]] == [r.size for r in base_rows]
    for size, a, b in zip(pair["sizes"], base_rows, halved, strict=True):
        assert (size["busbw_a_gbps"], size["busbw_b_gbps"]) == (float(a.out[2]), float(b.out[2]))
        if float(a.out[2]):
            assert size["change_pct"] == pytest.approx((float(b.out[2]) - float(a.out[2])) * 100 / float(a.out[2]))
    assert pair["avg_change_pct"] == pytest.approx(-50.0)
    table = run(str(new), "--diff", str(base))
    assert table.returncode == 0 and "all_reduce: A " in table.stdout and "-50.0%" in table.stdout


def test_plot_is_a_png(tmp_path):
    path = _file(tmp_path, "x.log", {"op": "all_reduce"}, {"op": "sendrecv"})
    target = tmp_path / "busbw.png"
    done = run(str(path), "--plot", str(target))
    assert done.returncode == 0, done.stderr
    assert target.read_bytes().startswith(PNG_MAGIC) and str(target) in done.stderr


def test_plot_to_a_missing_folder_is_one_line_before_reading(tmp_path):
    done = run(str(tmp_path / "nothing.log"), "--plot", str(tmp_path / "no" / "x.png"))
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0 and "--plot" in done.stderr


def test_a_run_folder_reads_the_tests_among_other_files(tmp_path):
    run_dir = tmp_path / "run-1"
    _file(run_dir, "nccl-tests/all_reduce_perf.out", {"op": "all_reduce", "banner": False})
    _file(run_dir, "nccl-tests/alltoall_perf.log", {"op": "alltoall", "banner": False})
    (run_dir / "rank0.log").write_text("node-a:1:1 [0] NCCL INFO Init COMPLETE\n")
    (run_dir / "logs").mkdir()  # the launcher's log echoes rank 0's output: the same tables, read once
    launcher = "\n".join(
        f"[1,0]<stdout>:{line}" for line in (run_dir / "nccl-tests/all_reduce_perf.out").read_text().splitlines()
    )
    (run_dir / "logs" / "launcher.log").write_text("+ mpirun -np 16 ...\n" + launcher + "\n")
    (run_dir / "report-rank0.nsys-rep").write_bytes(b"\0\1\2 binary")
    (run_dir / "run.json").write_text("{}")
    done = run(str(run_dir), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    names = sorted((Path(f["path"]).name, f["tests"][0]["op"], f["tests"][0]["name_source"]) for f in data["files"])
    assert names == [("all_reduce_perf.out", "all_reduce", "file name"), ("alltoall_perf.log", "alltoall", "file name")]
    assert (run_dir / "nccl-tests.png").read_bytes().startswith(PNG_MAGIC)
    assert json.loads((run_dir / "nccl-tests.json").read_text())["files"]


def test_a_folder_without_any_table_is_one_line(tmp_path):
    (tmp_path / "rank0.log").write_text("hello\n")
    done = run(str(tmp_path))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"error: {tmp_path}: no file in it holds a nccl-tests table; fix: "
                                                "give the run folder of a nccl-tests workload, or the output file "
                                                "itself"]  # fmt: skip


def test_wrong_results_print_the_table_and_exit_3_naming_the_line(tmp_path):
    output = Output()
    write_test(output, rows=measurements(sizes=3) + measurements(wrong="4", start=64, sizes=2))
    path = tmp_path / "bad.log"
    path.write_text(output.text())
    done = run(str(path))
    assert done.returncode == 3
    assert "all_reduce_perf" in done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}:{output.row_lines[3]}: all_reduce_perf: #wrong 4/4")


def test_a_truncated_run_warns_and_exits_0(tmp_path):
    output = Output()
    write_test(output, average=None)
    path = tmp_path / "cut.log"
    path.write_text("\n".join(output.lines[: output.row_lines[4]]) + "\n")
    done = run(str(path))
    assert done.returncode == 0
    assert "warning:" in done.stderr and "cut short (5 rows read)" in done.stderr
    assert "none (the table was cut)" in done.stdout


def test_a_missing_file_is_one_line(tmp_path):
    done = run(str(tmp_path / "absent.log"))
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0 and "absent.log" in done.stderr


def test_an_empty_file_or_input_is_one_line_naming_it(tmp_path):
    # the C row scanner's arrays of no rows: an empty output (a job killed before its first line) reads as no table
    (tmp_path / "empty.out").write_bytes(b"")
    for args, stdin, named in (([str(tmp_path / "empty.out")], None, "empty.out"), (["-"], "", "-: no nccl-tests")):
        environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"}
        done = subprocess.run([sys.executable, "-m", "nsyskit", "nccl-tests", *args], cwd=ROOT, env=environ,
                              input=stdin, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 1 and done.stderr.strip().count("\n") == 0, done.stderr
        assert named in done.stderr and "no nccl-tests table" in done.stderr and "fix:" in done.stderr


def test_the_examples_the_docs_read_are_the_generators_outputs():
    """tests/data/nccl-tests holds what nccl_tests_variants writes (no hand edits): the docs show real behaviour."""
    from tests.unit.nccl_tests_variants import example_outputs

    for name, text in example_outputs().items():
        assert (ROOT / "tests" / "data" / "nccl-tests" / name).read_text() == text
