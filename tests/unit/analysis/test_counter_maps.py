"""Counters that matter: heat maps leave out the metrics that hold one value over the window on every device (an
NVLink never used, a constant clock), naming them in one line under the maps; a one-device run draws each metric
as a line against time instead of a one-row heat map."""

from __future__ import annotations

import re

import numpy as np
from counter_fixtures import Counters
from fabric_counters_run import CLOCK, NVLINK, PCIE, SM, TENSOR, write_run
from test_counters import MS, export_with

from nsyskit.analysis.outputs import analyze, write
from nsyskit.analysis.present import counterview
from nsyskit.analysis.trace import analyze_run


def _section(html: str) -> str:
    return html[html.index('<section id="counters">') :]


def test_flat_metrics_are_left_out_of_the_maps_and_named_in_one_line(tmp_path):
    run, _fabric = write_run(tmp_path / "run")
    result = write(analyze([run]))
    section = _section(result.report_html.read_text())
    drawn = re.findall(r'<img alt="([^"]*) over time per device"', section)
    assert drawn == [SM, TENSOR, "rdma_read_bytes per second"]  # one map per MAPPED pattern, flat ones skipped
    [line] = re.findall(r'<p class="caption">(Not drawn[^<]*)</p>', section)
    assert f"{NVLINK} (0.0%)" in line and f"{PCIE} (3.0%)" in line and f"{CLOCK} (1.41 GHz)" in line
    assert SM not in line and TENSOR not in line
    # every device of the 8 ranks is a row of each map; the flat metrics stay in the tables and analysis.json
    bins = result.analysis.counter_bins
    names, _width, _means = counterview.heat_map(bins, SM)
    assert len(names) == 8 and NVLINK in set(result.analysis.counters["metric"].tolist())


def test_a_series_that_varies_on_one_device_only_is_drawn(tmp_path):
    run, _fabric = write_run(tmp_path / "run", ranks=2)
    analysis = analyze_run([run])
    flat = counterview.flat_metrics(analysis.counters, analysis.counter_bins)
    assert set(flat) == {NVLINK, PCIE, CLOCK}
    assert flat[NVLINK] == 0.0 and flat[PCIE] == 3.0 and flat[CLOCK] == 1410.0


def test_a_one_device_run_draws_lines_not_a_one_row_heat_map(tmp_path):
    sm = {0: [(0, 50), (40 * MS, 80), (70 * MS, 20), (100 * MS, 0)]}
    path = export_with(tmp_path / "r.sqlite", Counters(gpu={SM: sm}), steps=4)
    analysis = analyze_run([path])
    bins = analysis.counter_bins
    names, _width, means = counterview.heat_map(bins, SM)
    assert len(names) == 1 and np.isfinite(means).sum() > 3
    drawn = counterview.counter_png(bins, SM, "Throughput %")
    assert drawn == counterview.line_plot_png(bins, SM, "Throughput %") != counterview.heat_map_png(bins, SM, "%")
    run, _fabric = write_run(tmp_path / "eight", ranks=2)
    two = analyze_run([run])
    assert counterview.line_plot_png(two.counter_bins, SM, "%") is None  # two devices: a heat map
