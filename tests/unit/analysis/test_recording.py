"""kernels_not_recorded: a report with GPU copies but no kernel says so first, and the kernel-time rules stay silent.

The real case (tests/data/real, recorded by the kit on an H200): Debian's nsys 2022.4 (CUPTI 11.8) on a CUDA 13.0
driver recorded the copies, NVTX ranges and a few CUDA calls of the kit's GPT-2 example, and not one kernel.
Every real export that recorded its kernels must not fire it.
"""

from __future__ import annotations

import sqlite3

import pytest
from real_exports import PACKED, decompress

from nsyskit.analysis.compute.metrics import view_of
from nsyskit.analysis.judge import findings, recording
from nsyskit.analysis.judge.findings import find
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.trace import analyze_run

H200 = "h200_gpt2_ddp_nsys2022.4_cuda13.sqlite"  # tests/data/real: in every clone


def rules_of(export, rules=findings.RULES) -> list[str]:
    """The rules that fire on one export, in the order the findings are shown."""
    return [f.rule for f in find(view_of(analyze_run([export], workers=1)), rules)]


def test_the_old_nsys_on_cuda_13_is_named_first_with_what_it_recorded(real_exports_dir):
    export = decompress(H200, real_exports_dir)
    with sqlite3.connect(export) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        copies = sum(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET") if table in tables)  # fmt: skip
        driver = db.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'CudaDriverVersion'").fetchone()[0]
    assert not {t for t in tables if "KERNEL" in t} and copies > 100 and driver == "13000"
    found = find(view_of(analyze_run([export], workers=1)))
    first = found[0]
    assert first.rule == "kernels_not_recorded" and first.ranks == (0,)
    assert first.evidence == {"ranks_without_kernels": 1.0, "copies_and_memsets": float(copies),
                              "nsys_version": 202204.0, "cuda_driver_version": 13.0}  # fmt: skip
    assert first.title.startswith("nsys 2022.4 on a CUDA 13.0 driver recorded no GPU kernel on rank 0")
    assert "at least as new as the CUDA" in first.advice


def test_the_kernel_time_rules_stay_silent_when_no_rank_recorded_a_kernel(real_exports_dir):
    export = decompress(H200, real_exports_dir)
    without_it = rules_of(export, tuple(rule for rule in findings.RULES if rule is not recording.kernels_not_recorded))
    assert "gpu_idle" in without_it  # the copies alone: the GPU looks 99.8% idle
    found = rules_of(export)
    assert not set(found) & recording.KERNEL_TIME_RULES
    assert "low_mfu" in found  # step times and the example's FLOPs mark are still right


def test_it_survives_the_cluster_merge(tmp_path, real_exports_dir):
    export = decompress(H200, real_exports_dir)
    whole = find(view_of(analyze_run([export], workers=1)))
    map_reports([export], tmp_path / "parts")
    merged, _facts = merge_parts(tmp_path / "parts")
    assert [f.to_json() for f in find(view_of(merged))] == [f.to_json() for f in whole]


@pytest.mark.parametrize("name", sorted(set(PACKED) - {H200}))
def test_reports_that_recorded_their_kernels_never_fire_it(name, real_exports_dir):
    assert "kernels_not_recorded" not in rules_of(decompress(name, real_exports_dir))
