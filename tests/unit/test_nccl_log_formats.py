"""NCCL logs as they really come: each fact of the real logs in ../shared/real-data/nccl-logs gets a synthetic fixture
written here (other hosts, ranks, sizes) and a check on the real file itself (expected values read off the file with
grep, as each comment says)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from nccl_real import coll, gpus, ops, real  # tests/unit is on sys.path

from nsyskit.nccllog import analyze

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


# --- the kit's own logs from a real GPU (tests/data/real/nccl-logs: NCCL 2.28.9, CUDA 13, one H200) -----------------

KIT_LOGS = Path(__file__).resolve().parents[1] / "data" / "real" / "nccl-logs"


@pytest.mark.parametrize("name", ["h200_all_reduce_perf_nccl2.28.9.nccl.log.gz", "h200_gpt2_ddp_nccl2.28.9.nccl.log.gz"])
def test_real_nccl_2_28_logs_count_every_collective_and_the_versions(name):
    path = KIT_LOGS / name
    text = gzip.decompress(path.read_bytes()).decode()
    report = analyze([path])
    # grep -c 'NCCL INFO AllReduce: opCount' : 1,286 (all_reduce_perf, 29 sizes) and 639 (the GPT-2 run)
    assert ops(report)["AllReduce"][0] == text.count("NCCL INFO AllReduce: opCount") > 600
    # 'NCCL version 2.28.9+cuda13.0', 'cudaDriverVersion 13000'; every call says [nranks=1]
    assert report.init["nccl_version"] == "2.28.9+cuda13.0" and "[nranks=2" not in text
    assert report.init["nranks"] == 1
