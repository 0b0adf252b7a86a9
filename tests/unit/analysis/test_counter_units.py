"""Counters as people read them: rates in kB/s, MB/s, GB/s (10^3 steps, three significant digits), byte totals in
kB/MB/GB, clocks in MHz/GHz, percentages as %, in the terminal and report.html, while analysis.json keeps the raw
numbers and their unit fields; old-form GPU metric names (nsys <= 2023.3, no '[unit]') get their unit by name."""

from __future__ import annotations

import io
import json
import re

import pytest
from counter_fixtures import EFA_FIELDS, Counters
from real_exports import decompress
from rich.console import Console
from test_counters import MS, export_with

from nsyskit.analysis.compute import units
from nsyskit.analysis.outputs import analyze, write
from nsyskit.analysis.present import report
from nsyskit.analysis.read.counterread import unit_of
from nsyskit.analysis.trace import analyze_run

A100 = "aiprofiler_a100_thirdOptimization.sqlite"  # nsys 2022.4: GPU metrics as JSON events, names with no unit


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (3_714_501_196.58, "B/s", "3.71 GB/s"),  # the EFA rate
        (12_100_642_180.00, "B/s", "12.1 GB/s"),
        (371_450_119.6, "bytes/s", "371 MB/s"),
        (999.6, "B/s", "1.00 kB/s"),  # rounded first: never '1,000 B/s'
        (512, "B/s", "512 B/s"),
        (6_000_000, "B", "6.00 MB"),
        (1_154_756_491.76, "Hz", "1.15 GHz"),  # the old-form GPU clock
        (1410, "MHz", "1.41 GHz"),
        (810, "MHz", "810 MHz"),
        (65.13, "Throughput %", "65.1%"),
        (3.0, "%", "3.0%"),
        (1_154_756_491.76, "value", "1.15 G"),  # unknown unit: the number, readable, and the unit column says 'value'
        (None, "B/s", "-"),
    ],
)
def test_quantities_in_human_units(value, unit, shown):
    assert units.quantity(value, unit) == shown


def test_old_form_gpu_metric_names_get_their_unit_from_the_table_of_known_names():
    assert unit_of("GPC Clock Frequency") == unit_of("SYS Clock Frequency") == "Hz"
    for name in ("DRAM Read Throughput", "SM Active", "Tensor Active", "SM Issue", "GR Active",
                 "Compute Warps In Flight", "Unallocated Warps in Active SMs", "NVLink TX Requests User Data",
                 "NVLink RX Responses Protocol Data", "PCIe RX Throughput"):  # fmt: skip
        assert unit_of(name) == "%", name
    assert unit_of("Some Future Counter") == "value"
    assert unit_of("GPC Clock Frequency [MHz]") == "MHz" and unit_of("SMs Active [Throughput %]") == "Throughput %"


def test_a_real_old_form_export_reads_in_units_and_its_json_keeps_the_raw_numbers(tmp_path):
    export = decompress(A100, tmp_path)
    counters = analyze_run([export]).counters
    rows = {row["metric"]: row for row in counters.rows()}
    assert len(rows) == 22 and {row["unit"] for row in rows.values()} == {"Hz", "%"}  # every name of the export known
    clock = rows["GPC Clock Frequency"]
    assert 1e9 < clock["mean"] < 2e9 and clock["mean"] != round(clock["mean"])  # raw Hz, unrounded
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / A100).symlink_to(export)
    result = write(analyze([folder]))
    console = Console(file=io.StringIO(), width=220, color_system=None)
    report.print_report(result.report, console, top=30)  # every one of the 22 metrics
    text = console.file.getvalue()
    section = text[text.index("Counters sampled beside the trace") :]
    assert units.quantity(clock["mean"], "Hz") in section and "GHz" in section
    assert not re.search(r"\d{1,3}(,\d{3}){2,}\.\d\d", section)  # no '1,154,756,491.76' left
    saved = {row["metric"]: row for row in json.loads((folder / "analysis.json").read_text())["counters"]}
    assert saved["GPC Clock Frequency"]["mean"] == clock["mean"] and saved["GPC Clock Frequency"]["unit"] == "Hz"


def test_efa_rates_read_in_gb_per_second_in_the_terminal_and_the_report(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    efa = {0: [(t * MS, {name: 3_714_501_196.58 + t * 1e7 for name in EFA_FIELDS}) for t in range(0, 101, 10)]}
    export_with(folder / "rank_0.sqlite", Counters(efa=efa), steps=4)
    result = write(analyze([folder]))
    html = re.sub(r"<[^>]*>", " ", result.report_html.read_text())  # cells apart
    counters = html[html.index("Counters sampled beside the trace") :]
    console = Console(file=io.StringIO(), width=220, color_system=None)
    report.print_report(result.report, console)
    text = console.file.getvalue()
    for shown in (counters, text[text.index("Counters sampled") :]):
        assert re.search(r"\b[34]\.\d\d GB/s\b", shown) and "MB" in shown  # rates and the bytes moved
        assert not re.search(r"\d{1,3}(,\d{3}){2,}", shown)  # no raw B/s
    saved = json.loads((folder / "analysis.json").read_text())["counters"][0]
    assert saved["unit"] == "B/s" and saved["mean"] > 3.7e9 and saved["total_unit"] == "B"
