"""Nsight Compute analysis: the real ncu CLI on real reports, and the parsing on CSV in ncu's --page raw form (real
H100 imports by ncu 2025.3 and launches the tests write, in both generations of ncu's unit spellings)."""

from __future__ import annotations

import csv
import io
import lzma
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from nsyskit import hostpkgs
from nsyskit.analysis.profilers import ncu
from nsyskit.errors import AnalysisError

# Reports NVIDIA ships with Debian's nsight-compute (an RTX A2000 profiled with the detailed set): the only
# .ncu-rep files a machine without a GPU has. addConstDouble adds a constant to each double: 1 FLOP per 16 bytes.
EXAMPLES = Path("/usr/share/doc/nsight-compute/examples/uncoalescedGlobalAccesses")


# `ncu --import X.ncu-rep --csv --page raw [--print-units base]` of reports of the example recorded on an H100 by ncu
# 2025.3.1 (tests/data/ncu/README.md): --set basic (30 launches) with and without base units, --set roofline (12).
REAL = Path(__file__).resolve().parents[2] / "data" / "ncu"


def real_csv(name: str) -> str:
    return lzma.decompress((REAL / f"h100_ncu_{name}.csv.xz").read_bytes()).decode()


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


# A GPU launch as ncu prints it without --print-units base (scaled units), in ncu 2022's spellings; values chosen
# so every derived figure can be computed by hand.
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
# The same launch in ncu 2025's short spellings (as the real H100 imports print them), scaled and in base units.
SHORT_UNITS = {**AUTO_UNITS, ncu.DURATION: "us", ncu.DRAM_RATE: "Tbyte/s", ncu.SMSP_CLOCK: "Ghz", ncu.SM_CLOCK: "Ghz"}
BASE_UNITS = {**AUTO_UNITS, ncu.DURATION: "ns", ncu.DRAM_RATE: "byte/s", ncu.SMSP_CLOCK: "hz", ncu.SM_CLOCK: "hz"}
GEMM = {
    "ID": "0", "Kernel Name": "ampere_sgemm_128x64_nn", ncu.DURATION: "1,250.50",
    ncu.SM_THROUGHPUT: "81.5", ncu.MEMORY_THROUGHPUT: "40.25", ncu.ACHIEVED_OCCUPANCY: "48.0",
    ncu.DRAM_RATE: "1.5", ncu.SMSP_CLOCK: "1.5", ncu.SM_CLOCK: "1.5",
    ncu.INST_RATE.format(op="fadd"): "10", ncu.INST_RATE.format(op="fmul"): "0", ncu.INST_RATE.format(op="ffma"): "20",
    ncu.INST_RATE.format(op="dadd"): "0", ncu.INST_RATE.format(op="dmul"): "0", ncu.INST_RATE.format(op="dfma"): "0",
    ncu.PEAK_FMA.format(op="ffma"): "4096", ncu.PEAK_FMA.format(op="dfma"): "2048",
}  # fmt: skip
GEMM_IN_BASE_UNITS = {**GEMM, ncu.DURATION: "1,250,500", ncu.DRAM_RATE: "1,500,000,000,000",
                      ncu.SMSP_CLOCK: "1,500,000,000", ncu.SM_CLOCK: "1,500,000,000.00"}  # fmt: skip


@pytest.mark.parametrize(("launch", "units"), [(GEMM, AUTO_UNITS), (GEMM, SHORT_UNITS), (GEMM_IN_BASE_UNITS, BASE_UNITS)],
                         ids=["ncu-2022-scaled", "ncu-2025-scaled", "base-units"])  # fmt: skip
def test_a_launch_gives_speed_of_light_occupancy_and_roofline_in_any_unit_spelling(launch, units):
    units, launches = ncu.parse_raw_csv(raw_csv([launch], units))
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
    # ncu 2025's short forms: time, clocks (hz) and per-second rates, with every SI prefix.
    assert ncu.in_base_units(31_232, "ns") == pytest.approx(31.232e-6) == ncu.in_base_units(31.232, "us")
    assert ncu.in_base_units(2.5, "ms") == pytest.approx(2.5e-3) and ncu.in_base_units(4, "s") == 4
    assert ncu.in_base_units(1.58, "Ghz") == pytest.approx(1.58e9) and ncu.in_base_units(1.58e9, "hz") == 1.58e9
    assert ncu.in_base_units(2.6, "Tbyte/s") == pytest.approx(2.6e12) and ncu.in_base_units(7, "byte/s") == 7
    assert ncu.in_base_units(32, "Kbyte/block") == 32_000 and ncu.in_base_units(1.5, "Mhz") == 1.5e6
    assert ncu.in_base_units(3, "SM") == 3 and ncu.in_base_units(5, "pass") == 5 and ncu.in_base_units(2, "inst/cycle") == 2


def test_real_h100_base_and_default_unit_imports_agree():
    base_units, base = ncu.parse_raw_csv(real_csv("basic_base_units"))
    auto_units, auto = ncu.parse_raw_csv(real_csv("basic_default_units"))
    assert auto_units[ncu.DURATION] == "us" and base_units[ncu.DURATION] == "ns" and len(base) == len(auto) == 30
    first = base[0][ncu.DURATION]
    durations = ncu.launch_table(0, base_units, base)["duration_ns"]
    assert durations[0] == float(first.replace(",", "")) == 31_232  # was 31,232 s: 'ns' read as seconds
    assert list(ncu.launch_table(0, auto_units, auto)["duration_ns"]) == pytest.approx(list(durations), rel=1e-6)
    # Every metric ncu scaled in the default import ('us', 'Ghz', 'Gbyte', 'Kbyte/block') converts to the base value.
    # Not '%/Kbyte' (occupancy per shared memory size): ncu's base import multiplies it by 1000 (a per-byte figure
    # 1000 times the per-Kbyte one), which no unit conversion can give.
    scaled = [m for m, unit in auto_units.items() if unit != base_units[m] and "/K" not in unit]
    assert {auto_units[m] for m in scaled} >= {"us", "Ghz", "Gbyte", "Kbyte/block"} and len(scaled) == 26
    for launch_base, launch_auto in zip(base, auto, strict=True):
        for name in scaled:
            assert ncu.metric(launch_auto, auto_units, name) == pytest.approx(
                ncu.metric(launch_base, base_units, name), rel=1e-5), name  # fmt: skip


def test_real_h100_roofline_by_hand_from_the_raw_fields():
    units, launches = ncu.parse_raw_csv(real_csv("roofline_base_units"))
    table = ncu.launch_table(0, units, launches)
    assert len(table) == 12 and units[ncu.DRAM_RATE] == "byte/s" and units[ncu.SM_CLOCK] == "hz"
    raw = next(launch for launch in launches if launch["ID"] == "1")  # an fp32 elementwise kernel: FMULs only
    row = next(r for r in table.rows() if r["id"] == 1)

    def field(metric: str) -> float:
        return float(raw[metric].replace(",", ""))

    fp32_per_cycle = sum(field(ncu.INST_RATE.format(op=op)) for op in ("fadd", "fmul")) + 2 * field(
        ncu.INST_RATE.format(op="ffma"))  # fmt: skip
    achieved = fp32_per_cycle * field(ncu.SMSP_CLOCK)  # FLOP/s: 520.48 FMUL/cycle x 1.584 GHz
    peak = 2 * field(ncu.PEAK_FMA.format(op="ffma")) * field(ncu.SM_CLOCK)  # 2 x 16,896 FFMA/cycle x 1.584 GHz
    dram = field(ncu.DRAM_RATE)
    assert row["duration_ns"] == field(ncu.DURATION) == 30_528
    assert row["precision"] == "fp32"
    assert row["achieved_gflops"] == pytest.approx(achieved / 1e9) == pytest.approx(824.35, abs=0.01)
    assert row["peak_gflops"] == pytest.approx(peak / 1e9) == pytest.approx(53_520.6, abs=0.1)
    assert row["of_peak_flops_pct"] == pytest.approx(achieved * 100 / peak)
    assert row["dram_gbps"] == pytest.approx(dram / 1e9) == pytest.approx(2616.38, abs=0.01)
    assert row["intensity_flop_per_byte"] == pytest.approx(achieved / dram)
    # The H100's limits bound every launch: under 3.35 TB/s of HBM3, under the fp32 peak at its clock.
    assert all(0 <= r["dram_gbps"] < 3350 and 0 <= r["achieved_gflops"] < r["peak_gflops"] for r in table.rows())
    assert all(1_000 < d < 100_000 for d in table["duration_ns"])  # 3-59 us kernels, not hours


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
