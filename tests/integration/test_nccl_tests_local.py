"""WORKLOAD=nccl-tests through the local multi-container path: a real engine, real mpirun over ssh, the real wrapper
and real nsys (Debian's, on CPU), rank0tee keeping rank 0's table.

No GPU here, and the image of the local-cpu profile has no nccl-tests (INSTALL_TESTS needs EFA): the test binaries
are stand-ins on PATH in an image made FROM the kit image, which print what a rank was started with. The run goes
through the library (local.run), past the GPU check that stops `invoke run` on a machine without GPUs; a real
all_reduce_perf under nsys needs a GPU machine (none is lent to this task)."""

from __future__ import annotations

import io
import json
import re
import tarfile
import uuid
from pathlib import Path

import docker
import pytest
from fixtures.kit_image import ROOT

from nsyskit.config import load_config
from nsyskit.local import run as local_run

pytestmark = [pytest.mark.engine, pytest.mark.slow]

# What a stand-in test prints: a table-like line per rank (real nccl-tests print only on rank 0; here every rank
# prints, so the output file shows that rank 0's alone was kept), with the MPI world it was started in.
FAKE_TEST = """#!/bin/sh
echo "# $(basename "$0") $*"
echo "#  rank ${OMPI_COMM_WORLD_RANK:-?} of ${OMPI_COMM_WORLD_SIZE:-?} on $(hostname)"
"""
TESTS = "all_reduce_perf -b 8 -e 1M -f 2 -g 1; alltoall_perf -b 8 -e 1M -f 2 -g 1"


@pytest.fixture(scope="module")
def stand_in_image(kit_image) -> str:
    """The kit image plus stand-in all_reduce_perf and alltoall_perf on PATH."""
    dockerfile = f"FROM {kit_image}\nCOPY fake /usr/local/bin/all_reduce_perf\nCOPY fake /usr/local/bin/alltoall_perf\n"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, text, mode in (("Dockerfile", dockerfile, 0o644), ("fake", FAKE_TEST, 0o755)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text.encode()), mode
            tar.addfile(info, io.BytesIO(text.encode()))
    context.seek(0)
    tag = f"nsyskit-nccl-stand-in:{uuid.uuid4().hex[:8]}"
    client = docker.from_env()
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    yield tag
    client.images.remove(tag, force=True)


def test_two_nodes_run_each_test_through_mpirun_under_nsys_and_keep_rank0s_table(stand_in_image, tmp_path):
    name, _, tag = stand_in_image.rpartition(":")
    settings = {"IMAGE": name, "TAG": tag, "REPORT_DIR": str(tmp_path / "reports"), "NODES": "2", "PROCS_PER_NODE": "1",
                "WORKLOAD": "nccl-tests", "NCCL_TESTS": TESTS}  # fmt: skip
    cfg = load_config(ROOT, profile="local-cpu", overrides=settings, environ={})
    run_id = f"test-nccl-{uuid.uuid4().hex[:6]}"
    client, run_id, run_dir = local_run.prepare(cfg, ROOT, run_id)
    result = local_run.execute(cfg, client, run_id, run_dir, show_progress=False)
    log = (run_dir / "logs" / "launcher.log").read_text(errors="replace")
    assert result.exit_code == 0, log[-3000:]

    # Each test: one mpirun over both nodes, every rank under nsys, its reports named apart by the test.
    for test, tag_ in (("all_reduce_perf", "all-reduce"), ("alltoall_perf", "alltoall")):
        reports = sorted(p.name for p in run_dir.glob(f"{run_id}-{tag_}_*.nsys-rep"))
        assert reports == [f"{run_id}-{tag_}_node{r}_rank{r}_worker-{r}.nsys-rep" for r in (0, 1)], sorted(
            run_dir.iterdir()
        )
        output = (run_dir / "nccl-tests" / f"{test}.out").read_text()
        assert output == f"# {test} -b 8 -e 1M -f 2 -g 1\n#  rank 0 of 2 on worker-0\n"  # rank 0's lines only
        assert "#  rank 1 of 2 on worker-1" in log  # the other ranks' output stays in the launcher's log
        command = (run_dir / f"{run_id}-{tag_}_node1_rank1_worker-1.cmd").read_text()
        assert re.search(
            rf"nsys profile .* python3 /nsyskit/workload/rank0tee\.py /reports/nccl-tests/{test}\.out {test} ", command
        )

    record = json.loads((run_dir / "run.json").read_text())
    assert record["workload"] == "nccl-tests" and record["launcher"] == "mpirun"
    assert record["files"]["nccl_tests"] == ["nccl-tests/all_reduce_perf.out", "nccl-tests/alltoall_perf.out"]
    assert [t["name"] for t in record["nccl_tests"]] == ["all_reduce_perf", "alltoall_perf"]
    assert sorted((s["rank"], s["job_id"]) for s in record["ranks"]) == [
        (0, f"{run_id}-all-reduce"),
        (0, f"{run_id}-alltoall"),
        (1, f"{run_id}-all-reduce"),
        (1, f"{run_id}-alltoall"),
    ]
    assert set(record["details"]["commands"]["tests"]) == {"all_reduce_perf", "alltoall_perf"}
    assert not list(Path(run_dir).glob("*.qdstrm"))
