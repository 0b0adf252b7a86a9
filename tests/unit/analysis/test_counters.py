"""Counters sampled beside the trace, from fixtures in the documented schema (counter_fixtures.py says why fixtures):
new-form GPU metrics, EFA rates (GENERIC_EVENT_DATA and JSON), NIC metrics; their window, per-step totals, a
report with none inside the window, and the map/merge."""

from __future__ import annotations

import re
import sqlite3

import numpy as np
import pytest
from counter_fixtures import EFA_FIELDS, Counters, add_counters
from nsys_fixtures import Export, Range, kernels_on, write_export

from nsyskit.analysis.compute.counters import heat_map
from nsyskit.analysis.mapreduce import parts
from nsyskit.analysis.trace import analyze_run

MS = 1_000_000
SM, TENSOR = "SMs Active [Throughput %]", "Tensor Active [Throughput %]"


def export_with(path, counters: Counters, steps: int = 0, nccl: bool = True):
    """A rank with compute kernels on GPUs 0 and 1 from 10 to 90 ms (an NCCL kernel 40-60 ms on GPU 0), optional
    'step N' ranges of 20 ms from 10 ms, and `counters`."""
    kernels = kernels_on(0, 7, "ampere_sgemm", [(10 * MS, 40 * MS), (60 * MS, 90 * MS)])
    kernels += kernels_on(1, 7, "ampere_sgemm", [(10 * MS, 90 * MS)])
    if nccl:
        kernels += kernels_on(0, 9, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", [(40 * MS, 60 * MS)])
    ranges = [Range(10 * MS + 20 * MS * i, 30 * MS + 20 * MS * i, f"step {i}") for i in range(steps)]
    write_export(path, Export(kernels=kernels, ranges=ranges, version="2024.6.1"))
    return add_counters(path, counters)


def row(table, **match):
    """The one row of `table` matching every column = value given."""
    keep = np.ones(len(table), dtype=bool)
    for column, value in match.items():
        keep &= table[column] == value
    assert keep.sum() == 1, (match, keep.sum())
    return next(table.take(keep).rows())


def test_gpu_metrics_table_per_device_time_weighted(tmp_path):
    # GPU 0: 0% over 0-20 ms, 50% over 20-50 ms, 100% 50-100 ms; the last sample (at 100 ms) holds for no time
    sm = {0: [(0, 0), (20 * MS, 50), (50 * MS, 100), (100 * MS, 7)], 1: [(0, 10), (100 * MS, 10)]}
    path = export_with(tmp_path / "r0.sqlite", Counters(gpu={SM: sm, TENSOR: {0: [(0, 5), (100 * MS, 5)]}}))
    counters = analyze_run([path]).counters
    # the window: the kernels' span, 10-90 ms
    gpu0 = row(counters, device="GPU 0", metric=SM)
    assert (gpu0["window_start_ns"], gpu0["window_end_ns"], gpu0["covered_ns"]) == (10 * MS, 90 * MS, 80 * MS)
    assert gpu0["unit"] == "Throughput %" and gpu0["samples"] == 3
    assert gpu0["mean"] == pytest.approx((0 * 10 + 50 * 30 + 100 * 40) / 80)
    assert (gpu0["p50"], gpu0["p95"], gpu0["max"]) == (50.0, 100.0, 100.0)  # 0 holds 10 of 80 ms, 50 holds 30
    # while GPU 0's kernels ran (10-90 ms, the NCCL kernel included): the same time; while NCCL ran (40-60): 50 then 100
    assert gpu0["busy_mean"] == pytest.approx(gpu0["mean"])
    assert gpu0["nccl_mean"] == pytest.approx((50 * 10 + 100 * 10) / 20)
    assert row(counters, device="GPU 1", metric=SM)["mean"] == 10.0
    assert np.isnan(counters["total"]).all()  # a percentage has no total


def test_efa_rates_from_event_data_and_from_json_agree(tmp_path):
    gb = 1e9
    efa = {
        0: [(0, {EFA_FIELDS[0]: 2 * gb, EFA_FIELDS[2]: 1 * gb}), (50 * MS, {EFA_FIELDS[0]: 4 * gb}), (100 * MS, {})],
        3: [(0, {EFA_FIELDS[2]: 0.5 * gb}), (100 * MS, {})],
    }
    tables = []
    for as_json in (False, True):
        path = export_with(tmp_path / f"efa-{as_json}.sqlite", Counters(efa=efa, efa_json=as_json))
        tables.append(analyze_run([path]).counters)
    for table in tables:
        read = row(table, device="EFA 0", metric="rdma_read_bytes per second")
        assert (read["kind"], read["unit"], read["total_unit"]) == ("efa", "B/s", "B")
        assert read["mean"] == pytest.approx((2 * gb * 40 + 4 * gb * 40) / 80)
        # bytes moved in the window: 2 GB/s over 10-50 ms and 4 GB/s over 50-90 ms
        assert read["total"] == pytest.approx(2 * gb * 0.040 + 4 * gb * 0.040)
        assert read["nccl_mean"] == pytest.approx(3 * gb)  # NCCL 40-60 ms: half at 2, half at 4 GB/s
        # the device is the typeId's low byte
        assert row(table, device="EFA 3", metric="rdma_write_bytes per second")["total"] == pytest.approx(
            0.5 * gb * 0.08
        )
    first, second = tables
    for name in ("mean", "p50", "p95", "max", "total", "covered_ns"):
        assert np.array_equal(first[name], second[name], equal_nan=True), name


def test_nic_amounts_per_interval_become_rates_and_bytes_per_step(tmp_path):
    # 1 MB per 10 ms interval on mlx5_0 (a rate of 100 MB/s), a rate unit kept as it is on mlx5_1
    sent = [(t * MS, (t + 10) * MS, 1_000_000) for t in range(0, 100, 10)]
    nic = {("mlx5_0", "IB: Bytes sent", "bytes"): sent, ("mlx5_1", "IB: Bytes received", "B/s"): [(0, 100 * MS, 5e8)]}
    path = export_with(tmp_path / "nic.sqlite", Counters(nic=nic), steps=4)
    analysis = analyze_run([path])
    mlx0 = row(analysis.counters, device="mlx5_0", metric="IB: Bytes sent")
    assert (mlx0["kind"], mlx0["unit"], mlx0["total_unit"]) == ("nic", "bytes/s", "bytes")
    # the window: steps 1-3 (step 0 is the warm-up the analysis leaves out), 30-90 ms
    assert (mlx0["window_start_ns"], mlx0["window_end_ns"]) == (30 * MS, 90 * MS)
    assert mlx0["mean"] == pytest.approx(1e8) and mlx0["total"] == pytest.approx(6_000_000)
    assert row(analysis.counters, device="mlx5_1", metric="IB: Bytes received")["unit"] == "B/s"
    steps = analysis.counter_steps
    assert sorted(set(steps["step"])) == [1, 2, 3]
    for step in (1, 2, 3):  # each 20 ms step: 2 MB sent, 10 MB received
        assert row(steps, step=step, device="mlx5_0")["total"] == pytest.approx(2_000_000)
        assert row(steps, step=step, device="mlx5_1")["total"] == pytest.approx(0.5e9 * 0.02)


def test_counters_outside_the_window_give_one_line_and_lose_nothing(tmp_path):
    late = {SM: {0: [(200 * MS, 50), (300 * MS, 60)]}}
    path = export_with(tmp_path / "late.sqlite", Counters(gpu=late))
    plain = export_with(tmp_path / "plain.sqlite", Counters())
    analysis, without = analyze_run([path]), analyze_run([plain])
    assert len(analysis.counters) == 0
    lines = [w for w in analysis.warnings if "counter series" in w]
    assert len(lines) == 1 and "no sample inside the analyzed window" in lines[0] and "200000000-300000000" in lines[0]
    for name in ("breakdown", "steps", "kernel_summaries"):  # everything else as without the counters
        assert repr(getattr(analysis, name)) == repr(getattr(without, name))


def two_ranks(tmp_path):
    """Two ranks: GPU metrics sampled every ms on one, every 3 ms (another bin width) on the other, and EFA rates."""
    folder = tmp_path / "run"
    folder.mkdir()
    planted = {}
    rng = np.random.default_rng(7)
    for rank, (period, span) in enumerate(((MS, 100), (3 * MS, 300))):
        times = range(0, span * MS, period)
        gpu = {name: {0: [(t, int(v)) for t, v in zip(times, rng.integers(0, 100, len(times)), strict=True)]}
               for name in (SM, TENSOR)}  # fmt: skip
        planted[rank] = gpu[SM][0]
        efa = {0: [(t, {EFA_FIELDS[0]: float(v)}) for t, v in zip(times, rng.random(len(times)) * 1e9, strict=True)]}
        # rank 0's window: its steps 1-3 (60 ms, 1 ms bins); rank 1's: its kernels, stretched to 10-270 ms (8 ms bins)
        path = export_with(folder / f"rank{rank}.sqlite", Counters(gpu=gpu, efa=efa), steps=0 if rank else 4)
        if rank:
            import sqlite3

            with sqlite3.connect(path) as con:
                con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end * 3 WHERE end = 90000000")
    return folder, planted


def held_mean(samples, low: int, high: int) -> float:
    """The time-weighted mean over [low, high) of samples each holding its value until the next one."""
    total = weight = 0.0
    for (t, v), (next_t, _v) in zip(samples, samples[1:], strict=False):
        overlap = max(0, min(next_t, high) - max(t, low))
        total, weight = total + v * overlap, weight + overlap
    return total / weight


def test_merge_of_parts_equals_one_process(tmp_path):
    folder, planted = two_ranks(tmp_path)
    whole = analyze_run([folder], workers=1)
    parts.map_reports([folder], tmp_path / "parts")
    merged, _facts = parts.merge_parts(tmp_path / "parts")
    for name in ("counters", "counter_bins", "counter_steps"):
        one, other = getattr(whole, name), getattr(merged, name)
        assert len(one) and one.names == other.names, name
        for column in one.names:
            assert np.array_equal(one[column], other[column], equal_nan=one[column].dtype != object), (name, column)
    assert len(set(whole.counter_bins["bin_ns"])) == 2  # the ranks' bins differ in width ...
    names, width, means = heat_map(merged.counter_bins, SM)
    assert names == ["rank 0 GPU 0", "rank 1 GPU 0"] and width == max(whole.counter_bins["bin_ns"])
    # ... and each cell of the map (the wider width) is the time-weighted mean of the samples inside it
    for r, label in enumerate(names):
        stats = row(whole.counters, rank=r, metric=SM)
        low, high = stats["window_start_ns"], stats["window_end_ns"]
        cells = -(-(high - low) // width)
        assert (~np.isnan(means[r])).sum() == cells, label
        for cell in range(cells):
            expected = held_mean(planted[r], low + cell * width, min(low + (cell + 1) * width, high))
            assert means[r][cell] == pytest.approx(expected, rel=1e-12), (label, cell)


def test_a_file_of_two_ranks_gives_each_its_own_gpus_metrics(tmp_path):
    """torchrun ranks recorded in one file: GPU 1's metrics go to the process whose kernels ran on GPU 1, the EFA
    counters (the node's) to the file's first rank; each series is shown once."""
    from nsys_fixtures import Kernel

    kernels = [Kernel(10 * MS, 90 * MS, "gemm", device=0, pid=100), Kernel(10 * MS, 90 * MS, "gemm", device=1, pid=200)]
    path = write_export(tmp_path / "two.sqlite", Export(kernels=kernels, version="2024.6.1"))
    sm = {0: [(0, 20), (100 * MS, 0)], 1: [(0, 70), (100 * MS, 0)]}
    add_counters(path, Counters(gpu={SM: sm}, efa={0: [(0, {EFA_FIELDS[0]: 1e9}), (100 * MS, {})]}))
    counters = analyze_run([path]).counters
    assert row(counters, rank=0, device="GPU 0")["mean"] == 20.0
    assert row(counters, rank=1, device="GPU 1")["mean"] == 70.0
    assert set(counters["device"][counters["rank"] == 1]) == {"GPU 1"}
    assert row(counters, device="EFA 0", metric=EFA_FIELDS[0])["rank"] == 0


def test_the_report_shows_heat_maps_step_bytes_and_one_terminal_table(tmp_path):
    import io
    import json

    from rich.console import Console

    from nsyskit.analysis.outputs import analyze, write
    from nsyskit.analysis.present import report

    folder = tmp_path / "run"
    folder.mkdir()
    sent = [(t * MS, (t + 10) * MS, 3_000_000 if t // 10 % 2 else 1_000_000) for t in range(0, 100, 10)]
    sm = {0: [(0, 50), (40 * MS, 80), (70 * MS, 20), (100 * MS, 0)]}
    counters = Counters(gpu={SM: sm, TENSOR: {0: [(0, 30), (100 * MS, 30)]}},  # tensor: 30% all along
                        nic={("mlx5_0", "IB: Bytes sent", "bytes"): sent})  # fmt: skip
    export_with(folder / "rank_0.sqlite", counters, steps=4)
    result = write(analyze([folder]))
    html = result.report_html.read_text()
    section = html[html.index('<section id="counters">') :]
    # one rank: SM activity and the NIC's bytes as line plots; the tensor series, flat, named in one line instead
    assert section.count("data:image/png;base64,") == 2
    assert "Not drawn, the same value on every device over the whole window: Tensor Active [Throughput %] (30.0%)" in section
    shown = re.sub(r"<[^>]*>", "", section)  # the text a person reads (names carry their break points as tags)
    assert "What each network device moved per step" in shown and "mlx5_0" in shown
    moved = section[section.index("Bytes each network device moved") :]
    assert "12.0 MB" in moved[: moved.index("</table>")]  # 3+1+3+1+3+1 MB over steps 1-3 (30-90 ms), in 10^3 steps
    assert sorted(p.name for p in folder.glob("counters_*.png")) == ["counters_0.png", "counters_1.png"]
    data = json.loads((folder / "analysis.json").read_text())
    assert len(data["counters"]) == 3 and len(data["counter_steps"]) == 3  # window steps 1-3
    nic = next(r for r in data["counters"] if r["device"] == "mlx5_0")
    assert (nic["mean"], nic["total"], nic["unit"]) == (2e8, 12e6, "bytes/s")  # raw numbers and their unit in JSON
    console = Console(file=io.StringIO(), width=200, color_system=None)
    report.print_report(result.report, console)
    text = console.file.getvalue()
    assert text.count("Counters sampled beside the trace") == 1 and "IB: Bytes sent" in text
    assert "200 MB/s" in text and "30.0%" in text and "200000000" not in text.replace(",", "")  # human units


def test_samples_without_their_names_table_are_kept_named_by_their_ids(tmp_path):
    import sqlite3

    path = export_with(tmp_path / "r.sqlite", Counters(gpu={SM: {0: [(0, 40), (100 * MS, 0)]}}))
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE TARGET_INFO_GPU_METRICS")  # a partial export
    counters = analyze_run([path]).counters
    assert list(counters["metric"]) == ["<metric 0 of type 281479271678208 not in TARGET_INFO_GPU_METRICS>"]
    assert counters["mean"][0] == 40.0 and counters["device"][0] == "GPU 0"


def test_the_counters_read_aside_leave_their_warnings_where_the_prefetch_put_them(tmp_path):
    """The counters are read in a thread of their own, past the prefetch: a warning of that read still comes before
    those of the rank's tables (here a step number beyond int64), as when the prefetch waited for it, every time."""
    path = tmp_path / "rank.sqlite"
    kernels = kernels_on(0, 7, "ampere_sgemm", [(10 * MS, 90 * MS)])
    write_export(path, Export(kernels=kernels, ranges=[Range(10 * MS, 30 * MS, "step 99999999999999999999")],
                              version="2024.6.1"))  # fmt: skip
    efa = {0: [(0, {EFA_FIELDS[0]: 1e9}), (50 * MS, {EFA_FIELDS[0]: 2e9}), (100 * MS, {})]}
    add_counters(path, Counters(efa=efa, efa_json=True))
    with sqlite3.connect(path) as con:
        con.execute("UPDATE GENERIC_EVENTS SET data = 'not json' WHERE rowid = (SELECT min(rowid) FROM GENERIC_EVENTS)")
    for _ in range(5):
        warnings = analyze_run([path]).warnings
        read = [i for i, line in enumerate(warnings) if "no JSON object" in line]
        steps = [i for i, line in enumerate(warnings) if "beyond int64" in line]
        assert len(read) == 1 and len(steps) == 1 and read[0] < steps[0], warnings
