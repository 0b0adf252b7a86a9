"""The run record (Container-Root/nsyskit/runrecord.py): one shape written by the wrapper and every target's collect."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit import k8s, runrecord, slurm
from nsyskit.analysis.read import runinfo
from nsyskit.errors import NcclLogError, NsyskitError
from nsyskit.jobdir import fresh_job_dir, write_record
from nsyskit.local import run as local_run
from nsyskit.local import runfolder
from nsyskit.nccllog.scan import inputs
from nsyskit.slurm import scheduler
from tests.unit.k8s_variants import ROOT, config

WRAPPER = ROOT / "Container-Root/usr/local/bin/nsys-profile"
# A rank of the run: writes the torch trace the wrapper asks for (PROFILER=torch: no nsys needed), an NCCL log line,
# and the example's checksum line (as train.py prints it, through runrecord).
RANK_APP = f"""
import os, sys
sys.path.insert(0, {str(ROOT / "Container-Root/nsyskit")!r})
import runrecord
if os.environ.get("NSYSKIT_TORCH_TRACE"):
    open(os.environ["NSYSKIT_TORCH_TRACE"], "w").write("{{}}")
open(os.environ["NCCL_DEBUG_FILE"], "w").write("h:1:1 [0] NCCL INFO cudaDriverVersion 12040\\n")
print(runrecord.checksum_line(int(os.environ["RANK"]), "abc", 1.5))
"""


def run_ranks(report_dir: Path, selection: str, world: int = 2) -> str:
    """Run WORLD ranks through the real wrapper into REPORT_DIR; returns their output (the launcher's log)."""
    output = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
               "NSYSKIT_REPORT_DIR": str(report_dir), "NSYSKIT_JOB_ID": "r1", "NSYSKIT_PROFILER": "torch",
               "NSYSKIT_PROFILE_RANKS": selection, "NCCL_DEBUG": "INFO"}  # fmt: skip
        done = subprocess.run([sys.executable, str(WRAPPER), sys.executable, "-c", RANK_APP], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        output.append(done.stdout)
    return "".join(output)


def cpu_config(**more):
    return config("cpu", NODES="1", PROCS_PER_NODE="2", PROFILER="torch", PROFILE_RANKS="0", **more)


def test_a_record_survives_the_round_trip_through_run_json(tmp_path):
    status = runrecord.RankStatus(rank=1, host="w1", profiled=False, profile_ranks="local0", command=["python3", "t.py"])
    record = runrecord.RunRecord(run_id="r1", target="slurm", world_size=2, profile_ranks="local0",
                                 ranks=[runrecord.RankStatus(rank=0), status], checksums={0: "abc", 1: "abc"},
                                 files={"reports": ["a.nsys-rep"]}, details={"job_id": "77"})  # fmt: skip
    record.write(str(tmp_path))
    again = runrecord.read_run(str(tmp_path))
    assert again == record and again.to_dict() == record.to_dict()
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["schema_version"] == runrecord.SCHEMA_VERSION and data["unprofiled_ranks"] == [1]
    assert again.unprofiled_line() == "rank 1 was not profiled (PROFILE_RANKS=local0)"


def test_run_json_keeps_no_credentials_of_url_settings(tmp_path):
    # A presigned URL's signature and a user:password@ would otherwise sit in every run folder that gets shared.
    cfg = config(NCCL_TESTS_URL="https://b.s3.amazonaws.com/t.tgz?X-Amz-Signature=s3cr3t",
                 OPENMPI_URL="https://user:pa55@mirror.example/openmpi.tar.bz2")  # fmt: skip
    runfolder.write_run_record(tmp_path, cfg, "local", "r1")
    text = (tmp_path / "run.json").read_text()
    assert "s3cr3t" not in text and "pa55" not in text and "user:" not in text
    snapshot = json.loads(text)["config"]
    assert snapshot["NCCL_TESTS_URL"]["value"] == "https://b.s3.amazonaws.com/t.tgz?***"
    assert snapshot["OPENMPI_URL"]["value"] == "https://***@mirror.example/openmpi.tar.bz2"


def test_only_entries_with_an_integer_rank_are_ranks(tmp_path):
    # JSON's true is an int to Python: an entry {"rank": true} in run.json or a status file is not rank 1.
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": 2, "ranks": [{"rank": True}, {"rank": 0}, "x"]}))
    assert [s.rank for s in runrecord.read_run(str(tmp_path)).ranks] == [0]
    assert runrecord.is_rank_status({"rank": 3}) and not runrecord.is_rank_status({"rank": False})


def test_the_examples_lines_are_parsed_as_they_are_printed():
    step = runrecord.step_line(0, 5, 20, 10.8, 0.1234, 1234.4, 0.05)
    assert step == "[rank 0] step 5/20 loss=10.8000 step_ms=123.4 tokens_per_s=1234 cpu_ms=50.0"
    assert runrecord.parse_step(step) == (5, 20, 123.4, 1234)
    text = "\n".join([runrecord.checksum_line(1, "ab12", 2.0), runrecord.line(0, "world_size=2 local_rank=0")])
    assert runrecord.checksums(text) == {1: "ab12"} and runrecord.world_sizes(text) == {2}


def test_every_targets_collect_writes_the_same_shape(tmp_path, monkeypatch):
    # The same two ranks (rank 1 not profiled), collected by each target.
    ranks = tmp_path / "ranks"
    log = run_ranks(ranks, "0")
    cfg = cpu_config()

    local_dir = tmp_path / "local" / "reports" / "r1"
    shutil.copytree(ranks, local_dir)
    (local_dir / "logs" / "worker-0.log").write_text(log)
    local_run._finish(cfg, local_dir, "r1", {"started": 1.0}, {"worker-0": 0}, "exited", 2.0)

    root = tmp_path / "slurm"
    with fresh_job_dir(root, "slurm") as job_dir:
        shutil.copytree(ranks, job_dir / "reports")
        write_record(job_dir, job_id="77", mode="host", nodes=1, procs_per_node=2, world_size=2, submitted=True)
    (job_dir / "slurm-77.out").write_text(log)
    monkeypatch.setattr(scheduler, "query", lambda _cfg, job_id: scheduler.JobState(job_id, "COMPLETED", 0))
    slurm_dir = slurm.collect(cfg, root, None)

    k8s_dir = collect_k8s(tmp_path / "k8s", ranks, monkeypatch)

    shapes = {}
    for target, folder in (("local", local_dir), ("slurm", slurm_dir), ("k8s", k8s_dir)):
        data = json.loads((folder / "run.json").read_text())
        shapes[target] = sorted(data)
        record = runrecord.read_run(str(folder))
        assert record.target == target and data["schema_version"] == runrecord.SCHEMA_VERSION
        assert [(s.rank, s.profiled, s.profile_ranks) for s in record.ranks] == [(0, True, "0"), (1, False, "0")]
        assert record.ranks[0].report == "r1_node0_rank0_" + record.ranks[0].host + ".pt.trace.json.gz"
        assert data["unprofiled_ranks"] == [1] and record.unprofiled_line() == "rank 1 was not profiled (PROFILE_RANKS=0)"
        assert data["config"]["PROFILE_RANKS"]["value"] == "0" and record.world_size == 2
        assert record.exit_code == 0 and record.ended_how in ("exited", "COMPLETED", "Succeeded"), (target, record)
        # When it ran: a cluster job's from its ranks' status files (the local run times itself).
        if target != "local":
            assert (record.started, record.ended) == (min(s.started for s in record.ranks), max(s.ended for s in record.ranks))
            assert record.duration_s == pytest.approx(record.ended - record.started, abs=1e-3) and record.started > 0
        # 'invoke nccl-log FOLDER' takes each collected folder as one run (one job), k8s's too
        assert set(inputs.resolve_jobs([str(folder)]).values()) == {str(folder)}
    assert shapes["local"] == shapes["slurm"] == shapes["k8s"]
    assert runrecord.read_run(str(local_dir)).checksums == runrecord.read_run(str(slurm_dir)).checksums == {0: "abc", 1: "abc"}
    assert runrecord.read_run(str(slurm_dir)).details["job_id"] == "77"
    assert runrecord.read_run(str(slurm_dir)).image.startswith("host (no container")  # what ran: no image in host mode


FAKE_KUBECTL = """#!{python}
import json, shutil, sys
args = sys.argv[1:]
if args[:2] == ["get", "pods"]:
    worker = {{"metadata": {{"name": "{job}-worker-0", "creationTimestamp": "1"}}, "status": {{"phase": "Running"}}}}
    launcher = {{"metadata": {{"name": "{job}-launcher", "creationTimestamp": "2"}},
                "status": {{"phase": "Succeeded", "containerStatuses": [{{"state": {{"terminated": {{"exitCode": 0}}}}}}]}}}}
    print(json.dumps({{"items": [worker] if "role=worker" in " ".join(args) else [launcher]}}))
elif args[:2] == ["get", "mpijob"]:
    print(json.dumps({{"status": {{"conditions": [{{"type": "Succeeded", "status": "True"}}]}}}}))
elif args[0] == "cp":
    shutil.copytree({ranks!r}, args[-1])
else:
    sys.exit("unexpected: " + " ".join(args))
"""


def collect_k8s(root: Path, ranks: Path, monkeypatch, **deployed: str) -> Path:
    """'invoke collect --k8s' of a job whose worker pod holds RANKS in /reports (kubectl stood in for: no cluster here).

    DEPLOYED: settings of the deploy only (collect runs with the defaults, as a later 'invoke collect' does)."""
    root.mkdir()
    (root / "k8s").symlink_to(ROOT / "k8s")
    cfg = config("default", NODES="1", PROCS_PER_NODE="2", GPUS_PER_NODE="0", PROFILER="torch", PROFILE_RANKS="0")
    _job_dir, name, _files = k8s.render_job(config("default", NODES="1", PROCS_PER_NODE="2", **deployed) if deployed else cfg, root)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL.format(python=sys.executable, job=name, ranks=str(ranks)))
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return k8s.collect(cfg, root, None)


def test_cluster_collect_records_the_workload_the_job_was_deployed_with(tmp_path, monkeypatch):
    # deploy --workload nccl-tests, then a plain 'invoke collect' (its config says WORKLOAD=ddp): the job's own counts.
    tests = "all_reduce_perf -b 8 -e 1G; alltoall_perf -b 8 -e 1G"
    ranks = tmp_path / "ranks"
    (ranks / "nccl-tests").mkdir(parents=True)
    (ranks / "nccl-tests" / "all_reduce_perf.out").write_text("# nccl-tests\n")
    k8s_dir = collect_k8s(tmp_path / "k8s", ranks, monkeypatch, WORKLOAD="nccl-tests", NCCL_TESTS=tests)
    root = tmp_path / "slurm"
    job_dir = slurm.render_job(config("default", SLURM_MODE="host", WORKLOAD="nccl-tests", NCCL_TESTS=tests), root).parent
    shutil.copytree(ranks, job_dir / "reports", dirs_exist_ok=True)
    write_record(job_dir, job_id="78", submitted=True)
    monkeypatch.setattr(scheduler, "query", lambda _cfg, job_id: scheduler.JobState(job_id, "COMPLETED", 0))
    slurm_dir = slurm.collect(config("default"), root, None)
    for folder in (k8s_dir, slurm_dir):
        record = runrecord.read_run(str(folder))
        assert record.workload == "nccl-tests", folder
        assert [t["output"] for t in record.nccl_tests] == ["nccl-tests/all_reduce_perf.out", "nccl-tests/alltoall_perf.out"]
        assert record.files["nccl_tests"] == ["nccl-tests/all_reduce_perf.out"]


def test_run_json_of_earlier_versions_is_read(tmp_path):
    status = {"rank": 1, "local_rank": 1, "node": 0, "host": "w", "profiled": False, "exit_code": 0,
              "report": None, "sqlite": None, "command": ["python3"]}  # fmt: skip
    local = {"run_id": "r1", "image": "nsyskit:latest", "nodes": 1, "procs_per_node": 2, "world_size": 2,
             "launcher": "torchrun", "started": 5.0, "config": {"PROFILE_RANKS": {"value": "local0", "source": ".env"},
             "PROFILER": {"value": "nsys", "source": "default"}}, "containers": ["c0"], "exit_code": 0,
             "ranks": [{**status, "rank": 0, "profiled": True, "report": "/reports/r1_node0_rank0_w.nsys-rep"}, status],
             "checksums": {"0": "abc", "1": "abc"}, "world_sizes": [2], "files": {"reports": ["x.nsys-rep"]}}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(local))
    record = runrecord.read_run(str(tmp_path))
    assert (record.target, record.profile_ranks, record.profiler, record.checksums) == ("local", "local0", "nsys", {0: "abc", 1: "abc"})
    assert record.ranks[0].report == "r1_node0_rank0_w.nsys-rep" and record.details["containers"] == ["c0"]
    assert record.unprofiled_line() == "rank 1 was not profiled (PROFILE_RANKS=local0)"
    old_slurm = {"run_id": "s1", "target": "slurm", "mode": "host", "job_id": "77", "state": "COMPLETED", "exit_code": 0,
                 "world_size": 2, "ranks": [status], "checksums": {"1": "abc"}, "files": ["a.nsys-rep"]}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(old_slurm))
    record = runrecord.read_run(str(tmp_path))
    assert (record.target, record.ended_how, record.details["job_id"]) == ("slurm", "COMPLETED", "77")
    assert record.files == {"files": ["a.nsys-rep"]} and record.unprofiled() == [1]  # rank 0 left no status: not claimed


@pytest.mark.parametrize(
    ("text", "problem"),
    [('{"schema_version": 99, "run_id": "x"}', "schema_version 99, newer than this nsyskit reads"),
     ("{not json", "is not readable JSON"), ("[1, 2]", "is not a run record"),
     ('{"schema_version": 2, "checksums": ["a"]}', "has a field of an unexpected type"),
     ('{"schema_version": 2, "details": "xy"}', "has a field of an unexpected type")],
)  # fmt: skip
def test_a_run_json_this_version_cannot_read_is_one_line_naming_the_file_and_fix(tmp_path, text, problem):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(NsyskitError) as caught:
        runinfo.run_record(tmp_path)
    line = caught.value.one_line()
    assert line.startswith(str(tmp_path / "run.json")) and problem in line and "; fix: " in line
    (tmp_path / "r.nccl.log").write_text("h:1:1 [0] NCCL INFO x\n")
    with pytest.raises(NcclLogError, match=problem):
        inputs.resolve_jobs([str(tmp_path)])
