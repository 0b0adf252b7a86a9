"""analyze --slurm in Pyxis mode imports the run's image once, before the map, and every job runs that .sqsh; the
merge's matplotlib gets a writable MPLCONFIGDIR; the merged report's path is printed once.

The jobs themselves run on the suite's real Slurm (tests/integration/test_slurm.py) and through real Pyxis where a
machine has it (tests/integration/test_pyxis.py).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from nsyskit.clusteranalysis import make_plan, without_report_line
from nsyskit.config import load_config
from nsyskit.slurm import analysis
from nsyskit.slurm.analysis_image import analysis_image, cached_sqsh

ROOT = Path(__file__).resolve().parents[2]
IMAGE_ID = "sha256:" + "7b272f6c5d8e" * 5 + "abcd"


def slurm_run(tmp_path: Path, image: str, image_id: str = "") -> Path:
    """A collected Pyxis run of 2 reports under tmp_path (the shared file system), in `image`."""
    run = tmp_path / "reports" / "run"
    run.mkdir(parents=True)
    for rank in (0, 1):
        (run / f"x_rank_{rank}.sqlite").write_bytes(b"")
    details = {"mode": "pyxis", **({"image_id": image_id} if image_id else {})}
    (run / "run.json").write_text(json.dumps({"schema_version": 2, "run_id": "run", "target": "slurm", "image": image,
                                              "details": details}))  # fmt: skip
    return run


def settings(tmp_path: Path, **more: str):
    return load_config(ROOT, overrides={"SLURM_SHARED_DIR": str(tmp_path), **more}, environ={})


def test_a_run_in_an_image_uri_imports_it_once_before_the_map_and_every_job_runs_the_sqsh(tmp_path):
    run = slurm_run(tmp_path, "dockerd://nsyskit:latest")
    texts = analysis.scripts(settings(tmp_path), ROOT, make_plan(run))
    assert list(texts) == ["import.sbatch", "map.sbatch", "merge.sbatch"]
    sqsh = f"{tmp_path}/enroot/dockerd+nsyskit+latest.sqsh"
    assert (
        'enroot import --output "$partial" dockerd://nsyskit:latest\nmv -f "$partial" ' + sqsh in texts["import.sbatch"]
    )
    for name in ("map.sbatch", "merge.sbatch"):
        assert f"image={sqsh}\n" in texts[name] and texts[name].count("--container-image=") == 1
        assert (
            '--container-image="$image"' in texts[name] and "dockerd://nsyskit:latest by the import job" in texts[name]
        )
        assert "enroot import" not in texts[name]


def test_a_scheme_less_pyxis_image_is_imported_as_docker(tmp_path):
    run = slurm_run(tmp_path, "nvcr.io#nvidia/pytorch:25.01-py3")
    texts = analysis.scripts(settings(tmp_path), ROOT, make_plan(run))
    assert "enroot import --output \"$partial\" 'docker://nvcr.io#nvidia/pytorch:25.01-py3'" in texts["import.sbatch"]


def test_a_run_in_a_sqsh_runs_it_with_no_import(tmp_path):
    sqsh = tmp_path / "enroot" / "kit.sqsh"
    sqsh.parent.mkdir()
    sqsh.write_bytes(b"hsqs")
    texts = analysis.scripts(settings(tmp_path), ROOT, make_plan(slurm_run(tmp_path, str(sqsh))))
    assert list(texts) == ["map.sbatch", "merge.sbatch"] and f"image={sqsh}\n" in texts["map.sbatch"]
    assert "(the squashfs image the run ran)" in texts["map.sbatch"]


def test_an_image_named_by_its_content_is_imported_once_for_every_later_analysis(tmp_path):
    # dockerd:// with the image ID recorded at the run: the file names that content, so a later analysis reuses it.
    run = slurm_run(tmp_path, "dockerd://nsyskit:latest", IMAGE_ID)
    cfg = settings(tmp_path)
    first = analysis_image(cfg, "dockerd://nsyskit:latest", IMAGE_ID)
    assert first.imports and first.sqsh == f"{tmp_path}/enroot/dockerd+nsyskit+latest+7b272f6c5d8e7b27.sqsh"
    assert "import.sbatch" in analysis.scripts(cfg, ROOT, make_plan(run))
    Path(first.sqsh).parent.mkdir()
    Path(first.sqsh).write_bytes(b"hsqs")  # what the first analysis' import job wrote
    texts = analysis.scripts(cfg, ROOT, make_plan(run))
    assert list(texts) == ["map.sbatch", "merge.sbatch"] and f"image={first.sqsh}\n" in texts["map.sbatch"]
    assert "imported earlier from dockerd://nsyskit:latest" in texts["merge.sbatch"]
    digest = "sha256:" + "ab" * 32
    assert not analysis_image(cfg, f"docker://nvcr.io#kit@{digest}").sqsh.count(digest)  # the digest, shortened
    # A tag alone may have moved since: imported again, over the same file, by each analysis.
    tagged = analysis_image(cfg, "dockerd://nsyskit:latest")
    Path(tagged.sqsh).write_bytes(b"hsqs")
    assert tagged.imports and analysis_image(cfg, "dockerd://nsyskit:latest").imports
    assert cached_sqsh("/fsx/", "podman://kit:v1") == "/fsx/enroot/podman+kit+v1.sqsh"


def test_an_earlier_import_script_is_not_left_beside_scripts_that_need_none(tmp_path):
    run = slurm_run(tmp_path, "dockerd://nsyskit:latest", IMAGE_ID)
    cfg = settings(tmp_path)  # SLURM_CONTAINER_IMAGE=registry, REGISTRY empty: the run's recorded image needs neither
    assert analysis.problems(cfg, make_plan(run)) == []
    assert "import.sbatch" in [p.name for p in analysis.prepare(cfg, ROOT, make_plan(run))]
    sqsh = Path(analysis_image(cfg, "dockerd://nsyskit:latest", IMAGE_ID).sqsh)
    sqsh.parent.mkdir()
    sqsh.write_bytes(b"hsqs")
    assert [p.name for p in analysis.prepare(cfg, ROOT, make_plan(run))] == ["map.sbatch", "merge.sbatch"]
    assert not (run / "analysis-jobs" / "import.sbatch").exists()


def test_the_merge_script_gives_matplotlib_a_writable_config_folder_and_removes_it(tmp_path):
    # The rendered merge script itself, run by bash where HOME cannot be written (as in a Pyxis container); the
    # node's nsyskit stands in as a Python that reports where matplotlib would write and whether it can.
    probe = ("import matplotlib, os, sys; d = matplotlib.get_configdir(); "
             "print('config', d, os.access(d, os.W_OK), os.environ['MPLCONFIGDIR'] == d)")  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    (run / "x_rank_0.sqlite").write_bytes(b"")
    cfg = settings(tmp_path, SLURM_MODE="host", SLURM_NSYSKIT=f"{shlex.quote(sys.executable)} -c {shlex.quote(probe)}")
    script = tmp_path / "merge.sbatch"
    script.write_text(analysis.scripts(cfg, ROOT, make_plan(run))["merge.sbatch"])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    word, folder, writable, from_env = done.stdout.split()
    assert (word, writable, from_env) == ("config", "True", "True") and folder.startswith(
        f"{scratch}/nsyskit-matplotlib."
    )
    assert "is not a writable directory" not in done.stderr and list(scratch.iterdir()) == []  # removed at the end


def test_pyxis_passes_the_merges_config_folder_into_the_container(tmp_path):
    text = analysis.scripts(settings(tmp_path), ROOT, make_plan(slurm_run(tmp_path, "dockerd://nsyskit:latest")))
    merge = text["merge.sbatch"]
    assert (
        ',"$MPLCONFIGDIR:$MPLCONFIGDIR" \\' in merge
        and ' env MPLCONFIGDIR="$MPLCONFIGDIR" nsyskit analyze-merge ' in merge
    )
    assert "MPLCONFIGDIR" not in text["map.sbatch"]  # the map draws nothing


def test_the_report_line_of_the_merge_log_is_left_to_the_command():
    report = Path("/fsx/runs/r1/report.html")
    log = f"Findings\n  1. rank 3 is slow\n✓ report: {report}\n✓ timeline: /fsx/runs/r1/timeline.json\n"
    assert without_report_line(log, report) == "Findings\n  1. rank 3 is slow\n✓ timeline: /fsx/runs/r1/timeline.json\n"
    assert without_report_line(log, Path("/elsewhere/report.html")) == log  # another run's line stays
