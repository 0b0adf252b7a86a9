"""invoke deploy/status/logs/collect/undeploy --slurm against a real two-node Slurm cluster in containers.

The kit runs here, as a user runs it, in a project folder that is the cluster's shared file system (bind-mounted
at the same path in both nodes); Slurm's commands run inside the controller node through
SLURM_SUBMIT_PREFIX='docker exec NODE' (a login node reached over ssh is the same idea). The job is the host-mode
script: 2 nodes x 2 tasks running the example on CPU under the real nsys (Debian's 2022.4) through the wrapper.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, start_cluster  # tests/integration is on sys.path

from nsyskit import runrecord
from nsyskit.analysis.compute.analyzers import step_times
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.slurm import render

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.engine, pytest.mark.slow]
NODES, TASKS_PER_NODE = 2, 2
JOB_TIMEOUT_S = 420
SUBMITTED = re.compile(r"submitted Slurm job (\d+)")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project folder (tasks.py, .env, profiles/, slurm/) whose jobs/ and reports/ are made by the tasks."""
    root = tmp_path_factory.mktemp("slurm-project")
    for name in ("tasks.py", ".env"):
        shutil.copy2(ROOT / name, root / name)
    for name in ("profiles", "slurm"):
        shutil.copytree(ROOT / name, root / name)
    return root


@pytest.fixture(scope="module")
def cluster(kit_image, project):
    """Two Slurm nodes made from the kit's image, sharing the project folder."""
    ref = kit_image if isinstance(kit_image, str) else (getattr(kit_image, "ref", None) or kit_image.tags[0])
    started = start_cluster(ref, project, count=NODES, cpus=2)
    yield started
    started.stop()


def invoke(
    project: Path, cluster: SlurmCluster, *args: str, timeout: int = 120, **env: str
) -> subprocess.CompletedProcess:
    """Run 'invoke ARGS' in the project with the host-mode settings of this test (and `env` on top)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NSYSKIT_", "SLURM_", "AWS_"))}
    clean.update(
        NSYSKIT_PROFILE="local-cpu", NSYSKIT_SLURM_MODE="host", NSYSKIT_NODES=str(NODES),
        NSYSKIT_PROCS_PER_NODE=str(TASKS_PER_NODE), NSYSKIT_EFA_PER_NODE="1", NSYSKIT_EFA_METRICS="true",
        NSYSKIT_SLURM_SUBMIT_PREFIX=cluster.submit_prefix, NSYSKIT_SLURM_TIME_LIMIT="15", NSYSKIT_SLURM_MPI="pmix",
        COLUMNS="200",
    )  # fmt: skip
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=project, env=clean, capture_output=True, text=True, timeout=timeout
    )


def job_id_of(result: subprocess.CompletedProcess) -> str:
    found = SUBMITTED.search(result.stdout + result.stderr)
    assert found, result.stdout + result.stderr
    return found[1]


def last_job_dir(project: Path) -> Path:
    return project / "jobs" / (project / "jobs" / "last-slurm").read_text().strip()


def slurm_exit_code(cluster: SlurmCluster, job_id: str) -> tuple[str, int]:
    """(JobState, exit code) as Slurm itself reports them."""
    line = cluster.exec(cluster.controller, f"scontrol --oneliner show job {job_id}").stdout
    state = re.search(r"JobState=(\S+)", line)[1]
    return state, int(re.search(r"ExitCode=(\d+):", line)[1])


def explain(cluster: SlurmCluster, result: subprocess.CompletedProcess, job_dir: Path | None = None) -> str:
    """Everything needed to understand a failed run: the task's output, the job's log and the cluster's state."""
    logs = (
        "\n".join(p.read_text(errors="replace")[-4000:] for p in sorted(job_dir.glob("slurm-*.out"))) if job_dir else ""
    )
    return f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\njob log:\n{logs}\ncluster:\n{cluster.diagnostics()}"


def test_host_mode_job_profiles_every_rank_on_two_nodes(project, cluster):
    result = invoke(project, cluster, "deploy", "--slurm", "--wait", timeout=JOB_TIMEOUT_S)
    job_dir = last_job_dir(project)
    assert result.returncode == 0, explain(cluster, result, job_dir)
    job_id = job_id_of(result)
    assert slurm_exit_code(cluster, job_id) == ("COMPLETED", 0)  # --wait returned the job's exit code: 0
    # progress while waiting: the phase and the time elapsed, ending with the final state
    assert re.search(rf"job {job_id}: RUNNING \(\d+ (s|min \d+ s) elapsed\)", result.stderr), result.stderr
    assert re.search(rf"job {job_id}: COMPLETED \(.* elapsed\)", result.stderr), result.stderr

    # Four per-rank reports named with the job id, the node and the rank (and the host it ran on).
    reports = job_dir / "reports"
    names = sorted(p.name for p in reports.glob("*.nsys-rep"))
    expected = [
        f"nsyskit_{job_id}_node_{rank // TASKS_PER_NODE}_rank_{rank}_{cluster.nodes[rank // TASKS_PER_NODE]}.nsys-rep"
        for rank in range(NODES * TASKS_PER_NODE)
    ]
    assert names == expected, explain(cluster, result, job_dir)

    # The wrapper's record of every rank: the exact nsys command line (.cmd) and its decisions (status.json).
    statuses = {s["rank"]: s for s in (json.loads(p.read_text()) for p in (reports / "logs").glob("*.status.json"))}
    assert sorted(statuses) == list(range(4)) and all(s["exit_code"] == 0 and s["profiled"] for s in statuses.values())
    nsys_version = cluster.exec(cluster.nodes[0], "nsys --version").stdout
    efa_capable = tuple(int(n) for n in re.search(r"(\d{4})\.(\d+)", nsys_version).groups()) >= (2024, 4)
    for rank, status in statuses.items():
        command = (reports / (expected[rank].removesuffix(".nsys-rep") + ".cmd")).read_text()
        local0 = rank % TASKS_PER_NODE == 0
        if local0 and efa_capable:
            assert status["efa_metrics"] == "applied" and "--enable efa_metrics" in command
        elif local0:
            # Debian's nsys 2022.4 has no efa_metrics plugin (and the CPU nodes no EFA device): the wrapper chose
            # the flag for this rank, recorded why it left it out, and nsys ran without it instead of failing.
            assert status["efa_metrics"].startswith("skipped") and "nsys 2022" in status["efa_metrics"], status
            assert "--enable" not in command
        else:
            assert status["efa_metrics"].startswith("skipped") and "local rank 0" in status["efa_metrics"], status
            assert "--enable" not in command
        # The exact command line as given to nsys, which expands the %q{VAR} of the report name itself.
        assert command.startswith("nsys profile ") and f"--output={reports}/{render.REPORT_NAME}" in command

    # The ranks trained in lockstep: the same parameter checksum everywhere.
    log = (job_dir / f"slurm-{job_id}.out").read_text()
    checksums = dict(re.findall(r"\[rank (\d+)\] checksum=(\S+)", log))
    assert sorted(checksums) == ["0", "1", "2", "3"] and len(set(checksums.values())) == 1, log[-3000:]

    status = invoke(project, cluster, "status", "--slurm")
    assert status.returncode == 0 and f"job {job_id}: COMPLETED, exit code 0" in status.stdout, status.stderr
    logs = invoke(project, cluster, "logs", "--slurm")
    assert logs.returncode == 0 and "checksum=" in logs.stdout

    collected = invoke(project, cluster, "collect", "--slurm")
    assert collected.returncode == 0, collected.stderr
    run_dir = project / "reports" / job_dir.name
    assert str(run_dir) in collected.stdout.replace("\n", "")
    assert sorted(p.name for p in run_dir.glob("*.nsys-rep")) == expected
    run = json.loads((run_dir / "run.json").read_text())  # the one shape of every target (nsyskit.runrecord)
    assert run["schema_version"] == runrecord.SCHEMA_VERSION and run["target"] == "slurm"
    assert run["details"]["job_id"] == job_id and run["ended_how"] == "COMPLETED" and run["details"]["mode"] == "host"
    assert run["world_size"] == 4 and run["unprofiled_ranks"] == []
    assert (run_dir / f"slurm-{job_id}.out").is_file() and len(list((run_dir / "logs").glob("*.status.json"))) == 4
    assert [r["rank"] for r in run["ranks"]] == [0, 1, 2, 3] and run["checksums"] == checksums
    # When it ran (from the ranks' status files) and in what: the nodes' own software in host mode.
    first, last = min(r["started"] for r in run["ranks"]), max(r["ended"] for r in run["ranks"])
    assert (run["started"], run["ended"]) == (first, last) and run["duration_s"] == pytest.approx(last - first, abs=1e-3)
    assert run["image"].startswith("host (no container")

    # What collect gathered is what 'invoke analyze' reads.
    analyzed = invoke(project, cluster, "analyze", str(run_dir), "--json", "--no-html", timeout=300)
    assert analyzed.returncode == 0, analyzed.stdout[-2000:] + analyzed.stderr[-2000:]
    assert sorted(json.loads(analyzed.stdout)["sources"]) == ["0", "1", "2", "3"]  # ranks told from the report names


def test_failing_job_exits_with_its_code_naming_state_and_log_and_is_collected(project, cluster):
    # A user error only the nodes find out: nsys refuses an unknown option on every rank.
    # 'invoke run --slurm' is deploy --wait, then collect (a failed job too), then the job's exit code.
    result = invoke(
        project, cluster, "run", "--slurm", "--no-progress", timeout=JOB_TIMEOUT_S,
        NSYSKIT_NSYS_EXTRA_ARGS="--no-such-nsys-option",
    )
    job_dir = last_job_dir(project)
    job_id = job_id_of(result)
    state, code = slurm_exit_code(cluster, job_id)
    assert state == "FAILED" and code != 0, explain(cluster, result, job_dir)
    assert result.returncode == code, explain(cluster, result, job_dir)
    log = job_dir / f"slurm-{job_id}.out"
    last = result.stderr.strip().splitlines()[-1]
    reports = project / "reports" / job_dir.name
    assert last == (f"error: Slurm job {job_id} ended FAILED (exit code {code}): reason NonZeroExitCode; logs: {log}; "
                    f"reports collected in {reports}")  # fmt: skip
    assert "Traceback" not in result.stderr and log.is_file()
    run = json.loads((reports / "run.json").read_text())
    assert run["details"]["job_id"] == job_id and run["ended_how"] == "FAILED" and run["exit_code"] == code


def test_undeploy_cancels_the_last_job(project, cluster):
    submitted = invoke(project, cluster, "deploy", "--slurm", NSYSKIT_STEPS="2000", NSYSKIT_PROFILE_STEPS="")
    assert submitted.returncode == 0, submitted.stderr
    job_id = job_id_of(submitted)
    cancelled = invoke(project, cluster, "undeploy", "--slurm")
    assert cancelled.returncode == 0 and f"cancelled Slurm job {job_id}" in cancelled.stdout, cancelled.stderr
    state = ""
    for _ in range(30):
        state = slurm_exit_code(cluster, job_id)[0]
        if state == "CANCELLED":
            break
        time.sleep(1)
    assert state == "CANCELLED"
    status = invoke(project, cluster, "status", "--slurm", "--job", job_id)
    assert f"job {job_id}: CANCELLED" in status.stdout, status.stderr


def test_logs_follow_prints_until_the_job_ends(project, cluster):
    submitted = invoke(project, cluster, "deploy", "--slurm", NSYSKIT_NSYS_EXTRA_ARGS="--no-such-nsys-option")
    assert submitted.returncode == 0, submitted.stderr
    job_id = job_id_of(submitted)
    followed = invoke(project, cluster, "logs", "--slurm", "--follow", timeout=JOB_TIMEOUT_S)
    assert followed.returncode == 0, followed.stderr
    assert slurm_exit_code(cluster, job_id)[0] == "FAILED"  # --follow returned because the job had ended
    assert f"nsyskit: job {job_id} on 2 node(s)" in followed.stdout and "no-such-nsys-option" in followed.stdout


H100_EXPORT = ROOT / "tests" / "data" / "real" / "nsys-exports" / "h100_gpt2_ddp_nsys2025.3.1.sqlite.xz"
WIDE_RANKS = 16


def wide_run(project: Path, name: str, ranks: int) -> Path:
    """A run folder of `ranks` copies of the real 2-GPU H100 export under rank file names, on the shared folder."""
    import lzma

    run = project / "reports" / name
    run.mkdir(parents=True)
    data = lzma.decompress(H100_EXPORT.read_bytes())
    for rank in range(ranks):
        (run / f"nsyskit_node_{rank // 8}_rank_{rank}.sqlite").write_bytes(data)
    return run


def test_analyze_slurm_maps_on_the_nodes_and_merges_what_analyze_makes(project, cluster):
    run = wide_run(project, "wide-run", WIDE_RANKS)
    shared = {"NSYSKIT_SLURM_SHARED_DIR": str(project)}
    result = invoke(project, cluster, "analyze", str(run), "--slurm", "--wait", "--slurm-max-parallel", "4",
                    timeout=JOB_TIMEOUT_S, **shared)  # fmt: skip
    assert result.returncode == 0, explain(cluster, result) + "\n".join(
        p.read_text()[-1500:] for p in sorted((run / "analysis-jobs").glob("*.out")))  # fmt: skip
    found = re.search(r"map: Slurm array job (\d+), 16 report\(s\) in 16 element\(s\), at most 4 at once", result.stderr)
    assert found, result.stderr
    array_id = found[1]
    merge_id = re.search(r"merge: Slurm job (\d+), after every map element succeeds", result.stderr)[1]
    assert "map: 16/16 parts (16 completed)" in result.stderr  # progress while waiting, parts done / total
    said = (result.stdout + result.stderr).replace("\n", "")
    assert said.count(f"✓ report: {run / 'report.html'}") == 1  # the command's; the merge log's own is left out
    # The array ran on the nodes: one log per element, 4 at once at most ('%4'), the merge after it (afterok).
    map_script = (run / "analysis-jobs" / "map.sbatch").read_text()
    assert "#SBATCH --array=0-15%4" in map_script and "--array-index \"$SLURM_ARRAY_TASK_ID\"" in map_script
    assert len(list((run / "analysis-jobs").glob(f"map-{array_id}_*.out"))) == WIDE_RANKS
    assert (run / "analysis-jobs" / f"merge-{merge_id}.out").is_file()
    assert "Findings" in result.stdout  # the merge's tables, printed from its log
    assert "export MPLCONFIGDIR" in (run / "analysis-jobs" / "merge.sbatch").read_text()
    assert "not a writable directory" not in (run / "analysis-jobs" / f"merge-{merge_id}.out").read_text()
    assert slurm_exit_code(cluster, merge_id) == ("COMPLETED", 0)

    # Exactly what 'invoke analyze' makes of the same folder, here.
    merged = json.loads((run / "analysis.json").read_text())
    (run / "analysis.json").rename(run / "merged.json")
    local = invoke(project, cluster, "analyze", str(run), timeout=300)
    assert local.returncode == 0, local.stderr[-2000:]
    assert merged == json.loads((run / "analysis.json").read_text())
    assert len(merged["sources"]) >= WIDE_RANKS


def test_analyze_slurm_past_the_tree_threshold_merges_in_two_levels_to_what_analyze_makes(project, cluster):
    """--tree-ranks below the run's ranks: a partial-merge array between the map and the merge (afterok both), each
    element merging a block of parts, and the final merge reading those: the same analysis.json as one merge here."""
    run = wide_run(project, "tree-run", 6)
    result = invoke(project, cluster, "analyze", str(run), "--slurm", "--wait", "--tree-ranks", "4",
                    timeout=JOB_TIMEOUT_S, NSYSKIT_SLURM_SHARED_DIR=str(project))  # fmt: skip
    jobs = run / "analysis-jobs"
    assert result.returncode == 0, explain(cluster, result) + "\n".join(
        p.read_text()[-1500:] for p in sorted(jobs.glob("*.out")))  # fmt: skip
    partial_id = re.search(r"partial merges: Slurm array job (\d+), .*after every map element succeeds", result.stderr)[1]
    merge_id = re.search(r"merge: Slurm job (\d+), after every partial merge succeeds", result.stderr)[1]
    assert "#SBATCH --array=0-1" in (jobs / "partial.sbatch").read_text()  # 6 reports past 4: two blocks
    assert sorted(p.name for p in jobs.glob(f"partial-{partial_id}_*.out")) == [
        f"partial-{partial_id}_0.out", f"partial-{partial_id}_1.out"]  # fmt: skip
    assert len(list((run / "analysis-partials").iterdir())) == 2  # one partial merge per block, on the shared folder
    assert str(run / "analysis-partials") in (jobs / "merge.sbatch").read_text()  # the merge takes the partials
    assert slurm_exit_code(cluster, partial_id) == ("COMPLETED", 0)
    assert slurm_exit_code(cluster, merge_id) == ("COMPLETED", 0)

    tree = json.loads((run / "analysis.json").read_text())
    (run / "analysis.json").rename(run / "tree.json")
    local = invoke(project, cluster, "analyze", str(run), timeout=300)
    assert local.returncode == 0, local.stderr[-2000:]
    assert tree == json.loads((run / "analysis.json").read_text())
    assert len(tree["sources"]) == 6


def test_analyze_slurm_names_a_failed_map_element_with_its_report_and_log(project, cluster):
    run = wide_run(project, "failing-map", 2)
    result = invoke(project, cluster, "analyze", str(run), "--slurm", "--wait", timeout=JOB_TIMEOUT_S,
                    NSYSKIT_SLURM_SHARED_DIR=str(project), NSYSKIT_SLURM_NSYSKIT="/opt/no-such-venv/bin/nsyskit")  # fmt: skip
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    array_id = re.search(r"Slurm array job (\d+) failed", error)[1]
    log = run / "analysis-jobs" / f"map-{array_id}_0.out"
    assert error.startswith("error: 2 of 2 map element(s)") and "element 0 (nsyskit_node_0_rank_0.sqlite) ended FAILED" in error
    assert f"log {log}: nsyskit: /opt/no-such-venv/bin/nsyskit is not a command" in error and "SLURM_NSYSKIT" in error
    assert f"invoke analyze-merge {run / 'analysis-parts'}" in error
    merge_id = re.search(r"merge: Slurm job (\d+)", result.stderr)[1]
    for _ in range(30):  # the merge afterok would keep pending for ever: it was cancelled
        if slurm_exit_code(cluster, merge_id)[0] == "CANCELLED":
            break
        time.sleep(1)
    assert slurm_exit_code(cluster, merge_id)[0] == "CANCELLED"
    assert not (run / "report.html").exists()



def test_analyze_slurm_in_pyxis_imports_first_and_a_failed_import_cancels_the_map_and_the_merge(project, cluster):
    # These nodes have no enroot (nor Pyxis): the import job, submitted before the map, fails; the map and the merge,
    # which afterok would keep pending for ever, are cancelled, and the error names the import's log and its last line.
    run = wide_run(project, "pyxis-without-enroot", 2)
    result = invoke(project, cluster, "analyze", str(run), "--slurm", "--wait", timeout=JOB_TIMEOUT_S,
                    NSYSKIT_SLURM_SHARED_DIR=str(project), NSYSKIT_SLURM_MODE="pyxis",
                    NSYSKIT_SLURM_CONTAINER_IMAGE="dockerd://nsyskit:latest")  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"image: \S+/enroot/dockerd\+nsyskit\+latest\.sqsh, imported once from dockerd://nsyskit:latest "
                     r"by the import job before the map \(Slurm job \d+", result.stderr), result.stderr  # fmt: skip
    error = result.stderr.strip().splitlines()[-1]
    import_id = re.search(r"the import of dockerd://nsyskit:latest \(Slurm job (\d+)\) ended FAILED, exit code 127", error)[1]
    assert f"log {run / 'analysis-jobs' / f'import-{import_id}.out'}: " in error and "enroot: command not found" in error
    assert "the map and the merge were cancelled" in error and "invoke enroot-credentials" in error
    map_id = re.search(r"map: Slurm array job (\d+)", result.stderr)[1]
    merge_id = re.search(r"merge: Slurm job (\d+)", result.stderr)[1]
    assert int(import_id) < int(map_id) < int(merge_id)  # submitted in that order
    for job_id in (map_id, merge_id):
        assert slurm_exit_code(cluster, job_id)[0] == "CANCELLED"
    assert not list((run / "analysis-jobs").glob("map-*.out")) and not (run / "report.html").exists()


# A stand-in NCCL test for the CPU nodes (no GPU, no nccl-tests build): every task prints its Slurm rank.
FAKE_NCCL_TEST = '#!/bin/sh\necho "# $(basename "$0") $*"\necho "#  task ${SLURM_PROCID:-?} of ${SLURM_NTASKS:-?}"\n'


def test_nccl_tests_run_one_srun_each_under_the_wrapper_and_collect_rank0s_tables(project, cluster):
    from nsyskit import targets
    from nsyskit.config import load_config

    for node in cluster.nodes:  # host mode: the test binaries are the nodes' own, on PATH
        for binary in ("all_reduce_perf", "alltoall_perf"):
            cluster.exec(node, f"printf '%s' {shlex.quote(FAKE_NCCL_TEST)} > /usr/local/bin/{binary} && chmod +x /usr/local/bin/{binary}")
    settings = {"SLURM_MODE": "host", "NODES": str(NODES), "PROCS_PER_NODE": str(TASKS_PER_NODE), "EFA_PER_NODE": "1",
                "SLURM_SUBMIT_PREFIX": cluster.submit_prefix, "SLURM_TIME_LIMIT": "15", "WORKLOAD": "nccl-tests",
                "NCCL_TESTS": "all_reduce_perf -b 8 -e 1M -f 2 -g 1; alltoall_perf -b 8 -e 1M"}  # fmt: skip
    cfg = load_config(project, profile="local-cpu", overrides=settings, environ={})
    # Through the library: 'invoke run' stops on GPUS_PER_NODE=0 before launching (these nodes have no GPU).
    target = targets.get("slurm")
    job = targets.rendered(target, cfg, project, None, False)
    target.submit(cfg, job)
    outcome = target.wait(cfg, job)
    assert outcome.exit_code == 0, "\n".join(outcome.log_tail) + cluster.diagnostics()
    run_dir = target.collect(cfg, project, job.job_dir.name)
    script = (job.job_dir / render.SCRIPT).read_text()
    assert script.count("\nsrun ") == 2 and script.count("--mpi=pmix") == 2  # SLURM_MPI left at its default

    for test, tag in (("all_reduce_perf", "all-reduce"), ("alltoall_perf", "alltoall")):
        names = sorted(p.name for p in run_dir.glob(f"nsyskit_{job.job_id}-{tag}_node_*.nsys-rep"))
        assert names == [f"nsyskit_{job.job_id}-{tag}_node_{r // TASKS_PER_NODE}_rank_{r}_{cluster.nodes[r // TASKS_PER_NODE]}.nsys-rep"
                         for r in range(NODES * TASKS_PER_NODE)]  # fmt: skip
        table = (run_dir / "nccl-tests" / f"{test}.out").read_text()
        assert table.splitlines()[1] == f"#  task 0 of {NODES * TASKS_PER_NODE}" and len(table.splitlines()) == 2
    run = json.loads((run_dir / "run.json").read_text())
    assert run["workload"] == "nccl-tests" and [t["name"] for t in run["nccl_tests"]] == ["all_reduce_perf", "alltoall_perf"]
    assert run["files"]["nccl_tests"] == ["nccl-tests/all_reduce_perf.out", "nccl-tests/alltoall_perf.out"]
    assert len(run["ranks"]) == 2 * NODES * TASKS_PER_NODE and all(r["exit_code"] == 0 for r in run["ranks"])


def test_a_users_ddp_script_runs_as_the_command_on_every_rank_with_its_window(project, cluster):
    # WORKLOAD=command in host mode: srun starts the user's plain DDP loop (no nsyskit in it) on 2 nodes x 2 tasks;
    # the wrapper gives each rank what torch.distributed reads from srun's variables, the step hook marks the window.
    script = project / "ddp_accum.py"
    shutil.copy2(ROOT / "tests" / "data" / "userscripts" / "ddp_accum.py", script)
    result = invoke(project, cluster, "deploy", "--slurm", "--wait", "--workload", "command", "--command",
                    f"python3 {script} --steps 6 --accum 2", timeout=JOB_TIMEOUT_S, NSYSKIT_PROFILE_STEPS="3-4")  # fmt: skip
    job_dir = last_job_dir(project)
    assert result.returncode == 0, explain(cluster, result, job_dir)
    log = next(job_dir.glob("slurm-*.out")).read_text()
    assert all(f"rank {rank} done after 6 steps" in log for rank in range(4)), log[-3000:]
    exports = sorted((job_dir / "reports").glob("*.sqlite"))
    assert len(exports) == 4
    for export in exports:
        assert list(step_times(ExportReader(export).nvtx_ranges()).columns["step"]) == [3, 4], export.name


def test_nsyskit_wrap_in_the_users_own_srun_line(project, cluster):
    # The user's own sbatch with one word added: 'srun nsyskit wrap -- python ...' on 2 nodes x 2 tasks. Each rank
    # finds itself from srun's variables; the folder gets every rank's report and one run.json (target wrap).
    shutil.copy2(ROOT / "tests" / "data" / "userscripts" / "ddp_accum.py", project / "ddp_accum.py")
    out = project / "wrapped"
    script = project / "mine.sbatch"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH --nodes={NODES}\n#SBATCH --ntasks-per-node={TASKS_PER_NODE}\n#SBATCH --output={project}/mine-%j.out\n"
        'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)" MASTER_PORT=29511\n'
        f"srun --mpi=pmix nsyskit wrap --out {out} --profile-steps 3-4 --trace nvtx,osrt -- "
        f"python3 {project}/ddp_accum.py --steps 6\n"
    )
    submitted = cluster.exec(cluster.controller, f"sbatch --wait {script}", check=False)
    job_id = re.search(r"Submitted batch job (\d+)", submitted.stdout)[1]
    log = (project / f"mine-{job_id}.out").read_text()
    assert submitted.returncode == 0, log[-3000:] + cluster.diagnostics()
    record = runrecord.read_run(str(out))
    assert (record.target, record.launcher, record.run_id) == ("wrap", "srun", job_id)  # the run id: SLURM_JOB_ID
    assert sorted((s.rank, s.node) for s in record.ranks) == [(0, 0), (1, 0), (2, 1), (3, 1)]
    exports = sorted(out.glob(f"{job_id}_node*_rank*.sqlite"))
    assert len(exports) == 4
    for export in exports:
        assert list(step_times(ExportReader(export).nvtx_ranges()).columns["step"]) == [3, 4], export.name
