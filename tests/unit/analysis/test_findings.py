"""Each findings rule on tables that trigger it and tables that do not; the profiled window and the window metrics."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from nsyskit.analysis.compute.analyzers import cross_rank
from nsyskit.analysis.compute.metrics import RunView, per_rank, run_metrics, window_steps, windowed_ranks
from nsyskit.analysis.compute.nccldigest import rollup_of_ops
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge import findings

MS = 1_000_000


def steps_table(per_rank_durations: dict[int, list[float]]) -> Table:
    """Consecutive 'step N' rows per rank with the given durations (ns)."""
    rows = {"rank": [], "step": [], "start_ns": [], "duration_ns": []}
    for rank, durations in per_rank_durations.items():
        start = 0
        for step, duration in enumerate(durations):
            rows["rank"].append(rank)
            rows["step"].append(step)
            rows["start_ns"].append(start)
            rows["duration_ns"].append(int(duration))
            start += int(duration)
    return Table({k: np.asarray(v, dtype=np.int64) for k, v in rows.items()})


def breakdown_table(rows: list[dict]) -> Table:
    """A gpu_breakdown-shaped table from per-GPU dicts of *_ns values (percentages derived)."""
    names = (
        "window_ns",
        "busy_ns",
        "compute_ns",
        "comm_ns",
        "memory_ns",
        "idle_ns",
        "compute_comm_overlap_ns",
        "exposed_comm_ns",
    )
    table = {"rank": np.asarray([r["rank"] for r in rows]), "device": np.asarray([r.get("device", 0) for r in rows])}
    for name in names:
        table[name] = np.asarray([r.get(name, 0) for r in rows], dtype=np.int64)
    table["idle_ns"] = table["window_ns"] - table["busy_ns"]
    for name in names[1:]:
        table[name.replace("_ns", "_pct")] = table[name] * 100.0 / table["window_ns"]
    return Table(table)


def ops_table(rows: list[tuple[int, int, int, float]]) -> Table:
    """NCCL operations (rank, start, duration, size in bytes) with their size buckets."""
    from nsyskit.analysis.compute.analyzers import size_bucket

    return Table(
        {
            "rank": np.asarray([r[0] for r in rows], dtype=np.int64),
            "op": np.asarray(["AllReduce"] * len(rows), dtype=object),
            "start_ns": np.asarray([r[1] for r in rows], dtype=np.int64),
            "duration_ns": np.asarray([r[2] for r in rows], dtype=np.int64),
            "size_bytes": np.asarray([r[3] for r in rows], dtype=np.float64),
            "bucket": np.asarray([size_bucket(r[3]) for r in rows], dtype=object),
        }
    )


def view(steps: Table, **tables) -> RunView:
    """The run's view as the facade makes it, the NCCL operations given as one table added up as the merge does."""
    window, how = window_steps(steps, tables.pop("windowed", frozenset()))
    if "nccl_ops" in tables:
        tables["nccl"] = rollup_of_ops(tables.pop("nccl_ops"), window)
    made = RunView(steps=window, all_steps=steps, window_source=how, **tables)
    return dataclasses.replace(made, ranks_table=ranks_table(made))


def ranks_table(made: RunView) -> Table:
    """The ranks table as the merge builds it: step means per rank, flags on the time outside communication."""
    work = per_rank(made)
    summaries = [{"rank": int(r), "step_mean_ns": float(made.all_steps["duration_ns"][made.all_steps["rank"] == r].mean())}
                 for r in made.ranks]  # fmt: skip
    return cross_rank(summaries, made.straggler_pct, dict(zip(work["rank"].tolist(), work["work_ns"].tolist(), strict=True)))


def gpu_view(per_gpu: list[dict], step_ns: float = 10 * MS, ranks: int | None = None) -> RunView:
    count = ranks or len(per_gpu)
    return view(steps_table({r: [step_ns] * 4 for r in range(count)}), breakdown=breakdown_table(per_gpu))


# ---- the profiled window ----------------------------------------------------------------------------------


def test_window_steps_drop_the_warm_up_only_on_ranks_without_a_profile_window():
    # Rank 0 had a profile_window range: the facade already kept only its window's steps. Rank 1 had none.
    steps = steps_table({0: [10 * MS, 10 * MS, 11 * MS], 1: [800 * MS, 10 * MS, 10 * MS]})
    nvtx = Table(
        {"rank": np.asarray([0, 0, 1]), "name": np.asarray(["profile_window", "step 1", "step 1"], dtype=object)}
    )
    windowed = windowed_ranks(nvtx)
    assert windowed == {0}
    chosen, how = window_steps(steps, windowed)
    assert chosen.take(chosen["rank"] == 0)["step"].tolist() == [0, 1, 2]
    assert chosen.take(chosen["rank"] == 1)["step"].tolist() == [1, 2]  # no window on rank 1: warm-up dropped
    assert how == "profile_window + warm-up dropped"
    assert run_metrics(view(steps, windowed=windowed))["step_time"] == 10 * MS  # the 800 ms warm-up is not averaged in


def test_two_steps_keep_both():  # too few steps to call one of them warm-up
    chosen, how = window_steps(steps_table({0: [5 * MS, 4 * MS]}))
    assert len(chosen) == 2 and how == "all steps"


# ---- one test per rule: fires, and stays quiet ------------------------------------------------------------


def test_exposed_communication_on_gpus():
    exposed = gpu_view(
        [{"rank": 0, "window_ns": 100, "busy_ns": 90, "compute_ns": 60, "comm_ns": 40, "exposed_comm_ns": 30}]
    )
    hidden = gpu_view(
        [{"rank": 0, "window_ns": 100, "busy_ns": 90, "compute_ns": 85, "comm_ns": 40, "exposed_comm_ns": 5}]
    )
    finding = findings.exposed_communication(exposed)
    assert finding.rule == "exposed_comm" and finding.value == pytest.approx(30.0)
    assert "30.0%" in finding.title
    assert findings.exposed_communication(hidden) is None


def test_communication_share_on_cpu_runs():
    steps = steps_table({0: [10 * MS] * 4, 1: [10 * MS] * 4})
    busy = ops_table([(r, s * 10 * MS + 2 * MS, 4 * MS, 4e6) for r in (0, 1) for s in range(4)])
    light = ops_table([(r, s * 10 * MS + 2 * MS, 1 * MS, 4e6) for r in (0, 1) for s in range(4)])
    finding = findings.exposed_communication(view(steps, nccl_ops=busy))
    assert finding.rule == "comm_share" and finding.value == pytest.approx(40.0)  # 4 of 10 ms, warm-up excluded
    assert findings.exposed_communication(view(steps, nccl_ops=light)) is None


def test_gpu_idle():
    idle = gpu_view([{"rank": 0, "window_ns": 100, "busy_ns": 90}, {"rank": 1, "window_ns": 100, "busy_ns": 40}])
    busy = gpu_view([{"rank": 0, "window_ns": 100, "busy_ns": 95}, {"rank": 1, "window_ns": 100, "busy_ns": 90}])
    finding = findings.gpu_idle(idle)
    assert finding.value == pytest.approx(35.0) and "rank 1 GPU 0" in finding.title
    assert findings.gpu_idle(busy) is None


def test_straggler_by_compute_on_gpus():
    # Synchronous DDP: every rank's step is as long as the slowest; rank 2 computes longer, the others wait in comm.
    per_gpu = [
        {"rank": r, "window_ns": 40 * MS, "busy_ns": 36 * MS, "compute_ns": c * MS, "comm_ns": (36 - c) * MS}
        for r, c in ((0, 20), (1, 20), (2, 32), (3, 20))
    ]
    finding = findings.straggler(gpu_view(per_gpu))
    assert finding is not None and "rank 2" in finding.title and "cause: compute" in finding.title


def test_straggler_by_host_on_gpus():
    # Rank 1's GPU work is normal but its steps are longer: the time goes on the host (data loading, Python).
    per_gpu = [
        {"rank": r, "window_ns": 40 * MS, "busy_ns": 30 * MS, "compute_ns": 25 * MS, "comm_ns": 5 * MS}
        for r in range(3)
    ]
    steps = steps_table({0: [10 * MS] * 4, 1: [14 * MS] * 4, 2: [10 * MS] * 4})
    finding = findings.straggler(view(steps, breakdown=breakdown_table(per_gpu)))
    assert finding is not None and "rank 1" in finding.title and "cause: host" in finding.title


def test_no_straggler_among_even_ranks():
    per_gpu = [
        {"rank": r, "window_ns": 40 * MS, "busy_ns": 36 * MS, "compute_ns": 20 * MS, "comm_ns": 16 * MS}
        for r in range(4)
    ]
    assert findings.straggler(gpu_view(per_gpu)) is None
    assert findings.straggler(view(steps_table({0: [10 * MS] * 4}))) is None  # one rank: nobody to compare with


def test_small_messages():
    steps = steps_table({0: [10 * MS] * 4})
    small = ops_table(
        [(0, s * 10 * MS + i * MS, MS // 2, 4096) for s in range(4) for i in range(6)] + [(0, 35 * MS, MS, 8e6)]
    )
    large = ops_table([(0, s * 10 * MS, 3 * MS, 8e6) for s in range(4)] + [(0, 35 * MS, MS // 10, 4096)])
    finding = findings.small_messages(view(steps, nccl_ops=small))
    assert finding.rule == "small_messages" and finding.value > 50
    assert findings.small_messages(view(steps, nccl_ops=large)) is None


def memcpy_table(pageable_count, pageable_bytes, pageable_ns) -> Table:
    """A memcpy-by-kind table: an HtoD row whose copies are partly pageable, and a device copy row."""
    return Table({
        "rank": np.asarray([0, 0]), "kind": np.asarray(["HtoD", "DtoD"], dtype=object),
        "count": np.asarray([10, 5]), "bytes": np.asarray([64 << 20, 1 << 20]), "total_ns": np.asarray([9 * MS, MS]),
        "pageable_count": np.asarray([pageable_count, 0]), "pageable_bytes": np.asarray([pageable_bytes, 0]),
        "pageable_ns": np.asarray([pageable_ns, 0]),
    })  # fmt: skip


def test_pageable_memcpy_is_judged_by_the_pageable_copies_own_bytes_and_time():
    steps = steps_table({0: [10 * MS] * 3})
    made = view(steps, memcpy=memcpy_table(4, 32 << 20, 5 * MS))
    finding = findings.pageable_memcpy(made)
    assert finding is not None and "4 pageable" in finding.title and "32.0 MB" in finding.title
    assert "5.00 ms" in finding.title  # the pageable copies' time, not the 9 ms of every HtoD copy
    assert finding.evidence["pageable_ns"] == 5 * MS and finding.at_stake_ns == pytest.approx(5 * MS / len(made.steps))
    # 21 scalar .item() copies of 124 bytes in all (the AI-Profiler runs): a sync's cost, not a copy's
    assert findings.pageable_memcpy(view(steps, memcpy=memcpy_table(21, 124, 54_000))) is None
    assert findings.pageable_memcpy(view(steps, memcpy=memcpy_table(0, 0, 0))) is None  # pinned
    assert findings.pageable_memcpy(view(steps, memcpy=Table({"kind": np.asarray(["HtoD"], dtype=object)}))) is None


def test_pageable_memcpy_read_from_the_export(tmp_path):
    # Real exports (aiprofiler, pipit, dlprof) copy HtoD from pageable memory: srcKind 0, as ENUM_CUDA_MEM_KIND says.
    from nsys_fixtures import Export, Kernel, Memop, write_export

    from nsyskit.analysis.judge.summary import summarize
    from nsyskit.analysis.trace import analyze_run

    def run(src_kind: int) -> list[str]:
        memops = [Memop(i * MS, i * MS + MS // 2, 1 << 20, kind=1, src_kind=src_kind, dst_kind=2) for i in range(3)]
        path = write_export(
            tmp_path / f"r{src_kind}_rank_0.sqlite", Export(kernels=[Kernel(0, 400, "k")], memops=memops)
        )
        analysis = analyze_run([path])
        assert analysis.memcpy["pageable_count"].tolist() == [3 if src_kind == 0 else 0]
        assert analysis.memcpy["pageable_bytes"].tolist() == [3 << 20 if src_kind == 0 else 0]
        return [f.title for f in summarize(analysis, tmp_path).findings if f.rule == "pageable_memcpy"]

    assert run(0) == ["3 pageable host/device copies move 3.00 MB in 1.50 ms (2.10 GB/s)"]
    assert run(1) == []  # pinned host memory


def test_step_variance():
    jumpy = steps_table({0: [500 * MS, 10 * MS, 20 * MS, 10 * MS, 22 * MS]})
    steady = steps_table({0: [500 * MS, 10 * MS, 10.2 * MS, 9.9 * MS, 10 * MS]})  # the warm-up step does not count
    finding = findings.step_variance(view(jumpy))
    assert finding.severity == "info" and "rank 0" in finding.title and "warm-up dropped" in finding.title
    assert findings.step_variance(view(steady)) is None


def test_find_orders_findings_by_time_at_stake_and_finds_nothing_in_a_healthy_run():
    per_gpu = [
        {
            "rank": r,
            "window_ns": 100,
            "busy_ns": 60,
            "compute_ns": 50,
            "comm_ns": 20,
            "compute_comm_overlap_ns": 10,
            "exposed_comm_ns": 10 if r else 30,
        }
        for r in range(2)
    ]
    steps = steps_table(
        {0: [9 * MS, 10 * MS, 14 * MS, 10 * MS, 15 * MS], 1: [9 * MS, 10 * MS, 14 * MS, 10 * MS, 15 * MS]}
    )
    found = findings.find(view(steps, breakdown=breakdown_table(per_gpu)))
    # Per step: irregular steps cost 0.25 ms (mean 12.25 ms, median 12 ms), idle 40 ns, exposed comm 20 ns / 5 steps
    assert [f.rule for f in found] == ["step_variance", "gpu_idle", "exposed_comm"]
    assert [f.at_stake_ns for f in found] == pytest.approx([0.25 * MS, 8.0, 4.0])
    healthy = [
        {"rank": r, "window_ns": 100, "busy_ns": 95, "compute_ns": 90, "comm_ns": 10, "compute_comm_overlap_ns": 8,
         "exposed_comm_ns": 2}
        for r in range(2)
    ]  # fmt: skip
    assert findings.find(gpu_view(healthy)) == []


def test_per_rank_components_of_a_cpu_run():
    steps = steps_table({0: [10 * MS] * 4, 1: [10 * MS] * 4})
    ops = ops_table([(r, s * 10 * MS, (2 + r) * MS, 1e6) for r in (0, 1) for s in range(4)])
    table = per_rank(view(steps, nccl_ops=ops))
    assert table["comm_ns"].tolist() == [2 * MS, 3 * MS]
    assert table["work_ns"].tolist() == [8 * MS, 7 * MS]


# ---- real exports -----------------------------------------------------------------------------------------


def test_findings_on_real_gpu_exports(real_export):
    from nsyskit.analysis.judge.summary import summarize
    from nsyskit.analysis.trace import analyze_run

    summary = summarize(analyze_run([real_export]), Path(real_export).parent)
    assert not np.isnan(summary.metrics["gpu_idle"])  # every real export has GPU activity
    assert 0 <= summary.metrics["exposed_comm"] <= 100
    for finding in summary.findings:  # MFU, busbw and NIC use fire under their thresholds, the others over them
        under = finding.rule in ("low_mfu", "below_fabric", "nic_under_line_rate")
        assert (finding.value < finding.threshold if under else finding.value > finding.threshold) and finding.title


def test_of_two_ranks_12_percent_apart_the_finding_names_only_the_slow_one():
    finding = findings.straggler(view(steps_table({0: [100 * MS] * 4, 1: [112 * MS] * 4})))
    assert finding is not None and finding.title.startswith("rank 1 is a straggler")
    assert finding.value == pytest.approx(12.0) and "over the median of the other ranks (100 ms)" in finding.title
    assert findings.straggler(view(steps_table({0: [88 * MS] * 4, 1: [100 * MS] * 4, 2: [100 * MS] * 4}))) is None


def test_the_ranks_table_flags_exactly_the_stragglers_the_finding_names_with_the_same_number():
    # Synchronous DDP: every step is 40 ms; ranks 2 and 5 compute longer, the others wait in their collectives, so
    # step times alone show nothing: the verdict is on the time outside communication, in the table and the finding.
    per_gpu = [
        {"rank": r, "window_ns": 40 * MS, "busy_ns": 36 * MS, "compute_ns": c * MS, "comm_ns": (36 - c) * MS}
        for r, c in ((0, 20), (1, 20), (2, 32), (3, 20), (4, 21), (5, 26), (6, 20), (7, 20))
    ]
    made = gpu_view(per_gpu)
    table = made.ranks_table
    finding = findings.straggler(made)
    flagged = table["rank"][table["straggler"]].tolist()
    assert flagged == [2, 5] and sorted(finding.ranks) == flagged and finding.ranks[0] == 2  # the slowest first
    assert f"{table['deviation_pct'][2]:.1f}% over" in finding.title and finding.value == table["deviation_pct"][2]
    assert "also rank 5" in finding.title
    # What fixing it gives back per step: its excess over the others' median, which every rank waits for
    work = per_rank(made)["work_ns"]
    assert finding.at_stake_ns == pytest.approx(work[2] - np.median(np.delete(work, 2)))


def test_the_straggler_threshold_of_the_flag_is_the_findings():
    steps = steps_table({0: [100 * MS] * 4, 1: [108 * MS] * 4})
    made = view(steps)
    assert findings.straggler(made) is not None  # 8% > 5%
    strict = dataclasses.replace(made, straggler_pct=10.0)
    strict = dataclasses.replace(strict, ranks_table=ranks_table(strict))
    assert not strict.ranks_table["straggler"].any() and findings.straggler(strict) is None


def test_explain_prints_each_rule_s_measure_thresholds_and_advice_and_names_the_rules_on_a_typo(tmp_path):
    import subprocess
    import sys

    from nsyskit.analysis.judge.finding import CATALOG

    def nsyskit(*args):
        return subprocess.run([sys.executable, "-m", "nsyskit", "analyze", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    shown = nsyskit("--explain", "all")
    assert shown.returncode == 0, shown.stderr
    for rule, doc in CATALOG.items():
        assert f"{rule}\n  measures:   {doc.measures}" in shown.stdout and doc.advice in shown.stdout
    one = nsyskit("--explain", "small_messages")
    assert one.returncode == 0 and "fires when: above 50% of NCCL time" in one.stdout
    typo = nsyskit("--explain", "stragler")
    assert typo.returncode == 1 and typo.stdout == ""
    assert typo.stderr.strip().splitlines() == [f"error: --explain 'stragler': no such rule; fix: one of: {', '.join(sorted(CATALOG))}"]


def test_gpu_idle_names_the_causes_that_explain_it_and_what_stays_unexplained():
    idle = findings.Finding("gpu_idle", "warning", "GPUs idle 40.0%", 40.0, 20.0, "", evidence={"idle_ns_per_step": 4 * MS})
    sync = findings.Finding("sync_stall", "warning", "t", 1.0, 0.0, "", evidence={findings.IDLE_EXPLAINED: 1.5 * MS})
    loader = findings.Finding("data_loading", "warning", "t", 1.0, 0.0, "", evidence={findings.IDLE_EXPLAINED: 2 * MS})
    other = findings.Finding("straggler", "warning", "t", 1.0, 0.0, "")
    told = findings.explain_idle(idle, [idle, sync, loader, other])
    assert told.title == "GPUs idle 40.0%; per step, explained by data_loading 2.00 ms, sync_stall 1.50 ms; 500 us unexplained"
    assert told.evidence["idle_unexplained_ns_per_step"] == 0.5 * MS
    assert findings.explain_idle(idle, [idle, other]) == idle  # no cause found: as it was


def test_the_rules_and_the_summary_compute_the_per_rank_table_once_per_view(monkeypatch):
    # At 16,384 ranks the per-rank pass took most of the findings' 12.6 s, once per rule that asked for it (five times)
    from nsyskit.analysis.compute import metrics

    passes = []
    monkeypatch.setattr(metrics, "_per_rank", lambda made, real=metrics._per_rank: passes.append(made) or real(made))
    slow = gpu_view([{"rank": r, "window_ns": 40 * MS, "busy_ns": 36 * MS, "compute_ns": c * MS,
                      "comm_ns": (36 - c) * MS} for r, c in ((0, 20), (1, 20), (2, 32), (3, 20))])  # fmt: skip
    passes.clear()  # the helper's ranks table made its own view's
    found = findings.find(slow)
    metrics_once = run_metrics(slow)
    assert len(passes) == 1 and passes[0] is slow
    assert any(f.rule == "straggler" and "rank 2" in f.title for f in found)  # the rules still read it
    assert metrics_once["step_time_slowest_rank"] == float(per_rank(slow)["step_ns"].max())
    run_metrics(slow)["step_time"] = -1.0  # a caller's copy: the next caller gets the view's own numbers
    assert run_metrics(slow)["step_time"] == metrics_once["step_time"]
