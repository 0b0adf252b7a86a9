"""What a person reads at 1,024 ranks: the terminal fits in about two screens (each per-rank table shows the ranks
that matter and the spread), JSON keeps every row, and a note that holds on many ranks is one line."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from test_report import make_run

from nsyskit.analysis import compose, print_report, run_analysis, summarize
from nsyskit.analysis.present.grouping import grouped

RANKS, SLOW = 1024, 700


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("big") / "run", ranks=RANKS, slow_rank=SLOW)
    analysis, _ = run_analysis([run])
    return run, analysis


def test_the_terminal_fits_in_about_two_screens(big_run):
    run, analysis = big_run
    console = Console(file=io.StringIO(), width=160, color_system=None)
    print_report(compose(analysis, summarize(analysis, run), run), console, top=15)
    text = console.file.getvalue()
    assert len(text.splitlines()) <= 160  # before: a row per rank and GPU in three tables
    ranks_table = text.split("Ranks (stragglers in red)")[1]
    assert f"│  {SLOW} │" in ranks_table  # the slow rank is among those shown
    assert "across 1,024 ranks (min / median / p95 / max): step mean" in ranks_table
    assert "more rows in analysis.json (shown: stragglers, slowest" in ranks_table


def test_json_keeps_every_rank(big_run):
    run, _analysis = big_run
    data = json.loads((run / "analysis.json").read_text())
    assert len(data["ranks"]) == RANKS and len(data["breakdown"]) == RANKS and len(data["memcpy"]) == RANKS
    assert [r["rank"] for r in data["ranks"] if r["straggler"]] == [SLOW]


def test_a_note_on_many_ranks_is_one_line_with_the_count_and_ranges():
    notes = [f"rank {r}: {976 + r} of {11164 + r:,} events kept (--timeline-max-events), up to 3.{r % 10} ms into "
             "the window" for r in range(512)]  # fmt: skip
    notes += [f"/fsx/run/r{r}.sqlite: {r + 1} NVTX ranges end before they start and were left out" for r in range(3)]
    lines = grouped(notes, 512)
    assert lines[0] == ("on 512 of 512 ranks: 976-1,487 of 11,164-11,675 events kept (--timeline-max-events), "
                        "up to 3-3.9 ms into the window")  # fmt: skip
    assert lines[1:] == notes[512:]  # three alike notes stay three lines


def test_a_wide_run_with_counters_stays_within_the_limits(real_exports_dir, tmp_path):
    """512 ranks, copies of a real export with GPU and EFA counters added (counter_fixtures: in the documented
    schema): the findings open the terminal, the counters are one table of a row per metric, all in 250 lines."""
    import os
    import sqlite3

    from counter_fixtures import EFA_FIELDS, Counters, add_counters
    from real_exports import decompress

    source = tmp_path / "one.sqlite"
    source.write_bytes(decompress("fuser_h200_ce15be9f9_report2.sqlite", real_exports_dir).read_bytes())
    with sqlite3.connect(source) as con:
        low, high = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        # Its kernels named as tensor-core GEMMs: tensor_cores_idle judges GPUs that mostly do matrix math
        con.execute("UPDATE StringIds SET value = 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel_' || id "
                    "WHERE id IN (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    times = [low + (high - low) * i // 100 for i in range(101)]
    tensor = {"Tensor Active [Throughput %]": {0: [(t, 3) for t in times]},
              "SMs Active [Throughput %]": {0: [(t, 90) for t in times]}}  # fmt: skip
    efa = {d: [(t, {EFA_FIELDS[0]: 1e9 if d == 0 else 1e7}) for t in times] for d in range(4)}
    add_counters(source, Counters(gpu=tensor, efa=efa))
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(512):
        os.link(source, run / f"rank_{rank}.sqlite")
    analysis, _ = run_analysis([run])
    assert len(analysis.counters) == 512 * (2 + 4 * len(EFA_FIELDS))  # per rank: 2 GPU metrics, 4 EFA devices
    console = Console(file=io.StringIO(), width=160, color_system=None)
    print_report(compose(analysis, summarize(analysis, run), run), console, top=15)
    lines = console.file.getvalue().splitlines()
    assert len(lines) <= 250, "\n".join(lines)
    assert "Findings" in lines[0] or "finding" in lines[0].lower(), lines[:3]
    head = "\n".join(lines[:40])
    assert (
        "tensor cores idle 97.0% of the time the GPU runs kernels (active 3.0%)" in head and "EFA 0 carried 97" in head
    )
    table = [line for line in lines if "per metric here" in line]
    assert len(table) == 1 and "9,216 device rows" in table[0]


def test_the_findings_open_the_terminal_and_the_first_30_kb_of_report_html(big_run):
    # What a person reads first at scale is the verdict: no per-rank list before it, on the terminal or in the page.
    run, analysis = big_run
    console = Console(file=io.StringIO(), width=160, color_system=None)
    print_report(compose(analysis, summarize(analysis, run), run), console, top=15)
    assert console.file.getvalue().lstrip().startswith("Findings")
    html = (run / "report.html").read_bytes()
    start = html.index(b'<section id="findings">')
    assert html.index(b"</section>", start) < 30 * 1024, "the findings end past report.html's first 30 KB"
