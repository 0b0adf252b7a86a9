"""analyze --k8s: the rendered Indexed Job and merge Job run as containers of the kit's image (tests/integration/
k8s_jobs.py: no API server can run here) over a claim's folder, and make exactly what 'nsyskit analyze' makes."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from k8s_jobs import run_job  # tests/integration is on sys.path

ROOT = Path(__file__).resolve().parents[2]
H100_EXPORT = ROOT / "tests" / "data" / "real" / "nsys-exports" / "h100_gpt2_ddp_nsys2025.3.1.sqlite.xz"
pytestmark = [pytest.mark.engine]
RANKS = 12


def nsyskit(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NSYSKIT_", "SLURM_", "AWS_"))}
    return subprocess.run([sys.executable, "-m", "nsyskit", *args], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def shared_run(tmp_path: Path, name: str, ranks: int, kit_image: str) -> tuple[Path, Path, Path, dict[str, str]]:
    """A claim's folder holding a run of `ranks` copies of the real H100 export, a login node's project folder, and
    the settings that point analyze --k8s at both: (shared, project, run, settings)."""
    shared, project = tmp_path / "fsx", tmp_path / "login-node"
    run = shared / "runs" / name
    run.mkdir(parents=True)
    project.mkdir()
    data = lzma.decompress(H100_EXPORT.read_bytes())
    for rank in range(ranks):
        (run / f"nsyskit_node_{rank // 4}_rank_{rank}.sqlite").write_bytes(data)
    image, _sep, tag = kit_image.rpartition(":")
    settings = {"NSYSKIT_K8S_REPORT_PVC": "fsx-claim", "NSYSKIT_K8S_SHARED_DIR": str(shared),
                "NSYSKIT_IMAGE": image, "NSYSKIT_TAG": tag}  # fmt: skip
    return shared, project, run, settings


def test_indexed_job_maps_and_the_merge_job_waits_then_makes_what_analyze_makes(kit_image, tmp_path):
    shared, project, run, settings = shared_run(tmp_path, "wide", RANKS, kit_image)
    rendered = nsyskit(project, "analyze", str(run), "--k8s", "--dry-run", "--slurm-max-parallel", "4", **settings)
    assert rendered.returncode == 0, rendered.stderr
    manifest = run / "analysis-jobs" / "k8s-jobs.yaml"
    assert f"rendered {manifest} (nothing submitted)" in rendered.stdout
    map_job, merge_job = yaml.safe_load_all(manifest.read_text())
    assert map_job["spec"]["completions"] == RANKS and map_job["spec"]["parallelism"] == 4

    claims = {"fsx-claim": shared}
    with ThreadPoolExecutor(max_workers=1) as pool:
        merging = pool.submit(run_job, merge_job, claims)  # applied together: its first container waits for the parts
        time.sleep(3)
        assert not merging.done(), merging.result()[0].output
        mapped = run_job(map_job, claims)
        assert [(p.index, p.exit_code) for p in mapped] == [(i, 0) for i in range(RANKS)], mapped[0].output
        [merged] = merging.result(timeout=600)
    assert merged.exit_code == 0, merged.output
    assert "Findings" in merged.output

    result = json.loads((run / "analysis.json").read_text())
    (run / "analysis.json").rename(run / "merged.json")
    local = nsyskit(project, "analyze", str(run))
    assert local.returncode == 0, local.stderr[-2000:]
    assert result == json.loads((run / "analysis.json").read_text()) and len(result["sources"]) >= RANKS


def test_past_the_tree_threshold_the_partial_indexed_job_merges_blocks_and_the_merge_takes_those(kit_image, tmp_path):
    """--tree-ranks below the run's ranks: three Jobs applied at once; the partial merges' pods wait for the map's
    parts, the merge's pod for the partial merges, and the result is what one merge here makes."""
    shared, project, run, settings = shared_run(tmp_path, "tree", 6, kit_image)
    rendered = nsyskit(project, "analyze", str(run), "--k8s", "--dry-run", "--tree-ranks", "4", **settings)
    assert rendered.returncode == 0, rendered.stderr
    map_job, partial_job, merge_job = yaml.safe_load_all((run / "analysis-jobs" / "k8s-jobs.yaml").read_text())
    assert partial_job["spec"]["completions"] == 2  # 6 reports past 4: two blocks

    claims = {"fsx-claim": shared}
    with ThreadPoolExecutor(max_workers=2) as pool:
        merging = pool.submit(run_job, merge_job, claims)
        partials = pool.submit(run_job, partial_job, claims)
        time.sleep(3)
        assert not merging.done() and not partials.done()  # both wait for what comes before them
        mapped = run_job(map_job, claims)
        assert [(p.index, p.exit_code) for p in mapped] == [(i, 0) for i in range(6)], mapped[0].output
        assert [(p.index, p.exit_code) for p in partials.result(timeout=600)] == [(0, 0), (1, 0)]
        [merged] = merging.result(timeout=600)
    assert merged.exit_code == 0, merged.output
    assert len(list((run / "analysis-partials").iterdir())) == 2

    tree = json.loads((run / "analysis.json").read_text())
    (run / "analysis.json").rename(run / "tree.json")
    local = nsyskit(project, "analyze", str(run))
    assert local.returncode == 0, local.stderr[-2000:]
    assert tree == json.loads((run / "analysis.json").read_text()) and len(tree["sources"]) == 6
