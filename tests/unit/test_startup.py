"""Invoke's start-up stays fast: listing tasks and analyzing to JSON import none of the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("boto3", "botocore", "docker", "requests", "rich", "jinja2", "matplotlib", "numpy")


def imported_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported after running `code` in the project root."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_loading_the_task_collection_imports_no_heavy_library():
    loaded = imported_after("import tasks")
    assert not loaded & set(HEAVY), f"'invoke --list' would import {sorted(loaded & set(HEAVY))}"


def test_every_task_keeps_its_help_after_lazy_imports():
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "--list"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    listed = {line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()}
    assert {"analyze", "build", "push", "pull", "deploy", "config", "nccl-log", "run", "demo", "recipes"} <= listed
    for name in ("analyze", "push", "config", "nccl-log", "deploy"):
        shown = subprocess.run(
            [sys.executable, "-m", "invoke", "--help", name], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert "Options:" in shown.stdout and "--" in shown.stdout, name


def test_json_analysis_of_an_export_needs_neither_rich_nor_matplotlib(tmp_path):
    code = (
        "import sys; sys.path.insert(0, 'tests/unit/analysis')\n"
        "from pathlib import Path\n"
        "from nsys_fixtures import Export, Kernel, write_export\n"
        f"path = write_export(Path({str(tmp_path / 'r.sqlite')!r}), Export(kernels=[Kernel(0, 10, 'k')]))\n"
        "(path.parent / 'rank0.log').write_bytes(Path('tests/data/nccl/kit_mpirun.log').read_bytes())  # + NCCL section\n"
        "import tasks\n"
        "from invoke import Context\n"
        "import io, contextlib\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    tasks.ns['analyze'](Context(), str(path), json_=True, html=False)\n"
        "assert '\"nccl_log\"' in out.getvalue()"
    )
    loaded = imported_after(code)
    assert not loaded & {"rich", "matplotlib", "jinja2", "boto3", "docker"}, sorted(loaded)
