"""NCCL logs as they really come, per job: step lines, each file read once, several cores giving what one gives
(each fact of the real logs in ../shared/real-data/nccl-logs with a synthetic fixture and a check on the real file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nccl_real import ROOT, coll, gpus, real, real_folder  # tests/unit is on sys.path

from nsyskit.nccllog import Window, analyze, resolve_jobs, resolve_logs

# --- step lines ---------------------------------------------------------------------------------------------------


def test_legacy_megatron_tflops(tmp_path):
    log = tmp_path / "megatron.log"
    log.write_text(
        "".join(
            f" iteration {i:>8}/{100:>8} | consumed samples: {i * 256:>12} | elapsed time per iteration (ms): {300 + i:.1f} | "
            f"learning rate: 1.0E-04 | global batch size:   256 | samples per second: 835.199 | TFLOPs: {30 + i:.2f} |\n"
            for i in range(1, 5)
        )
    )
    steps = analyze([log]).steps
    assert steps["avg_tflops_per_gpu"] == pytest.approx(32.5) and steps["avg_step_time_s"] == pytest.approx(0.3025)


def test_real_legacy_tflops():
    # 22: one iteration line: 'elapsed time per iteration (ms): 306.5', 'TFLOPs: 33.65'
    steps = analyze([real("22")]).steps
    assert steps["avg_tflops_per_gpu"] == 33.65 and steps["avg_step_time_s"] == pytest.approx(0.3065)


def _megatron(path: Path, ms: float, tflops: float, iterations: range) -> Path:
    path.write_text(
        "".join(
            f" [2025-01-01 00:00:00] iteration {i:>6}/{1000:>6} | elapsed time per iteration (ms): {ms:.1f} | "
            f"throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |\n"
            for i in iterations
        )
    )
    return path


def test_step_statistics_are_per_job(tmp_path):
    fast = _megatron(tmp_path / "job-fast.log", 100.0, 400.0, range(1, 11))
    slow = _megatron(tmp_path / "job-slow.log", 900.0, 50.0, range(1, 4))
    steps = analyze([fast, slow]).steps
    assert steps["avg_step_time_s"] is None and steps["step_lines"] == 13  # never the mean of both jobs
    assert [(j["job"], j["avg_step_time_s"], j["avg_tflops_per_gpu"]) for j in steps["jobs"]] == [
        (str(fast), pytest.approx(0.1), 400.0), (str(slow), pytest.approx(0.9), 50.0)
    ]  # fmt: skip
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "run.json").write_text("{}")  # a run folder: its rank logs are one job
    _megatron(run / "rank0.log", 200.0, 100.0, range(1, 3))
    _megatron(run / "rank8.log", 400.0, 300.0, range(1, 3))
    jobs = resolve_jobs([str(run)])
    steps = analyze(list(jobs), jobs={str(p): j for p, j in jobs.items()}).steps
    assert steps["avg_step_time_s"] == pytest.approx(0.3) and steps["jobs"][0]["job"] == str(run)
    assert steps["jobs"][0]["files"] == 2


def test_real_logs_of_two_jobs_are_not_averaged():
    # 22: one step of 306.5 ms at 33.65 TFLOPs; 29: three steps of 5361.6, 5470.7, 5829.9 ms at 243.6, 238.7, 224.0
    steps = analyze([real("22"), real("29")]).steps
    assert steps["avg_step_time_s"] is None and len(steps["jobs"]) == 2
    jobs = resolve_jobs([str(real_folder())])  # a folder that is no run folder: each file is its own job
    assert set(jobs.values()) == {str(p) for p in jobs} and len(jobs) == len(list(real_folder().glob("*.log")))
    assert [round(j["avg_tflops_per_gpu"], 4) for j in steps["jobs"]] == [33.65, round((243.6 + 238.7 + 224.0) / 3, 4)]


# --- each file once ----------------------------------------------------------------------------------------------


def test_same_file_twice_symlinks_and_a_symlink_loop(tmp_path):
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    target = logs / "sub" / "rank0.log"
    target.write_text("\n".join(coll("n1", 1, 0, "AllGather", 8, 7, "0x1", 2, k) for k in range(3)) + "\n")
    (logs / "alias.log").symlink_to(target)
    (logs / "sub" / "loop").symlink_to(logs, target_is_directory=True)  # logs/sub/loop/sub/loop/...
    for arguments in (
        [f"{target},{target}"], [str(target), str(logs / "alias.log")], [str(logs)], [f"{logs}/**/*.log"],
        [f"{logs}/**/*.log,{target}"],
    ):  # fmt: skip
        assert len(resolve_logs(arguments)) == 1, arguments
        assert analyze(resolve_logs(arguments)).lines["collective"] == 3


def test_real_file_given_twice():
    # 07 holds 4 collective lines (grep -c opCount): named twice, still 4
    paths = resolve_logs([f"{real('07')},{real('07')}"])
    assert analyze(paths).lines["collective"] == 4


# --- several processes give what one gives --------------------------------------------------------------------------


def test_several_files_on_several_cores_match_one_core():
    paths = sorted(real_folder().glob("*.log"))
    one = analyze(paths, workers=1).to_dict()
    several = analyze(paths, workers=3).to_dict()
    one["seconds"] = several["seconds"] = 0
    assert several == one and one["files"] == [str(p) for p in paths]
    window = Window(lines=(1, 2000))
    one, several = analyze(paths, window, workers=1).to_dict(), analyze(paths, window, workers=2).to_dict()
    one["seconds"] = several["seconds"] = 0
    assert several == one


def test_lines_cut_inside_a_value_do_not_swallow_the_next_line(tmp_path):
    full = [coll("gb200-1", 7, d, "AllReduce", 512 * (d + 1), 7, "0x5", 4, d) for d in range(4)]
    cut = [
        "gb200-1:7:7 [0] NCCL INFO AllReduce: opCount 1",  # inside the opCount value
        "gb200-1:7:7 [0] NCCL INFO AllReduce: opCount 2 sendbuff 0x7f",  # inside the sendbuff value
        "gb200-1:7:7 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f recvbuff 0x7e",  # inside the recvbuff value
        "gb200-1:7:7 [0] NCCL INFO AllReduce: opCount 4 sendbuff 0x7f recvbuff 0x7e cou",  # inside 'count'
    ]
    log = tmp_path / "cut.log"
    log.write_text("\n".join(line for pair in zip(cut, full, strict=True) for line in pair) + "\n")
    report = analyze([log])
    assert gpus(report) == {f"gb200-1[{d}]": 1 for d in range(4)} and report.lines["collective"] == 4
    assert report.lines["garbled_collective"] == 4 and report.lines["unrecognized_nccl"] == 0


def test_lines_without_spaces_between_nccl_lines(tmp_path):
    """CloudWatch copies put the timestamp on a line of its own (12-cloudwatch-ofi-efa-p4d.log); separators too."""
    lines = []
    for k in range(6):
        lines += [
            f"2024-12-04T07:19:43.{480 + k}Z",
            "=" * (k * 7),  # an empty line, then lines of '=' only
            coll(f"algo-{k % 3}", 18560 + k, k, "AllGather", 4096 << k, 9, f"0x{k}", 8, k),
        ]
    log = tmp_path / "cloudwatch.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([log])
    assert gpus(report) == {f"algo-{k % 3}[{k}]": 1 for k in range(6)}
    assert report.init["nnodes_from_hostnames"] == 3 and report.lines["unrecognized_nccl"] == 0


def test_space_less_line_before_a_tagged_nccl_line(tmp_path):
    log = tmp_path / "mpirun.log"
    log.write_text(
        "".join(
            f"-----\n[1,{k}]<stdout>:" + coll("worker-3", 27 + k, k, "AllReduce", 64, 7, f"0x{k}", 2) + "\n"
            for k in range(2)
        )
    )
    assert gpus(analyze([log])) == {"worker-3[0]": 1, "worker-3[1]": 1}


def test_a_big_file_split_over_cores_counts_as_read_in_one_pass(tmp_path, monkeypatch):
    from nsyskit.nccllog.scan import parallel

    monkeypatch.setattr(parallel, "PART_MIN_BYTES", 2000)  # parts of a few kB: the fixtures are small
    data = ROOT / "tests" / "data" / "nccl"
    log = tmp_path / "big.log"
    log.write_bytes(
        b"".join((data / name).read_bytes() for name in ("nemo_4gpu.log", "garbled.log", "kit_mpirun.log")) * 3
    )
    lines = log.read_text(errors="replace").splitlines()  # garbled.log holds binary junk
    for paths in ([log], [log, real("01"), real("22")]):
        one = analyze(paths, workers=1).to_dict()
        split = analyze(paths, workers=4).to_dict()
        one["seconds"] = split["seconds"] = 0
        examples = split.pop("examples")
        one.pop("examples")
        assert split == one
        for example in (e for kept in examples.values() for e in kept if e.startswith(f"{log}:")):
            number, text = example[len(f"{log}:") :].split(": ", 1)  # the file's line number, not the part's
            assert lines[int(number) - 1].startswith(text[:40]), example
    assert len(parallel.plan([log], Window(), 4)) == 4 and len(parallel.plan([log], Window(steps=(1, 2)), 4)) == 1
