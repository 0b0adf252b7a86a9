"""A run of several NCCL tests holds a report per rank and test: 'invoke analyze RUN' says so and how to take one
test's reports, and a quoted pattern takes them."""

from __future__ import annotations

import json
import subprocess
import sys

from nsys_fixtures import Export, Kernel, Range, write_export

from nsyskit import runrecord

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


def nccl_tests_run(folder):
    """Two ranks, each with a report of all_reduce_perf and of all_gather_perf (names as the kit writes them)."""
    folder.mkdir()
    for test in ("all-reduce", "all-gather"):
        for rank in range(2):
            kernels = [Kernel(i * 1000, i * 1000 + 400, NCCL) for i in range(4)]
            write_export(folder / f"r7-{test}_node{rank}_rank{rank}_w{rank}.sqlite",
                         Export(kernels=kernels, ranges=[Range(0, 4000, "ncclAllReduce", domain="NCCL")]))  # fmt: skip
    tests = [{"name": name, "binary": name, "args": ["-b", "8"], "output": f"nccl-tests/{name}.out"}
             for name in ("all_reduce_perf", "all_gather_perf")]  # fmt: skip
    runrecord.RunRecord(run_id="r7", target="local", nodes=2, procs_per_node=1, world_size=2, workload="nccl-tests",
                        nccl_tests=tests).write(str(folder))  # fmt: skip
    return folder


def nsyskit(cwd, *args):
    return subprocess.run([sys.executable, "-m", "nsyskit", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_whole_folder_says_it_holds_several_tests_and_how_to_take_one(tmp_path):
    run = nccl_tests_run(tmp_path / "run")
    done = nsyskit(tmp_path, "analyze", str(run), "--no-html")
    assert done.returncode == 1 and done.stdout == ""
    line = done.stderr.strip().splitlines()[-1]
    assert "claims rank 0" in line and "holds the reports of 2 NCCL tests (all-reduce, all-gather)" in line
    assert f"invoke analyze '{run}/*-all-reduce_*'" in line


def test_a_quoted_pattern_takes_one_test_s_reports(tmp_path):
    run = nccl_tests_run(tmp_path / "run")
    done = nsyskit(tmp_path, "analyze", f"{run}/*-all-gather_*", "--json", "--no-html")
    assert done.returncode == 0, done.stderr
    sources = json.loads(done.stdout)["sources"]
    assert sorted(sources) == ["0", "1"] and all("-all-gather_" in path for path in sources.values())
    nothing = nsyskit(tmp_path, "analyze", f"{run}/*-broadcast_*", "--no-html")
    assert nothing.returncode == 1 and "the pattern matches no" in nothing.stderr
