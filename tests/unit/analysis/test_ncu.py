"""Nsight Compute analysis: the real ncu CLI on real reports, and the parsing on CSV in ncu's --page raw form."""

from __future__ import annotations

import csv
import io
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from nsyskit import hostpkgs
from nsyskit.analysis import ncu
from nsyskit.errors import AnalysisError

# Reports NVIDIA ships with Debian's nsight-compute (an RTX A2000 profiled with the detailed set): the only
# .ncu-rep files a machine without a GPU has. addConstDouble adds a constant to each double: 1 FLOP per 16 bytes.
EXAMPLES = Path("/usr/share/doc/nsight-compute/examples/uncoalescedGlobalAccesses")


@pytest.fixture(scope="module")
def installed_ncu() -> str:
    """Debian's ncu on this machine (installed through the kit's host step when missing, as on a fresh machine)."""
    if shutil.which("ncu") is None:
        hostpkgs.install("ncu")
    assert EXAMPLES.is_dir(), f"nsight-compute installed without its examples in {EXAMPLES}"
    return shutil.which("ncu")


def raw_csv(launches: list[dict[str, str]], units: dict[str, str]) -> str:
    """CSV as 'ncu --csv --page raw' prints it: metric names, their units, one row per launch, all quoted."""
    names = ["ID", "Kernel Name", *units]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(names)
    writer.writerow(["", "", *units.values()])
    for launch in launches:
        writer.writerow([launch.get(name, "") for name in names])
    return "==PROF== Connected to process 42 (/usr/bin/python3)\n" + out.getvalue()


# A GPU launch as ncu prints it without --print-units base (scaled units): values chosen so every derived
# figure can be computed by hand.
AUTO_UNITS = {
    ncu.DURATION: "usecond",
    ncu.SM_THROUGHPUT: "%",
    ncu.MEMORY_THROUGHPUT: "%",
    ncu.ACHIEVED_OCCUPANCY: "%",
    ncu.DRAM_RATE: "Tbyte/second",
    ncu.SMSP_CLOCK: "cycle/nsecond",
    ncu.SM_CLOCK: "cycle/nsecond",
    **{ncu.INST_RATE.format(op=op): "inst/cycle" for ops in ncu.PRECISIONS.values() for op in ops},
    **{ncu.PEAK_FMA.format(op=op): "inst/cycle" for op in ("ffma", "dfma")},
}
GEMM = {
    "ID": "0", "Kernel Name": "ampere_sgemm_128x64_nn", ncu.DURATION: "1,250.50",
    ncu.SM_THROUGHPUT: "81.5", ncu.MEMORY_THROUGHPUT: "40.25", ncu.ACHIEVED_OCCUPANCY: "48.0",
    ncu.DRAM_RATE: "1.5", ncu.SMSP_CLOCK: "1.5", ncu.SM_CLOCK: "1.5",
    ncu.INST_RATE.format(op="fadd"): "10", ncu.INST_RATE.format(op="fmul"): "0", ncu.INST_RATE.format(op="ffma"): "20",
    ncu.INST_RATE.format(op="dadd"): "0", ncu.INST_RATE.format(op="dmul"): "0", ncu.INST_RATE.format(op="dfma"): "0",
    ncu.PEAK_FMA.format(op="ffma"): "4096", ncu.PEAK_FMA.format(op="dfma"): "2048",
}  # fmt: skip


def test_a_launch_in_scaled_units_gives_speed_of_light_occupancy_and_roofline():
    units, launches = ncu.parse_raw_csv(raw_csv([GEMM], AUTO_UNITS))
    (row,) = ncu.launch_table(3, units, launches).rows()
    assert row["rank"] == 3 and row["name"] == "ampere_sgemm_128x64_nn"
    assert row["duration_ns"] == pytest.approx(1_250_500)  # '1,250.50' usecond
    assert (row["sm_throughput_pct"], row["memory_throughput_pct"], row["achieved_occupancy_pct"]) == (81.5, 40.25, 48.0)
    assert row["precision"] == "fp32"
    assert row["achieved_gflops"] == pytest.approx((10 + 0 + 2 * 20) * 1.5)  # fadd + fmul + 2 x ffma per cycle x GHz
    assert row["peak_gflops"] == pytest.approx(2 * 4096 * 1.5)
    assert row["dram_gbps"] == pytest.approx(1500)
    assert row["intensity_flop_per_byte"] == pytest.approx(75e9 / 1.5e12)
    assert row["of_peak_flops_pct"] == pytest.approx(75e9 * 100 / 12.288e12)


def test_sections_not_collected_stay_empty_and_fp64_wins_when_it_dominates():
    # The roofline set has no Occupancy section: no achieved occupancy. A DFMA-only kernel is placed on the fp64 roof.
    launch = {k: v for k, v in GEMM.items() if k != ncu.ACHIEVED_OCCUPANCY}
    launch.update({ncu.INST_RATE.format(op="ffma"): "0", ncu.INST_RATE.format(op="fadd"): "0",
                   ncu.INST_RATE.format(op="dfma"): "8"})  # fmt: skip
    units = {k: v for k, v in AUTO_UNITS.items() if k != ncu.ACHIEVED_OCCUPANCY}
    (row,) = ncu.launch_table(0, *ncu.parse_raw_csv(raw_csv([launch], units))).rows()
    assert row["achieved_occupancy_pct"] is None  # NaN: shown as "-" and null in JSON
    assert row["precision"] == "fp64" and row["peak_gflops"] == pytest.approx(2 * 2048 * 1.5)


def test_launches_of_one_kernel_are_summarized_per_name():
    second = {**GEMM, "ID": "1", ncu.DURATION: "749.5", ncu.SM_THROUGHPUT: "71.5"}
    other = {**GEMM, "ID": "2", "Kernel Name": "vectorized_elementwise_kernel", ncu.DURATION: "10"}
    units, launches = ncu.parse_raw_csv(raw_csv([GEMM, second, other], AUTO_UNITS))
    summary = ncu.kernel_summary(ncu.launch_table(0, units, launches))
    first = next(summary.rows())
    assert first["name"] == "ampere_sgemm_128x64_nn" and first["launches"] == 2
    assert first["total_ns"] == pytest.approx(2_000_000) and first["sm_throughput_pct"] == pytest.approx(76.5)
    assert len(summary) == 2


def test_unit_conversion():
    assert ncu.in_base_units(2, "Gbyte/second") == 2e9
    assert ncu.in_base_units(543.8, "cycle/usecond") == pytest.approx(543.8e6)
    assert ncu.in_base_units(25.17, "Mbyte") == pytest.approx(25.17e6)
    assert ncu.in_base_units(7, "%") == 7 and ncu.in_base_units(3, "") == 3
    assert math.isnan(ncu.number("n/a")) and ncu.number("1,024") == 1024


def test_an_import_without_launches_gives_no_rows():
    assert ncu.parse_raw_csv("==PROF== Disconnected from process 42\n") == ({}, [])


def test_real_reports_through_the_real_ncu(tmp_path, installed_ncu):
    for rank, name in enumerate(("addConstDouble", "addConstDouble3")):
        shutil.copy(EXAMPLES / f"{name}.ncu-rep", tmp_path / f"run1_node0_rank{rank}_gpu-host.ncu-rep")
    launches, kernels, sources, notes = ncu.analyze_reports([tmp_path])
    assert sorted(sources) == [0, 1] and notes == []
    first = next(launches.take(launches["rank"] == 0).rows())
    assert first["name"].startswith("addConstDouble(")
    # The same figures ncu's own details page shows for this launch (Speed of Light and Occupancy sections).
    details = subprocess.run(["ncu", "--import", sources[0], "--csv", "--page", "details"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    shown = {row[9]: (row[10], ncu.number(row[11])) for row in list(csv.reader(io.StringIO(details)))[1:] if len(row) > 11}
    assert first["duration_ns"] == pytest.approx(ncu.in_base_units(*reversed(shown["Duration"])) * 1e9, rel=1e-4)
    assert first["sm_throughput_pct"] == pytest.approx(shown["Compute (SM) [%]"][1], abs=0.01)
    assert first["achieved_occupancy_pct"] == pytest.approx(shown["Achieved Occupancy"][1], abs=0.01)
    # One double add per 8 bytes read and 8 written: the roofline puts it at 1/16 FLOP/byte, on the fp64 roof.
    assert first["precision"] == "fp64"
    assert first["intensity_flop_per_byte"] == pytest.approx(1 / 16, rel=0.05)
    assert 0 < first["of_peak_flops_pct"] < 100
    assert len(kernels) == 2 and set(kernels["launches"]) == {1}


def test_a_corrupt_report_is_a_one_line_error(tmp_path, installed_ncu):
    bad = tmp_path / "job_node0_rank0_h.ncu-rep"
    bad.write_bytes(b"not a report")
    with pytest.raises(AnalysisError, match="ncu --import failed") as error:
        ncu.analyze_reports([bad])
    assert "\n" not in str(error.value) and str(bad) in str(error.value)


def test_missing_reports_and_missing_ncu_are_named(tmp_path, monkeypatch):
    with pytest.raises(AnalysisError, match="no Nsight Compute reports"):
        ncu.find_reports([tmp_path])
    (tmp_path / "job_node0_rank0_h.ncu-rep").write_bytes(b"x")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AnalysisError, match="apt-get install nsight-compute"):
        ncu.analyze_reports([tmp_path])
