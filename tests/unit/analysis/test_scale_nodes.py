"""What a person reads at 4,096 and 16,384 ranks: at most 250 terminal lines opening with the findings, the findings
within report.html's first 30 KB, heat maps with a column per node (the matrix each draws, not its pixels), each
node's worst rank named in the Nodes table, and analysis.json with every rank. The run is the merged analysis of
copies of the repository's real H100 DDP export (scaled_runs), one rank slowed."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console
from scaled_runs import one_rank_with_counters, widened

from nsyskit.analysis import compose, print_report, summarize
from nsyskit.analysis.compute.counters import heat_map
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.present import plots
from nsyskit.analysis.present.counterview import node_rows
from nsyskit.analysis.present.pernode import ASSUMED_PER_NODE, MAX_CELLS, nodes_of
from nsyskit.analysis.present.report import render_html, run_nodes, write_report

SLOW = 1234  # on gpu-node-0154 (8 ranks a node), among the 512 nodes of 4,096 ranks


@pytest.fixture(scope="module")
def one(tmp_path_factory, real_exports_dir):
    return one_rank_with_counters(tmp_path_factory.mktemp("one"), real_exports_dir)


def terminal_lines(report) -> list[str]:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    print_report(report, console, top=15)
    return console.file.getvalue().splitlines()


def findings_end(html: bytes) -> int:
    start = html.index(b'<section id="findings">')
    return html.index(b"</section>", start)


@pytest.fixture(scope="module")
def run_4096(one, tmp_path_factory):
    analysis = widened(one, 4096, slow_rank=SLOW)
    folder = tmp_path_factory.mktemp("r4096")
    summary = summarize(analysis, folder)
    report = compose(analysis, summary, folder, logs=None)
    return analysis, report, terminal_lines(report), write_report(report)


def test_4096_ranks_fit_250_terminal_lines_with_the_findings_first_and_the_slow_rank_with_its_node(run_4096):
    _analysis, _report, lines, _page = run_4096
    assert len(lines) <= 250, "\n".join(lines)
    assert lines[0].startswith("Findings") and "4,096 rank(s)" in lines[0]
    assert any(f"rank {SLOW} is a straggler" in line for line in lines[1:6])
    ranks = lines[lines.index(next(line for line in lines if line.startswith("Ranks (stragglers"))):]
    assert any("1,234 │ gpu-node-0154" in line and "120 ms" in line for line in ranks[:25])  # the rank and its node


def test_4096_ranks_report_html_opens_with_the_findings_and_json_keeps_every_rank(run_4096):
    analysis, _report, _lines, page = run_4096
    html = page.read_bytes()
    assert findings_end(html) < 30 * 1024
    assert len(html) < 4_000_000  # measured 2.3 MB: tables show the ranks that matter, rows up to 5,000 one click away
    data = json.loads((page.parent / "analysis.json").read_text())
    assert len(data["ranks"]) == len(data["breakdown"]) == 4096 and len(data["steps"]) == len(analysis.steps)
    assert len(data["nodes"]) == 512 and sum(n["rank_count"] for n in data["nodes"]) == 4096
    assert data["nodes_are"] == "by the reports' host names"
    slow = data["nodes"][SLOW // 8]
    assert (slow["node"], slow["rank_range"], slow["slowest_rank"]) == ("gpu-node-0154", "1232-1239", SLOW)
    assert slow["step_mean_max_ns"] == pytest.approx(1.5 * slow["step_mean_median_ns"])
    text = html.decode()
    assert "Step time per node (its slowest rank)" in text and "GPU time breakdown per node" in text
    assert "Reports of the 4,096 rank(s)</summary>" in text  # folded: after the findings
    assert "Nodes (each node&#39;s slowest and most idle rank)" in text and "nodes by the reports&#39; host names" in text
    nodes_table = text[text.index("Nodes (each node&#39;s slowest") :]
    shown = nodes_table[: nodes_table.index("</table>")]  # the rows shown first: the slow node among them
    assert "gpu-node-0154" in shown and "across 512 nodes (min / median / p95 / max)" in nodes_table


def test_4096_ranks_heat_maps_draw_a_column_per_node(run_4096):
    analysis, report, _lines, _page = run_4096
    nodes = run_nodes(analysis, report.summary)
    assert nodes.source == "by the reports' host names" and nodes.cells == 512 and nodes.per_cell == 1
    assert nodes.label() == "node (8 ranks each, by the reports' host names)"
    steps = plots.step_grid(analysis.steps, nodes)
    assert steps.shape == (len(np.unique(analysis.steps["step"])), 512)
    slow = analysis.steps["duration_ns"][analysis.steps["rank"] == SLOW]
    assert np.array_equal(steps[:, SLOW // 8], slow)  # the node's column: its slowest rank's step times
    assert np.array_equal(steps[:, 0], analysis.steps["duration_ns"][analysis.steps["rank"] == 0])
    assert plots.breakdown_grid(analysis.breakdown, nodes).shape == (4, 512)
    names, _width, means = heat_map(analysis.counter_bins, "SMs Active [Throughput %]", node_rows(nodes))
    assert means.shape[0] == len(names) == 512 and names[154] == "gpu-node-0154"
    one_rank = heat_map(analysis.counter_bins.take(analysis.counter_bins["rank"] == 0), "SMs Active [Throughput %]")
    assert np.allclose(means[154], one_rank[2][0], equal_nan=True)  # a node of copies: each copy's own values


def test_16384_ranks_without_host_names_read_the_same(one, tmp_path):
    """2,048 nodes of 8 ranks (no host name in the reports: 8 assumed), drawn in groups of 4 nodes per column."""
    analysis = widened(one, 16384, hosts=False, slow_rank=9999)
    summary = summarize(analysis, tmp_path)
    report = compose(analysis, summary, tmp_path, logs=None)
    lines = terminal_lines(report)
    assert len(lines) <= 250 and lines[0].startswith("Findings")
    assert any("rank 9999 is a straggler" in line for line in lines[1:6])
    html = render_html(report).encode()
    assert findings_end(html) < 30 * 1024 and len(html) < 4_000_000
    nodes = run_nodes(analysis, summary)
    assert len(nodes.names) == 2048 and nodes.per_cell == 4 and nodes.cells == MAX_CELLS
    assert nodes.label() == "group of 4 nodes (32 ranks each, assumed: no host names nor run.json)"
    assert plots.step_grid(analysis.steps, nodes).shape[1] == MAX_CELLS == plots.breakdown_grid(analysis.breakdown, nodes).shape[1]
    assert "Step time per group of 4 nodes (its slowest rank)" in html.decode()


def ranks_table(hosts: list[str]) -> Table:
    return Table({"rank": np.arange(len(hosts)), "host": np.array(hosts, dtype=object),
                  "step_mean_ns": np.ones(len(hosts))})  # fmt: skip


def test_nodes_come_from_host_names_then_run_json_then_8_ranks_each():
    uneven = nodes_of(ranks_table(["a"] * 6 + ["b"] * 2 + ["c"] * 8))  # a node that lost GPUs keeps its own column
    assert uneven.names == ["a", "b", "c"] and uneven.label().startswith("node (2-8 ranks each")
    copies = nodes_of(ranks_table(["vm"] * 16), ranks_per_node=4)  # one host for every rank: copies of one report
    assert copies.source == "by run.json's procs_per_node" and copies.names[1] == "ranks 4-7"
    unknown = nodes_of(ranks_table([""] * 16))
    assert unknown.cells == 2 and unknown.source == "assumed: no host names nor run.json" and ASSUMED_PER_NODE == 8


def test_run_json_says_how_many_ranks_a_node_holds(one, tmp_path):
    """Reports without host names, beside the run.json 'invoke run' wrote: its procs_per_node makes the nodes."""
    record = {"run_id": "big", "target": "slurm", "nodes": 150, "procs_per_node": 4, "started": 0}
    (tmp_path / "run.json").write_text(json.dumps(record))
    analysis = widened(one, 600, hosts=False, slow_rank=7)
    summary = summarize(analysis, tmp_path)
    nodes = run_nodes(analysis, summary)
    assert nodes.source == "by run.json's procs_per_node" and nodes.cells == 150 and nodes.names[1] == "ranks 4-7"
    steps = plots.step_grid(analysis.steps, nodes)
    assert steps.shape[1] == 150 and np.array_equal(steps[:, 1], analysis.steps["duration_ns"][analysis.steps["rank"] == 7])


def test_a_heat_map_of_devices_orders_its_rows_by_rank_then_device_name():
    devices = ["GPU 2", "GPU 10", "EFA 0", "GPU 0"]
    rank = np.repeat([11, 3], len(devices))
    bins = Table({"rank": rank, "kind": np.full(len(rank), "gpu", dtype=object),
                  "device": np.array(devices * 2, dtype=object), "metric": np.full(len(rank), "m", dtype=object),
                  "bin": np.zeros(len(rank), dtype=np.int64), "bin_ns": np.full(len(rank), 1000),
                  "value_ns": np.arange(len(rank)) * 1000.0, "covered_ns": np.full(len(rank), 1000.0),
                  "max": np.zeros(len(rank))})  # fmt: skip
    names, _width, means = heat_map(bins, "m")
    assert names == ["rank 3 EFA 0", "rank 3 GPU 0", "rank 3 GPU 10", "rank 3 GPU 2",
                     "rank 11 EFA 0", "rank 11 GPU 0", "rank 11 GPU 10", "rank 11 GPU 2"]  # fmt: skip
    assert means[:, 0].tolist() == [6, 7, 5, 4, 2, 3, 1, 0]  # each row its own device's samples
