"""invoke analyze on real Nsight Systems exports and reports recorded by other people on real GPUs
(../shared/real-data): every export is analyzed, its kernel totals equal NVIDIA's `nsys stats`, its GPU busy time
equals an interval union computed here independently; the old .qdrep is exported; a newer report gets the version
message."""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from fixtures.realdata import REAL_DATA, need
from fixtures.unprivileged import as_nobody

from nsyskit.analysis import run_analysis
from nsyskit.analysis.read import nsys

ROOT = Path(__file__).resolve().parents[2]
REAL = REAL_DATA
OURS = ROOT / "tests" / "data" / "real" / "nsys-exports"  # recorded by this project on real GPUs (its README)
EXPORTS = sorted([*(REAL / "nsys-exports").glob("*.sqlite.xz"), *OURS.glob("*.sqlite.xz")])
REPORTS = REAL / "nsys-reports"
NAMES = [p.name.removesuffix(".sqlite.xz") for p in EXPORTS]
# Recorded by an nsys older than the CUDA it ran on: no kernel at all, for nsys stats as for the analysis (its README)
KERNELLESS = {"h200_gpt2_ddp_nsys2022.4_cuda13"}
# Exported without --include-blobs: NCCL's payload schemas are there, its values are not (tests/data/real/README.md);
# the analysis says so in one warning naming the fix, and only for them.
PAYLOADLESS = {"h100_gpt2_ddp_nsys2025.3.1", "nsysai_mfu_2gpu_after", "nsysai_mfu_2gpu_before"}
# Without ../shared its exports are one name, whose tests skip with the reason (fail where the data is required).
NAMES += [] if any((REAL / "nsys-exports").glob("*.sqlite.xz")) else ["shared-real-exports"]


class Exports(dict):
    """Decompressed exports by name; a name of ../shared's that this checkout lacks skips the test (see realdata)."""

    def __missing__(self, name: str) -> Path:
        need(REAL / "nsys-exports")
        raise KeyError(name)
INVOKE = [str(Path(sys.executable).parent / "invoke"), "--search-root", str(ROOT)]


@pytest.fixture(scope="session")
def nsys_cli() -> str:
    """The real nsys (Debian's 2022.4 here), installed when missing."""
    return nsys.ensure_installed()


@pytest.fixture(scope="session")
def real_exports(tmp_path_factory) -> Exports:
    """Every real export, decompressed once into a temporary folder."""
    assert EXPORTS, f"no real exports under {REAL}"
    folder = tmp_path_factory.mktemp("real-exports")
    found = Exports()
    for packed in EXPORTS:
        target = folder / packed.name.removesuffix(".xz")
        target.write_bytes(lzma.decompress(packed.read_bytes()))
        found[target.stem] = target
    return found


def independent_busy(path: Path) -> list[int]:
    """Per (process, device): the length of the union of kernel, memcpy and memset intervals, by a plain sweep."""
    con = sqlite3.connect(path)
    con.text_factory = bytes
    tables = {r[0].decode() for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    spans = defaultdict(list)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in tables:
            for pid, device, start, end in con.execute(f"SELECT globalPid, deviceId, start, end FROM {table}"):
                spans[(pid, device)].append((start, end))
    con.close()
    busy = []
    for intervals in spans.values():
        total, reach = 0, None
        for start, end in sorted(intervals):
            if reach is None or start > reach:
                total, reach = total + (end - start), end
            elif end > reach:
                total, reach = total + (end - reach), end
        busy.append(total)
    return sorted(busy)


def nsys_kernel_totals(path: Path) -> dict[str, tuple[int, int]]:
    """nsys stats' kernel summary per kernel name: (total ns, instances) (it splits a name by grid/block: summed)."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in nsys.stats(path, "kernel"):
        totals[row["Name"]][0] += int(row["Total Time (ns)"])
        totals[row["Name"]][1] += int(row["Instances"])
    return {name: (t, n) for name, (t, n) in totals.items()}


@pytest.mark.parametrize("name", NAMES)
def test_real_export_matches_nsys_stats_and_interval_union(nsys_cli, real_exports, name):
    path = real_exports[name]
    analysis, _ = run_analysis([path], write=False)
    ours: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for table in analysis.kernel_summaries.values():  # a file with several processes: one summary per rank
        for row in table.rows():
            ours[row["name"]][0] += row["total_ns"]
            ours[row["name"]][1] += row["instances"]
    expected = nsys_kernel_totals(path)
    assert {n: tuple(v) for n, v in ours.items()} == expected
    assert expected or name in KERNELLESS
    assert sorted(analysis.breakdown["busy_ns"].tolist()) == independent_busy(path)
    assert (analysis.breakdown["busy_ns"] <= analysis.breakdown["window_ns"]).all()
    versions = list(analysis.nsys_versions.values())  # the rank its name gives (jacobi_report1_rank_3: rank 3)
    assert versions and all(v.startswith("20") for v in versions)
    if name in PAYLOADLESS:
        assert len(analysis.warnings) == 1 and "--include-blobs=true" in analysis.warnings[0]
    else:
        assert not analysis.warnings


@pytest.mark.parametrize("summary", sorted(OURS.glob("*.cuda_gpu_kern_sum.csv")), ids=lambda p: p.name)
def test_kernel_summary_equals_the_recording_nsys_own(real_exports, summary):
    """The nsys that recorded an export (2025.3 on an H100, newer than the host's) summarized it there: same numbers."""
    import csv

    analysis, _ = run_analysis([real_exports[summary.name.removesuffix(".cuda_gpu_kern_sum.csv")]], write=False)
    ours = {row["name"]: (row["total_ns"], row["instances"], row["min_ns"], row["max_ns"])
            for row in analysis.kernel_summaries[0].rows()}  # fmt: skip
    with summary.open(newline="") as handle:
        theirs = {row["Name"]: (int(row["Total Time (ns)"]), int(row["Instances"]), int(row["Min (ns)"]),
                                int(row["Max (ns)"])) for row in csv.DictReader(handle)}  # fmt: skip
    assert len(theirs) > 50 and ours == theirs


def test_two_processes_in_one_file_are_two_ranks(real_exports):
    # A torchrun capture of 2 ranks on 2 GPUs recorded into one file: each process is a rank with its own device.
    analysis, _ = run_analysis([real_exports["nsysai_mfu_2gpu_after"]], write=False)
    assert sorted(analysis.sources) == [0, 1] and analysis.ranks["rank"].tolist() == [0, 1]
    assert [set(analysis.breakdown["device"][analysis.breakdown["rank"] == r].tolist()) for r in (0, 1)] == [{0}, {1}]
    assert len(set(analysis.nvtx["rank"].tolist())) == 2
    # PyTorch's 'nccl:all_to_all, op_id = N' (unique per call) group into one AllToAll row per rank pair; the NCCL
    # domain's ncclSend/ncclRecv become Send/Recv; ncclGroupStart/End and ncclCommCount are not operations.
    sizes = {(r["op"], r["origin"]): r["count"] for r in analysis.nccl_sizes.rows()}
    assert sizes == {("AllToAll", "pytorch"): 60, ("Send/Recv", "nccl-nvtx"): 240}
    assert not any("op_id" in name for name in analysis.nvtx["name"])
    gpu = {(r["rank"], r["name"]): r for r in analysis.nvtx_gpu.rows()}
    assert gpu[(0, "FlashAttnFunc")]["gpu_proj_total_ns"] > gpu[(0, "FlashAttnFunc")]["cpu_total_ns"] > 0


def test_cli_on_real_export_with_binary_env_blob(real_exports):
    # nsys <= 2022.4 keep a protobuf blob in TARGET_INFO_SYSTEM_ENV.value: it must not stop the analysis.
    path = real_exports["aiprofiler_a100_baseline"]
    con = sqlite3.connect(path)
    con.text_factory = bytes
    blobs = [v for (v,) in con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV")]
    con.close()
    assert any(_not_utf8(v) for v in blobs)
    result = subprocess.run([*INVOKE, "analyze", "--json", "--no-html", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ranks"][0]["host"] == "dgx02" and data["kernel_summary"]["0"] and "Traceback" not in result.stderr


def _not_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_qdrep_is_exported_and_analyzed(nsys_cli, tmp_path):
    report = tmp_path / "single_gpu_jacobi_report.qdrep"
    shutil.copy(need(REPORTS) / report.name, report)
    result = subprocess.run([*INVOKE, "analyze", "--json", "--no-html", str(report)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    export = report.with_suffix(".sqlite")
    assert export.exists()
    data = json.loads(result.stdout)
    ours = {r["name"]: (r["total_ns"], r["instances"]) for r in data["kernel_summary"]["0"]}
    assert ours == nsys_kernel_totals(export) and ours
    assert nsys.recorded_version(report).startswith("2020.5.1")


def test_report_newer_than_installed_nsys_gets_the_version_message(nsys_cli, tmp_path):
    report = tmp_path / "young768_report1.nsys-rep"
    shutil.copy(need(REPORTS) / "young768_report1_nsys2023.2.nsys-rep", report)
    installed = nsys.version(nsys_cli)
    result = subprocess.run([*INVOKE, "analyze", str(report)], capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr
    if installed >= "2023.2.3":
        pytest.skip(f"the installed nsys {installed} reads this report")  # not here: Debian's 2022.4 cannot
    assert "recorded by nsys 2023.2.3.1004" in lines[0] and f"installed nsys {installed}" in lines[0]
    assert "export it with nsys >= 2023.2.3" in lines[0] and "corrupt" not in lines[0]


def test_export_cache_key_is_stable_across_processes(nsys_cli, world_dir):
    # A report in a read-only folder is exported into the user's cache under a key that does not change per run
    # (run as an unprivileged user: root ignores the folder's mode).
    folder = world_dir / "ro"
    folder.mkdir()
    shutil.copy(need(REPORTS) / "single_gpu_jacobi_report.qdrep", folder / "r.qdrep")
    folder.chmod(0o555)
    env = {"XDG_CACHE_HOME": str(world_dir / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(world_dir)}
    code = "import sys; from pathlib import Path; from nsyskit.analysis.read import nsys; print(nsys.export_sqlite(Path(sys.argv[1])))"
    runs = [as_nobody([sys.executable, "-c", code, str(folder / "r.qdrep")], env) for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr
    target = Path(runs[0].stdout.strip())
    assert runs[0].stdout == runs[1].stdout and target.parent == world_dir / "cache" / "nsyskit" / "exports"
    assert [p.name for p in target.parent.iterdir()] == [target.name] and not (folder / "r.sqlite").exists()
