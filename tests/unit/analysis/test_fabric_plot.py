"""The ceiling on the plot: with --fabric, nccl_busbw.png and report.html draw the busbw nccl-tests measured (each
test's own points joined, its file and ranks in the legend) and the run's buckets (median, p10-p90, the ratio
beside each) on the same axes, with the function 'invoke nccl-tests --plot' draws with; without --fabric the
plot is the run's own curve, as before."""

from __future__ import annotations

import base64
import math
import subprocess
import sys
from pathlib import Path

import pytest
from fabric_counters_run import write_run
from test_fabric import log_interpolated

from nsyskit.analysis.compute.ncclcurve import busbw_by_size
from nsyskit.analysis.outputs import analyze, write
from nsyskit.analysis.present import plots
from nsyskit.analysis.request import AnalyzeRequest
from nsyskit.nccltests import ceiling_from
from nsyskit.nccltests.plot import busbw_figure, busbw_plot

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def fabric_run(tmp_path_factory):
    run, output = write_run(tmp_path_factory.mktemp("fabric") / "run")
    request = AnalyzeRequest([str(run)], fabric=[str(output)]).check()
    return write(analyze([run], inputs=request.judge_inputs())), output


def test_the_run_points_sit_at_nccl_tests_sizes_with_their_range_and_ratio(fabric_run):
    result, output = fabric_run
    points = {(p.op, round(p.size)): p for p in plots.run_points(result.analysis.nccl_sizes)}
    for row in result.analysis.nccl_sizes.rows():
        size = row["bytes"] / row["count"] * (row["nranks"] if row["op"] == "AllGather" else 1)
        point = points[row["op"], round(size)]
        assert (point.low, point.median, point.high) == (row["busbw_p10_gbps"], row["busbw_median_gbps"], row["busbw_p90_gbps"])  # fmt: skip
        if row["op"] == "AllReduce":  # measured: the ratio to the test's curve at that size
            assert point.ratio == pytest.approx(row["busbw_median_gbps"] / log_interpolated(size), rel=1e-12)
        else:  # AllGather: no all_gather_perf given, no ratio to write
            assert point.ratio is None


def test_the_figure_holds_the_measured_curve_the_run_and_each_ratio(fabric_run):
    result, output = fabric_run
    ceiling = ceiling_from([str(output)])
    points = plots.run_points(result.analysis.nccl_sizes)
    fig = busbw_figure(ceiling.tests, run=points)
    ax = fig.axes[0]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[0] == f"nccl-tests all_reduce_perf ({output.name}:9, 2 ranks)"
    assert "run AllReduce (n=8): median, p10-p90" in legend and "run AllGather (n=4): median, p10-p90" in legend
    [measured] = [line for line in ax.get_lines() if line.get_label().startswith("nccl-tests")]
    assert list(measured.get_xdata()) == [1 << 10, 1 << 20, 16 << 20, 256 << 20]  # the test's own points, joined
    written = sorted(text.get_text() for text in ax.texts)
    expected = sorted(f"{p.ratio * 100:.0f}% of nccl-tests" for p in points if p.ratio is not None)
    assert written == expected and len(written) == 3 and not math.isnan(points[0].median)
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_report_and_its_png_draw_with_the_nccl_tests_plot_function(fabric_run):
    result, output = fabric_run
    drawn = (result.folder / "nccl_busbw.png").read_bytes()
    same = busbw_plot(ceiling_from([str(output)]).tests, run=plots.run_points(result.analysis.nccl_sizes))
    assert drawn == same
    html = result.report_html.read_text()
    assert base64.b64encode(drawn).decode() in html


def test_without_fabric_the_plot_is_the_runs_own_curve(tmp_path):
    run, _output = write_run(tmp_path / "run", ranks=2)
    result = write(analyze([run]))
    assert (run / "nccl_busbw.png").read_bytes() == plots.nccl_busbw(busbw_by_size(result.analysis.nccl))


def test_nccl_tests_plot_draws_with_the_same_function(tmp_path):
    _run, output = write_run(tmp_path / "run", ranks=1)
    target = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, "-m", "nsyskit", "nccl-tests", str(output), "--plot", str(target)],
                          cwd=ROOT, capture_output=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_bytes() == busbw_plot(ceiling_from([str(output)]).tests)
