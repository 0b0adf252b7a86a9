"""NCCL logs as they really come: each fact of the real logs in ../shared/real-data/nccl-logs gets a synthetic fixture
written here (other hosts, ranks, sizes) and a check on the real file itself (expected values read off the file with
grep, as each comment says)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nsyskit.nccllog import Window, analyze, resolve_jobs, resolve_logs

ROOT = Path(__file__).resolve().parents[2]
REAL = (ROOT.parent / "shared" / "real-data" / "nccl-logs").resolve()
DTYPE_BYTES = {7: 4, 9: 2, 6: 2, 4: 8, 1: 1}


def real(name: str) -> Path:
    """A real log of ../shared/real-data/nccl-logs (named by its number prefix)."""
    (path,) = REAL.glob(f"{name}-*.log")
    return path


def coll(
    host: str, pid: int, dev: int, op: str, count: int, dtype: int, comm: str, nranks: int, op_count: int = 1
) -> str:
    """One NCCL collective INFO line as NCCL 2.x prints it."""
    return (
        f"{host}:{pid}:{pid + 7} [{dev}] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x7f{op_count:08x} recvbuff "
        f"0x7e{op_count:08x} count {count} datatype {dtype} op 0 root 0 comm {comm} [nranks={nranks}] stream 0x55aa"
    )


def gpus(report) -> dict[str, int]:
    """Calls per GPU of the per-GPU table."""
    return {row["gpu"]: row["calls"] for row in report.histogram_per_gpu}


def ops(report) -> dict[str, tuple[int, int]]:
    """op -> (calls, total bytes)."""
    return {row["op"]: (row["calls"], row["total_bytes"]) for row in report.per_op}


# --- line prefixes ------------------------------------------------------------------------------------------------

PREFIXES = {
    "kubectl logs --timestamps": "2025-03-04T05:06:07.123456789Z ",
    "CloudWatch console copy": "  | 2024-12-04T07:19:43.478Z | ",
    "Loki / Fluent Bit (CRI)": "2025-03-04T05:06:07.000000001Z stdout F ",
    "Python logging": "2025-01-02 10:11:12,851 - INFO - ",
    "Python logging with a logger": "2025-01-02 10:11:12,851 - torch.distributed - INFO - ",
    "Ray worker": "(RayTrainWorker pid=615, ip=10.72.7.6) ",
    "Ray actor with a name": "(TorchTrainer_3f2a pid=22754, ip=10.72.12.6) ",
    "srun -l under kubectl timestamps": "2025-03-04T05:06:07Z 3: ",
}


@pytest.mark.parametrize("label", PREFIXES)
def test_launcher_prefixes(tmp_path, label):
    prefix = PREFIXES[label]
    rng = random.Random(label)
    hosts = [f"{rng.choice(['gpu', 'node', '9h100'])}-{n}" for n in range(2)]
    lines, expected = [], {}
    for host in hosts:
        for dev in range(3):
            calls = rng.randrange(1, 5)
            expected[f"{host}[{dev}]"] = calls
            lines.append(f"{prefix}{host}:{100 + dev}:{200 + dev} [{dev}] NCCL INFO Using network IB")
            lines += [
                prefix + coll(host, 100 + dev, dev, "AllReduce", 1 << rng.randrange(4, 20), 7, "0xc1", 6, k)
                for k in range(calls)
            ]
    log = tmp_path / "prefixed.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([log])
    assert gpus(report) == expected and report.init["network"] == "IB"
    assert report.lines["unrecognized_nccl"] == 0 and report.lines["collective"] == sum(expected.values())


def test_real_ray_prefix():
    # 07: grep -c opCount -> 4; the [dev] and host of each line: fqztx [2] once, hzhzd [3] once, srrss [5] twice
    report = analyze([real("07")])
    assert report.lines["collective"] == 4 and report.lines["unrecognized_nccl"] == 0
    worker = "r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-"
    assert gpus(report) == {f"{worker}fqztx[2]": 1, f"{worker}hzhzd[3]": 1, f"{worker}srrss[5]": 2}
    assert report.init["nranks"] == 128


def test_real_cloudwatch_prefix():
    # 12: grep -o 'NCCL INFO' | wc -l -> 21, all read (11 behind '  | <ISO>Z | ', 10 bare); 'Using network AWS Libfabric'
    report = analyze([real("12")])
    assert report.lines["nccl_info"] == 21 and report.lines["unrecognized_nccl"] == 0
    assert report.init["network"] == "AWS Libfabric" and report.init["ofi_provider"] == "efa"
    assert report.init["gpus_seen"] == 6  # grep -o '\[[0-9]\] NCCL' | sort -u: [0] [2] [3] [5] [6] [7]


def test_unreadable_lines_are_still_counted_and_shown(tmp_path):
    log = tmp_path / "odd.log"
    log.write_text(
        coll("h1", 5, 0, "AllReduce", 64, 7, "0x1", 2) + "\n"
        "h1:5:5 NCCL INFO no device field here\n"  # an NCCL INFO line without 'host:pid:tid [dev]'
    )
    report = analyze([log])
    assert report.lines["collective"] == 1 and report.lines["unrecognized_nccl"] == 1
    assert report.examples["unrecognized"] == [f"{log}:2: h1:5:5 NCCL INFO no device field here"]


# --- RCCL ---------------------------------------------------------------------------------------------------------


def test_rccl_acc_field_and_nil_buffers(tmp_path):
    host = "mi300x-node-3"
    lines = []
    for dev in range(4):
        pid = 8000 + dev
        for k, (op, count) in enumerate((("ReduceScatter", 1 << 20), ("AllGather", 1 << 22), ("AllReduce", 333))):
            lines.append(
                f"{host}:{pid}:{pid + 9} [{dev}] NCCL INFO {op}: opCount {k:x} sendbuff 0x7f7a{k}400000 recvbuff "
                f"0x7f84{k}9000000 acc (nil) count {count} datatype 9 op 0 root 0 comm 0xab{dev} [nranks=8] stream 0x1"
                + (" task 3 globalrank 5" if dev == 2 else "")  # later RCCL appends fields: ignored
            )
        lines.append(  # p2p: one buffer is (nil)
            f"{host}:{pid}:{pid + 9} [{dev}] NCCL INFO Send: opCount 9 sendbuff (nil) recvbuff 0x7f00 acc (nil) count 4096 "
            f"datatype 7 op 0 root {(dev + 1) % 4} comm 0xab{dev} [nranks=8] stream 0x1"
        )
        lines.append(
            f"{host}:{pid}:{pid + 9} [{dev}] NCCL INFO Recv: opCount 9 sendbuff (nil) recvbuff (nil) count 4096 "
            f"datatype 7 op 0 root {(dev + 3) % 4} comm 0xab{dev} [nranks=8] stream 0x1"
        )
    lines.append(  # cut short after the datatype, as in a console copy: what was sent is still known
        f"{host}:8000:8009 [0] NCCL INFO AllReduce: opCount a sendbuff 0x1 recvbuff 0x2 acc (nil) count 100 datatype 9 op 0 root 0 c"
    )
    log = tmp_path / "rccl.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([log])
    assert ops(report) == {
        "ReduceScatter": (4, 4 * (1 << 21)), "AllGather": (4, 4 * (1 << 23)), "AllReduce": (5, 4 * 666 + 200),
        "Send": (4, 4 * 16384), "Recv": (4, 4 * 16384),
    }  # fmt: skip
    assert report.lines["garbled_collective"] == 0 and gpus(report) == {f"{host}[{d}]": 5 + (d == 0) for d in range(4)}


def test_real_rccl_acc_field():
    # 20: two RCCL lines (grep -c opCount -> 2), each 'acc (nil) count 106956800 datatype 9' (bf16), cut after 'root 0'
    report = analyze([real("20")])
    assert ops(report) == {"ReduceScatter": (1, 106956800 * 2), "AllGather": (1, 106956800 * 2)}
    assert gpus(report) == {"cv350-zts-gtu-f15-18[4]": 1, "cv350-zts-gtu-f15-18[0]": 1}
    assert report.lines["garbled_collective"] == 0


# --- NCCL version printed bare on stdout (NCCL <= 2.21) --------------------------------------------------------------


@pytest.mark.parametrize(
    "before", ["", "[1,0]<stdout>:", "0: ", "2019-04-18 02:54:05.553586: ", "2025-03-04T05:06:07.1Z stdout F "]
)
def test_bare_nccl_version_line(tmp_path, before):
    log = tmp_path / "stdout.log"
    log.write_text(
        "Epoch 0 starting\n"
        f"{before}NCCL version 2.18.5+cuda12.2\n"
        + "\n".join(coll("trn-a", 77, d, "Broadcast", 10 + d, 1, f"0x{d}", 2) for d in range(2))
        + f"\n{before}NCCL version 2.99.0+cuda99.0 appears later and is not read (init is over)\n"
    )
    report = analyze([log])
    assert report.init["nccl_version"] == "2.18.5+cuda12.2" and report.init["cuda_version"] == "12.2"
    assert report.init["nccl_versions"] == ["2.18.5+cuda12.2"] and report.lines["collective"] == 2


def test_real_bare_version():
    # 06: line 5 is 'NCCL version 2.4.2+cuda9.0' without 'NCCL INFO'
    init = analyze([real("06")]).init
    assert init["nccl_version"] == "2.4.2+cuda9.0" and init["cuda_version"] == "9.0"


# --- old init forms -----------------------------------------------------------------------------------------------


def test_old_init_forms(tmp_path):
    host = "dgx1-07"
    lines = [f"{host}:300:301 [0] NCCL INFO Using internal Network IB", f"{host}:300:301 [0] NCCL INFO nranks 8"]
    for rank in range(8):
        pid = 300 + rank
        lines.append(
            f"{host}:{pid}:{pid + 1} [{rank}] NCCL INFO comm 0x7ef9{rank:x} rank {rank} nranks 8 cudaDev {rank} nvmlDev {rank}"
        )
    lines += [
        f"{host}:300:301 [0] NCCL INFO Ring 00 : 0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> 0",
        f"{host}:300:301 [0] NCCL INFO Ring 01 : 0 -> 7 -> 6 -> 5 -> 4 -> 3 -> 2 -> 1 -> 0",
        f"{host}:300:301 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC",
        f"{host}:301:302 [1] NCCL INFO Ring 00 : 1[1] -> 2[2] via direct shared memory",
        f"{host}:300:301 [0] NCCL INFO Using 256 threads, Min Comp Cap 7, Trees disabled",
    ]
    log = tmp_path / "nccl-2.3.log"
    log.write_text("\n".join(lines) + "\n")
    init = analyze([log]).init
    assert init["network"] == "IB" and init["nranks"] == 8 and init["rings"] == 2
    assert init["connections"] == {"P2P": 1, "direct shared memory": 1}


def test_nranks_on_init_start_and_complete_and_network_from_via(tmp_path):
    lines = []
    for node, host in enumerate(("ip-10-0-1-5", "ip-10-0-2-9")):
        for dev in range(2):
            rank, pid = 2 * node + dev, 900 + dev
            lines += [
                f"{host}:{pid}:{pid + 50} [{dev}] NCCL INFO ncclCommInitRank comm 0x5{rank} rank {rank} nranks 4 cudaDev {dev} nvmlDev {dev} busId 1{dev}0 commId 0x9 - Init START",
                f"{host}:{pid}:{pid + 50} [{dev}] NCCL INFO Channel 00/0 : {rank}[{dev}] -> {(rank + 1) % 4}[{(dev + 1) % 2}] [send] via NET/Socket/0",
                f"{host}:{pid}:{pid + 50} [{dev}] NCCL INFO comm 0x5{rank} rank {rank} nranks 4 cudaDev {dev} busId 1{dev}0 - Init COMPLETE",
            ]
    log = tmp_path / "two-nodes.log"
    log.write_text("\n".join(lines) + "\n")
    init = analyze([log]).init
    assert init["nranks"] == 4 and init["init_complete"] == 4 and init["network"] == "Socket"
    assert init["connections"] == {"NET/Socket": 4} and init["nnodes_from_hostnames"] == 2


def test_real_old_init_forms():
    # 06 (NCCL 2.4.2): 'nranks 2', 'comm .. rank 0 nranks 2 cudaDev 1', 'Channel 00 :    0   1', two 'Ring 00 : .. via P2P/direct pointer'
    init = analyze([real("06")]).init
    assert init["nranks"] == 2 and init["rings"] == 1 and init["connections"] == {"P2P": 2}
    # 25 (NCCL 2.7.8): network only in 'via NET/AWS Libfabric/0' (grep -c 'via NET' -> 2, 'via P2P' -> 1);
    # grep -c 'Init COMPLETE' -> 3, each 'nranks 16'
    init = analyze([real("25")]).init
    assert init["network"] == "AWS Libfabric" and init["connections"] == {"NET/AWS Libfabric": 2, "P2P": 1}
    assert init["init_complete"] == 3 and init["nranks"] == 16


# --- another program's output on the same physical line ----------------------------------------------------------


def test_nccl_lines_behind_table_rows(tmp_path):
    rng = random.Random(5)
    host, pid = "a100-node12", 64904
    lines = [f"{host}:{pid}:{pid} [0] NCCL INFO NCCL version 2.27.7+cuda13.0"]
    expected = {0: 0, 1: 0}
    for k in range(30):
        dev = k % 2
        line = coll(host, pid, dev, "AllReduce", 1 << (10 + k % 8), 7, f"0x{dev}", 2, k)
        row = rng.choice(
            ["", f"  {8 << k % 8:>10}  {2 << k % 8:>10}     float     sum      -1", "    83.33  100.66  100.66      0"]
        )
        lines.append(row + line)
        expected[dev] += 1
    log = tmp_path / "all_reduce_perf.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([log])
    assert gpus(report) == {f"{host}[0]": expected[0], f"{host}[1]": expected[1]}
    assert report.init["nnodes_from_hostnames"] == 1 and report.lines["unrecognized_nccl"] == 0


def test_real_nccltests_merged_lines():
    # 01: grep -c opCount -> 990, of which 22 sit behind a table row ('grep -c "^ *[0-9].*NCCL INFO"'); every
    # collective names comm 0x55b6aa64a990 (rank 0, cudaDev 0) or 0x55b6aa754530 (rank 1, cudaDev 1): 495 each
    # (grep -o 'comm 0x[0-9a-f]*' | sort | uniq -c), though the logging thread says [1] on 968 of them
    report = analyze([real("01")])
    assert report.lines["collective"] == 990 and report.lines["unrecognized_nccl"] == 0
    assert gpus(report) == {"mew0[0]": 495, "mew0[1]": 495}
    assert report.init["nnodes_from_hostnames"] == 1  # only mew0: no '0mew0' or '-1mew0'
    assert report.init["nccl_version"] == "2.27.7+cuda13.0" and report.init["net_plugin"] == "none"
    assert report.init["net_transports"] == ["IB"] and report.init["connections"] == {"P2P": 48}
    assert report.init["connected"] == {"to proxy": 96, "all rings": 2}  # summarized: no line-by-line dump


# --- per-communicator attribution ----------------------------------------------------------------------------------


def test_one_process_driving_several_gpus(tmp_path):
    """nccl-tests -g 4: one thread logs every GPU's calls with its own [dev]; the comm says which GPU it was."""
    host, pid = "h100-x8-2", 4242
    lines = [
        f"{host}:{pid}:{pid + 1} [{d}] NCCL INFO ncclCommInitAll comm 0xc0{d} rank {d} nranks 4 cudaDev {d} nvmlDev {d} busId {d}000 commId 0x1 - Init START"
        for d in range(4)
    ]
    calls = {0: 3, 1: 5, 2: 7, 3: 11}
    for d, n in calls.items():
        lines += [coll(host, pid, 0, "AllReduce", 1024, 7, f"0xc0{d}", 4, k) for k in range(n)]
    lines.append(coll("other-host", pid, 0, "AllReduce", 1024, 7, "0xc03", 4))  # same pid and comm, other host
    log = tmp_path / "g4.log"
    log.write_text("\n".join(lines) + "\n")
    assert gpus(analyze([log])) == {**{f"{host}[{d}]": n for d, n in calls.items()}, "other-host[0]": 1}


# --- init facts never show an error as a value -----------------------------------------------------------------------


def test_plugin_transports_and_connections_summary(tmp_path):
    node = "p5-node"
    lines = [
        f"{node}:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
        f"{node}:1:1 [0] NCCL INFO NET/IB : No device found.",
        f"{node}:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        f"{node}:1:1 [0] NCCL INFO Using network Socket",
    ]
    lines += [
        f"{node}:1:1 [0] NCCL INFO Channel {c:02d}/0 : 0[{g}] -> 1[{(g + 1) % 8}] via {via}"
        for c in range(16)
        for g, via in enumerate(("P2P/CUMEM/read", "SHM/direct/direct", "NET/Socket/0", "P2P/IPC"))
    ]
    log = tmp_path / "init.log"
    log.write_text("\n".join(lines) + "\n")
    init = analyze([log]).init
    assert init["net_plugin"] == "none" and init["net_plugins"] == []
    assert init["net_transports"] == ["Socket"]  # not 'Plugin', not IB after 'No device found'
    assert init["connections"] == {"P2P": 32, "SHM": 16, "NET/Socket": 16}

    loaded = tmp_path / "loaded.log"
    loaded.write_text(
        f"{node}:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)\n"
        f"{node}:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
    )
    init = analyze([loaded]).init
    assert init["net_plugin"] == "NCCL RDMA Plugin v8" and init["net_transports"] == ["IB"]


def test_real_init_facts_without_errors():
    # 32: 'NET/OFI Initializing aws-ofi-nccl 1.9.1-aws' (grep -c -> 3)
    assert analyze([real("32")]).init["net_plugin"] == "aws-ofi-nccl 1.9.1-aws"
    # 06: 'NET/Plugin : No plugin found (libnccl-net.so).', 'NET/Socket : Using ..', 'NET/IB : Using ..'
    init = analyze([real("06")]).init
    assert init["net_plugin"] == "none" and init["net_transports"] == ["Socket", "IB"]


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
    jobs = resolve_jobs([str(REAL)])  # a folder that is no run folder: each file is its own job
    assert set(jobs.values()) == {str(p) for p in jobs} and len(jobs) == len(list(REAL.glob("*.log")))
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
    paths = sorted(REAL.glob("*.log"))
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
    from nsyskit.nccllog import parallel

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
