"""invoke nccl-log's library on fixtures written from NCCL's documented line formats; expected values by hand."""

from __future__ import annotations

import pytest
from nccl_real import KB, KIT, MB, NEMO, RANK_A, RANK_B, SRUN  # tests/unit is on sys.path

from nsyskit.nccllog import Window, analyze
from nsyskit.nccllog.scan.dtypes import DATATYPES, algorithm_name, protocol_name, size_bucket
from nsyskit.nccllog.scan.steps import parse_step_line


def by(rows: list[dict], key: str) -> dict:
    return {row[key]: row for row in rows}


def hist(rows: list[dict], key: str) -> dict:
    return {row[key]: (row["<64KB"], row["64KB-1MB"], row["1MB-16MB"], row[">16MB"]) for row in rows}


# --- the tables of NCCL's enums ---------------------------------------------------------------------------------


def test_datatype_table_is_ncclDataType_t_of_nccl_2_28():
    # nccl.h: ncclInt8=0 ncclUint8=1 ncclInt32=2 ncclUint32=3 ncclInt64=4 ncclUint64=5 ncclFloat16=6 ncclFloat32=7
    # ncclFloat64=8 ncclBfloat16=9 ncclFloat8e4m3=10 ncclFloat8e5m2=11 (ncclNumTypes=12)
    assert DATATYPES == {
        0: ("int8", 1), 1: ("uint8", 1), 2: ("int32", 4), 3: ("uint32", 4), 4: ("int64", 8), 5: ("uint64", 8),
        6: ("fp16", 2), 7: ("fp32", 4), 8: ("fp64", 8), 9: ("bf16", 2), 10: ("fp8_e4m3", 1), 11: ("fp8_e5m2", 1),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("nbytes", "bucket"),
    [(0, "<64KB"), (65535, "<64KB"), (65536, "64KB-1MB"), (1048575, "64KB-1MB"), (1048576, "1MB-16MB"),
     (16777215, "1MB-16MB"), (16777216, ">16MB"), (1 << 40, ">16MB")],
)  # fmt: skip
def test_size_buckets_have_exclusive_upper_bounds(nbytes, bucket):
    assert size_bucket(nbytes) == bucket


def test_algorithm_and_protocol_names_from_numbers_and_words():
    assert [algorithm_name(t) for t in ("0", "1", "4", "6", "RING", "Tree", "NVLS", "9")] == [
        "Tree",
        "Ring",
        "NVLS",
        "PAT",
        "Ring",
        "Tree",
        "NVLS",
        "algo9",
    ]
    assert [protocol_name(t) for t in ("0", "1", "2", "SIMPLE", "LL128")] == [
        "LL",
        "LL128",
        "Simple",
        "Simple",
        "LL128",
    ]


# --- step lines -------------------------------------------------------------------------------------------------


def test_step_lines_of_nemo_megatron_and_the_kit():
    nemo = parse_step_line(
        "Training epoch 0, iteration 45/99 | lr: 1e-4 | train_step_timing in s: 1.25 | TFLOPS_per_GPU: 412.5"
    )
    assert (nemo.fmt, nemo.iteration, nemo.total, nemo.step_time_s, nemo.tflops_per_gpu) == (
        "nemo",
        45,
        99,
        1.25,
        412.5,
    )
    megatron = parse_step_line(" [2024-04-06 02:59:36] iteration       43/     100 | consumed samples:         5504 | "
                               "elapsed time per iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 |")  # fmt: skip
    assert (megatron.fmt, megatron.iteration, megatron.total, megatron.tflops_per_gpu) == ("megatron", 43, 100, 239.8)
    assert megatron.step_time_s == pytest.approx(5.4449)
    kit = parse_step_line("[rank 0] step 7/20 loss=10.8125 step_ms=123.5 tokens_per_s=2409")
    assert (kit.fmt, kit.iteration, kit.total, kit.step_time_s, kit.tflops_per_gpu) == ("nsyskit", 7, 20, 0.1235, None)
    assert parse_step_line("iteration 3/10 of the data loader warm-up") is None
    assert parse_step_line("NeMo: Training epoch 0, iteration 5/10 | reduced_train_loss: 2.1").step_time_s is None


# --- NeMo stdout: 2 nodes x 2 GPUs, INIT/NET/GRAPH/TUNING/ENV lines, four NeMo step lines ------------------------


def test_nemo_whole_log_per_op_stats():
    report = analyze([NEMO])
    ops = by(report.per_op, "op")
    # AllReduce: 16 x 262144 bf16 (512 KiB) + 4 x 8388608 bf16 (16 MiB) + 4 x 1 int64 (8 B); the truncated line,
    # the datatype-12 call and the count-0 call are left out, as the awk scripts leave them out.
    assert ops["AllReduce"] == {"op": "AllReduce", "calls": 24, "min_bytes": 8, "avg_bytes": pytest.approx(75497504 / 24),
                                "max_bytes": 16 * MB, "total_bytes": 16 * 512 * KB + 4 * 16 * MB + 4 * 8}  # fmt: skip
    assert ops["Broadcast"] == {
        "op": "Broadcast",
        "calls": 4,
        "min_bytes": 4000,
        "avg_bytes": 4000,
        "max_bytes": 4000,
        "total_bytes": 16000,
    }
    assert ops["AllGather"]["total_bytes"] == 4 * 64 * KB
    assert ops["ReduceScatter"] == {
        "op": "ReduceScatter",
        "calls": 4,
        "min_bytes": 10,
        "avg_bytes": 10,
        "max_bytes": 10,
        "total_bytes": 40,
    }
    assert ops["Send"]["total_bytes"] == ops["Recv"]["total_bytes"] == 8 * MB
    assert [row["op"] for row in report.per_op][0] == "AllReduce"  # largest total first


def test_nemo_histograms_per_op_and_per_gpu():
    report = analyze([NEMO])
    assert hist(report.histogram_per_op, "op") == {
        "AllReduce": (4, 16, 0, 4), "AllGather": (0, 4, 0, 0), "Broadcast": (4, 0, 0, 0),
        "ReduceScatter": (4, 0, 0, 0), "Send": (0, 0, 1, 0), "Recv": (0, 0, 1, 0),
    }  # fmt: skip
    # per GPU: Broadcast, fp8 ReduceScatter and int64 AllReduce are < 64KB; four 512 KiB AllReduce and the 64 KiB
    # AllGather are 64KB-1MB; the 16 MiB AllReduce is >16MB; Send (nodeA[1]) and Recv (nodeB[0]) are 1MB-16MB.
    assert hist(report.histogram_per_gpu, "gpu") == {
        "nodeA[0]": (3, 5, 0, 1), "nodeA[1]": (3, 5, 1, 1), "nodeB[0]": (3, 5, 1, 1), "nodeB[1]": (3, 5, 0, 1),
    }  # fmt: skip
    assert [row["calls"] for row in report.histogram_per_gpu] == [9, 10, 10, 9]


def test_nemo_aggregate_table():
    report = analyze([NEMO])
    rows = {(r["op"], r["count"], r["dtype"]): (r["calls"], r["bytes_per_call"]) for r in report.aggregate}
    assert rows == {
        ("AllReduce", 8388608, "bf16"): (4, 16 * MB), ("AllReduce", 262144, "bf16"): (16, 512 * KB),
        ("Recv", 4194304, "fp16"): (1, 8 * MB), ("Send", 4194304, "fp16"): (1, 8 * MB),
        ("AllGather", 16384, "fp32"): (4, 64 * KB), ("Broadcast", 1000, "fp32"): (4, 4000),
        ("AllReduce", 1, "int64"): (4, 8), ("ReduceScatter", 10, "fp8_e4m3"): (2, 10), ("ReduceScatter", 10, "fp8_e5m2"): (2, 10),
    }  # fmt: skip
    assert report.aggregate[0]["total_bytes"] == 64 * MB


def test_nemo_counts_every_kind_of_line():
    report = analyze([NEMO])
    assert report.lines == {
        "total": 82, "in_window": 82, "nccl_info": 73, "nccl_warn": 1, "collective": 40, "other_info": 1,
        "unrecognized_nccl": 0, "garbled_collective": 1, "overlong": 0,
    }  # fmt: skip
    assert report.totals["zero_count_calls"] == 1 and report.totals["unknown_datatype_calls"] == 1
    assert report.unknown_datatypes == [{"op": "AllReduce", "datatype": 12, "calls": 1}]
    assert report.examples["garbled"] == [
        f"{NEMO}:71: nodeA:101:101 [0] NCCL INFO AllReduce: opCount 9 sendbuff 0x7f1200900000 recvbuff 0x7f12009"
    ]
    assert any("garbled" in w for w in report.warnings) and any("datatype" in w for w in report.warnings)


def test_nemo_steps_average_time_and_tflops():
    steps = analyze([NEMO]).steps
    assert steps["step_lines"] == 4 and steps["formats"] == {"nemo": 4}
    assert steps["avg_step_time_s"] == pytest.approx((2.0 + 1.5 + 1.0 + 1.2) / 4)
    assert steps["avg_tflops_per_gpu"] == pytest.approx((100 + 120 + 140 + 130) / 4)
    assert (steps["min_step_time_s"], steps["max_step_time_s"]) == (1.0, 2.0)


def test_nemo_init_facts():
    init = analyze([NEMO]).init
    expected = {
        "nccl_version": "2.28.9+cuda13.0", "cuda_version": "13.0", "network": "Libfabric", "net_plugin": "aws-ofi-nccl 1.14.0",
        "ofi_provider": "efa", "nranks": 4, "communicator_sizes": [4], "nnodes": 2, "nnodes_from_hostnames": 2,
        "local_ranks": 2, "gpus_seen": 4, "init_complete": 4, "coll_channels": 2, "collnet_channels": 2, "nvls_channels": 0,
        "p2p_channels": 2, "rings": 2, "trees": 2, "connections": {"NET/Libfabric": 3, "P2P": 1},
        "connected": {"all rings": 1, "all trees": 1}, "env": {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple"},
        "algorithms": ["Ring", "Tree"], "protocols": ["Simple"],
    }  # fmt: skip
    assert {key: init[key] for key in expected} == expected
    assert set(init["net_transports"]) == {"OFI"}  # NET/Plugin is the plugin loader, no transport


def test_nemo_tuning_table():
    assert analyze([NEMO]).tuning == [
        {"op": "AllReduce", "algorithm": "Ring", "protocol": "Simple", "calls": 2, "total_bytes": 2 * 524288},
        {"op": "AllReduce", "algorithm": "Tree", "protocol": "Simple", "calls": 1, "total_bytes": 16777216},
    ]


def test_steps_window_follows_the_awk_scripts():
    # Lines from the 'iteration 2' line up to (not including) the 'iteration 4' line.
    report = analyze([NEMO], Window(steps=(2, 3)))
    ops = by(report.per_op, "op")
    assert set(ops) == {"AllReduce", "Send", "Recv"}
    assert (ops["AllReduce"]["calls"], ops["AllReduce"]["total_bytes"]) == (12, 8 * 524288 + 4 * 8)
    assert report.lines["in_window"] == 21 and report.lines["nccl_info"] == 17 and report.lines["collective"] == 16
    assert report.steps["step_lines"] == 2
    assert report.steps["avg_step_time_s"] == pytest.approx(1.25) and report.steps[
        "avg_tflops_per_gpu"
    ] == pytest.approx(130.0)
    assert report.window == "iterations 2-3"
    # the initialization happens before the first step line: its facts are kept; per-call TUNING lines are not
    assert report.init["nccl_version"] == "2.28.9+cuda13.0" and report.init["rings"] == 2 and report.tuning == []


def test_lines_window_and_both_windows():
    report = analyze([NEMO], Window(lines=(32, 45)))
    # lines 32-35: the 4 Broadcasts; 36-45: 4 AllReduce of 512 KiB and 4 of 16 MiB (37 and 42 are TUNING lines)
    assert {r["op"]: r["calls"] for r in report.per_op} == {"Broadcast": 4, "AllReduce": 8}
    assert report.lines["in_window"] == 14
    both = analyze([NEMO], Window(steps=(3, 4), lines=(70, 82)))
    # steps 3-4 start at line 76 ('iteration 3'); lines 76-82 hold four 512 KiB AllReduce
    assert {r["op"]: r["calls"] for r in both.per_op} == {"AllReduce": 4}
    assert both.steps["step_lines"] == 2


# --- srun -l prefixes, ranks interleaved, older NCCL formats, Megatron step lines ------------------------------


def test_srun_prefixed_megatron_log():
    report = analyze([SRUN])
    ops = by(report.per_op, "op")
    assert {op: (r["calls"], r["min_bytes"], r["max_bytes"], r["total_bytes"]) for op, r in ops.items()} == {
        "Reduce": (2, 64 * MB, 64 * MB, 128 * MB), "AllGather": (4, 4 * MB, 4 * MB, 16 * MB), "AllReduce": (4, 4 * MB, 4 * MB, 16 * MB),
        "ReduceScatter": (4, 32 * KB, 128 * KB, 2 * 32 * KB + 2 * 128 * KB), "Broadcast": (2, 8, 8, 16),
    }  # fmt: skip
    assert hist(report.histogram_per_gpu, "gpu") == {
        "nodeA[0]": (2, 0, 2, 0), "nodeA[1]": (2, 0, 2, 0), "nodeB[0]": (0, 1, 2, 1), "nodeB[1]": (0, 1, 2, 1),
    }  # fmt: skip
    dtypes = {(r["op"], r["dtype"]) for r in report.aggregate}
    assert {("ReduceScatter", t) for t in ("int8", "uint8", "int32", "uint32")} <= dtypes
    assert {("Broadcast", "uint64"), ("Broadcast", "fp64"), ("Reduce", "fp16")} <= dtypes
    steps = report.steps
    assert steps["formats"] == {"megatron": 3} and steps["timed_steps"] == 3 and steps["tflops_steps"] == 2
    assert steps["avg_step_time_s"] == pytest.approx((5444.9 + 5533.8 + 5718.6) / 3 / 1000)
    assert steps["avg_tflops_per_gpu"] == pytest.approx((239.8 + 236.0) / 2)
    init = report.init
    assert (init["nccl_version"], init["network"], init["net_transports"]) == ("2.18.5+cuda12.2", "IB", ["IB"])
    assert (init["rings"], init["trees"], init["coll_channels"], init["p2p_channels"], init["nvls_channels"]) == (
        3,
        3,
        3,
        3,
        None,
    )
    assert (init["nranks"], init["init_complete"], init["nnodes"], init["nnodes_from_hostnames"]) == (4, 4, None, 2)
    assert init["connections"] == {"P2P": 1, "NET/IB": 1}  # counts per transport
    # pre-2.19 TUNING lines print numbers and no op name: 'Algo 1 proto 2' is Ring/Simple, 'Algo 0 proto 0' Tree/LL
    assert {(r["algorithm"], r["protocol"], r["calls"]) for r in report.tuning} == {
        ("Ring", "Simple", 1),
        ("Tree", "LL", 1),
    }
    assert report.lines["unrecognized_nccl"] == 0 and report.lines["garbled_collective"] == 0


def test_srun_window_by_megatron_iterations():
    report = analyze([SRUN], Window(steps=(2, 3)))
    assert {r["op"]: r["calls"] for r in report.per_op} == {"Reduce": 2, "Broadcast": 2}
    assert report.steps["step_lines"] == 2 and report.steps["tflops_steps"] == 1


# --- per-rank NCCL_DEBUG_FILE logs with NCCL_DEBUG_TIMESTAMP prefixes, one of them gzip ---------------------------


def test_several_files_with_timestamps_and_gzip():
    report = analyze([RANK_A, RANK_B])
    assert report.files == [str(RANK_A), str(RANK_B)]
    assert report.per_op == [{"op": "AllReduce", "calls": 12, "min_bytes": 65535, "avg_bytes": pytest.approx(71565306 / 12),
                              "max_bytes": 16777216, "total_bytes": 71565306}]  # fmt: skip
    # the bucket edges: 65535 | 65536, 1048575 | 1048576, 16777215 | 16777216 bytes (int8: count = bytes)
    assert hist(report.histogram_per_gpu, "gpu") == {"nodeA[0]": (1, 2, 2, 1), "nodeB[0]": (1, 2, 2, 1)}
    init = report.init
    assert (init["nccl_version"], init["nccl_versions"], init["network"]) == (
        "2.23.4+cuda12.6",
        ["2.23.4+cuda12.6"],
        "Socket",
    )
    assert init["net_plugin"] == "none"  # NCCL said: Could not find: libnccl-net.so. (no error shown as a value)
    assert (
        init["nranks"],
        init["nnodes"],
        init["local_ranks"],
        init["init_complete"],
        init["rings"],
        init["trees"],
    ) == (2, 2, 1, 2, 4, 4)
    assert {(r["algorithm"], r["protocol"]): (r["calls"], r["total_bytes"]) for r in report.tuning} == {
        ("Ring", "LL128"): (2, 65535 + 65536), ("Ring", "Simple"): (3, 1048575 + 1048576 + 16777215), ("Tree", "Simple"): (1, 16777216),
    }  # fmt: skip
    assert report.steps["step_lines"] == 0 and report.warnings == []


def test_lines_window_applies_per_file():
    report = analyze([RANK_A, RANK_B], Window(lines=(5, 17)))
    # nodeA: lines 15 and 17 (65535, 65536 bytes); nodeB has 10 lines: 5-10 are its six AllReduce calls
    assert {r["gpu"]: r["calls"] for r in report.histogram_per_gpu} == {"nodeA[0]": 2, "nodeB[0]": 6}


def test_steps_window_on_files_without_step_lines_says_so():
    report = analyze([RANK_A, RANK_B], Window(steps=(1, 2)))
    assert report.per_op == [] and report.lines["in_window"] == 0
    assert any("have no step lines" in w and "--lines" in w for w in report.warnings)
    assert report.init["nccl_version"] == "2.23.4+cuda12.6"  # facts still come from the initialization


# --- the kit's example under mpirun --tag-output -----------------------------------------------------------------


def test_kit_example_log_with_mpirun_tags():
    report = analyze([KIT])
    assert {r["op"]: (r["calls"], r["total_bytes"]) for r in report.per_op} == {
        "AllReduce": (6, 6 * 12582912),
        "Broadcast": (2, 2 * 8192),
    }
    steps = report.steps
    assert steps["formats"] == {"nsyskit": 3} and steps["avg_step_time_s"] == pytest.approx(
        (0.85 + 0.0405 + 0.0395) / 3
    )
    assert steps["avg_tflops_per_gpu"] is None
    init = report.init
    assert (init["nnodes"], init["coll_channels"], init["nvls_channels"], init["connected"]) == (
        1,
        24,
        16,
        {"NVLS tree": 1},
    )
    assert report.tuning == [
        {"op": "AllReduce", "algorithm": "NVLS", "protocol": "Simple", "calls": 3, "total_bytes": 3 * 12582912}
    ]
    window = analyze([KIT], Window(steps=(2, 3)))
    assert {r["op"]: r["calls"] for r in window.per_op} == {"AllReduce": 2}
    assert window.steps["avg_step_time_s"] == pytest.approx(0.04)
