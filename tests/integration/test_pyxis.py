"""A locally built image to Pyxis: the job records the image's digest from this host's Docker daemon; and
`invoke run --slurm` with SLURM_CONTAINER_IMAGE=dockerd://IMAGE through real Pyxis, on a machine that is its own
Slurm node with enroot and Pyxis installed by its administrators (see docs/slurm.md). CI has neither: that test says
which is missing and skips there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_a_local_image_is_recorded_with_its_digest(kit_image, tmp_path):
    # dockerd://IMAGE: the digest the nodes' Docker daemon will import is known on this host (a one-node cluster).
    from nsyskit import slurm
    from nsyskit.config import load_config
    from nsyskit.jobdir import read_record

    (tmp_path / "slurm").symlink_to(ROOT / "slurm")
    cfg = load_config(ROOT, profile="local-cpu", overrides={"SLURM_MODE": "pyxis",
                      "SLURM_CONTAINER_IMAGE": f"dockerd://{kit_image}"}, environ={})  # fmt: skip
    record = read_record(slurm.render_job(cfg, tmp_path).parent)
    assert record["image"] == f"dockerd://{kit_image}" and record["image_id"].startswith("sha256:")
    assert slurm.local_image_id("dockerd://no-such-image:never") == "" == slurm.local_image_id("nvcr.io#x:1")


def pyxis_missing() -> str | None:
    """Why this machine cannot run a Pyxis job (None when it can)."""
    if not shutil.which("enroot"):
        return "enroot is not installed here (CI has none; a cluster's administrators install it, see docs/slurm.md)"
    if not shutil.which("srun") or not shutil.which("sinfo"):
        return "no Slurm client here"
    help_text = subprocess.run(["srun", "--help"], capture_output=True, text=True).stdout
    if "--container-image" not in help_text:
        return "srun has no --container-image: Pyxis is not loaded by this Slurm (its administrators load it)"
    if subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=30).returncode != 0:
        return "slurmctld does not answer here"
    return None


@pytest.mark.skipif(pyxis_missing() is not None, reason=str(pyxis_missing()))
def test_a_local_image_runs_through_pyxis_and_run_json_says_so(kit_image, tmp_path):
    shared = tmp_path / "shared"  # a single node: any folder is 'shared' with itself
    project = shared / "project"
    project.mkdir(parents=True)
    shutil.copy2(ROOT / "tasks.py", project / "tasks.py")
    (project / ".env").write_text("")
    image = f"dockerd://{kit_image}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSYSKIT_", "SLURM_"))}
    env |= {"NSYSKIT_PROFILE": "local-cpu", "NSYSKIT_SLURM_MODE": "pyxis", "NSYSKIT_SLURM_CONTAINER_IMAGE": image,
            "NSYSKIT_SLURM_SHARED_DIR": str(shared), "NSYSKIT_NODES": "1", "NSYSKIT_PROCS_PER_NODE": "2",
            "NSYSKIT_STEPS": "8", "NSYSKIT_PROFILE_STEPS": "3-5", "NSYSKIT_SLURM_EXCLUSIVE": "false"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "invoke", "run", "--slurm", "--no-progress"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = [p for p in (project / "reports").iterdir() if p.is_dir()]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["image"] == image and run["details"]["mode"] == "pyxis"
    assert run["started"] and run["ended"] >= run["started"] and run["duration_s"] >= 0
    assert len(list(run_dir.glob("*.nsys-rep"))) == 2 and [r["rank"] for r in run["ranks"]] == [0, 1]
    from nsyskit.slurm.analysis_image import cached_sqsh

    # The analysis where the reports are, as the run ran: the map array and the merge job in the run's image (its
    # own nsyskit and nsys export the .nsys-rep reports), equal to 'invoke analyze' of the same folder here.
    analyzed = subprocess.run([sys.executable, "-m", "invoke", "analyze", str(run_dir), "--slurm", "--wait"],
                              cwd=project, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert analyzed.returncode == 0, analyzed.stdout[-3000:] + analyzed.stderr[-3000:]
    # The image imported once, before the map, into a .sqsh on the shared folder; every element and the merge run it.
    jobs = run_dir / "analysis-jobs"
    sqsh = Path(cached_sqsh(str(shared), image, run["details"]["image_id"]))  # named by the image ID the run recorded
    assert f"enroot import --output \"$partial\" {image}" in (jobs / "import.sbatch").read_text()
    assert f"image={sqsh}\n" in (jobs / "map.sbatch").read_text() and f"image={sqsh}\n" in (jobs / "merge.sbatch").read_text()
    assert sqsh.is_file() and "nsyskit: image ready in" in next(jobs.glob("import-*.out")).read_text()
    assert all(f"nsyskit: image {sqsh}" in log.read_text() for log in jobs.glob("map-*.out"))
    assert "is not a writable directory" not in next(jobs.glob("merge-*.out")).read_text()  # MPLCONFIGDIR
    said = (analyzed.stdout + analyzed.stderr).replace("\n", "")
    assert said.count(f"✓ report: {run_dir / 'report.html'}") == 1  # the command's line; the merge log's is left out
    merged = json.loads((run_dir / "analysis.json").read_text())
    (run_dir / "analysis.json").rename(run_dir / "merged.json")
    here = subprocess.run([sys.executable, "-m", "invoke", "analyze", str(run_dir)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert here.returncode == 0 and merged == json.loads((run_dir / "analysis.json").read_text()), here.stderr
