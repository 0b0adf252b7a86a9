"""nsyskit as people install it: the wheel built from the checkout, installed with pip into a fresh container of the
base image that has python3 and no compiler, offline (the wheel and its dependencies from a folder), then run
outside any checkout with no writable home: the command works, -h is help, the C fast paths came built in the
wheel, and the analysis of a real export equals NVIDIA's own kernel summary."""

from __future__ import annotations

import csv
import json
import lzma
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from fixtures.kit_image import local_cpu_config

from nsyskit import __version__
from nsyskit.setup import run_setup

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "real" / "nsys-exports"
EXPORT = "h100_gpt2_ddp_nsys2025.3.1"
LOG = ROOT / "tests" / "data" / "nccl" / "nemo_4gpu.log"
PYTHON_IMAGE = "nsyskit-test-python:bookworm"  # the base image plus Debian's python3 and venv: no compiler
PYTHON_DOCKERFILE = """FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/*
"""
SCRIPT = r"""
set -eu
for tool in cc gcc clang; do if command -v $tool >/dev/null; then echo "compiler $tool present" >&2; exit 9; fi; done
python3 -m venv /opt/nsyskit
/opt/nsyskit/bin/pip install --quiet --no-index --find-links /wheels nsyskit
mkdir /work && cd /work
export HOME=/nonexistent PATH=/opt/nsyskit/bin:/usr/bin:/bin   # no writable home, no checkout anywhere
echo "== version"; nsyskit --version
echo "== help"; nsyskit analyze -h
echo "== native"; python -c "
from nsyskit.analysis.read import blobagg, pagescan
from nsyskit.analysis.compute import sweep
from nsyskit.nccllog.scan import fastscan
from nsyskit.native import groups, launches, texts
print(pagescan.functions() is not None, sweep.function() is not None, fastscan.function() is not None,
      launches.functions() is not None, groups.functions() is not None, texts.function() is not None)"
echo "== analyze"; nsyskit analyze /data/export.sqlite --json --no-html
echo "== nccl-log"; nsyskit nccl-log /data/nccl.log --json
echo "== wrap"; OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_SIZE=2 nsyskit wrap --out /work/w \
    --profile-ranks none --run-id t -- python3 -c "import os; print(*(os.environ[k] for k in ('RANK', 'LOCAL_RANK', 'MASTER_PORT')))"
python3 -c "import json; d = json.load(open('/work/w/run.json')); print(d['target'], [r['rank'] for r in d['ranks']])"
echo "== end"
"""


def docker(*args: str, timeout: int = 900, stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, input=stdin)
    assert done.returncode == 0, f"docker {args[0]} exited {done.returncode}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """The nsyskit wheel built from this checkout, beside the wheels of its dependencies."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(folder), str(ROOT)],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def python_image() -> str:
    cfg = local_cpu_config()
    run_setup(cfg)  # the engine and the base image, as on a fresh machine
    docker("build", "--quiet", "--tag", PYTHON_IMAGE, "-", stdin=PYTHON_DOCKERFILE.format(base=cfg.base_image))
    return PYTHON_IMAGE


def sections(text: str) -> dict[str, str]:
    parts = text.split("== ")[1:]
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}


def test_the_wheel_carries_its_c_helpers_and_the_kits_files(wheelhouse):
    (wheel,) = wheelhouse.glob("nsyskit-*.whl")
    names = subprocess.run([sys.executable, "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True).stdout
    assert "-linux_" in wheel.name or "manylinux" in wheel.name  # a platform wheel: it holds compiled code
    for helper in ("_pagescan", "_sweep", "_linescan", "_int64s", "_launches", "_groups", "_texts"):
        assert f"nsyskit/native/{helper}." in names
    for kit_file in ("_kit/Dockerfile", "_kit/Container-Root/nsyskit/setup.sh", "_kit/k8s/mpijob.yaml.j2",
                     "_kit/slurm/pyxis.sbatch.j2", "_kit/profiles/local-cpu.env",
                     # nsyskit wrap in host mode: the wrapper, what it sets for the rank, the step hook
                     "_kit/Container-Root/usr/local/bin/nsys-profile", "_kit/Container-Root/nsyskit/rankenv.py",
                     "_kit/Container-Root/nsyskit/stephook/sitecustomize.py"):  # fmt: skip
        assert f"nsyskit/{kit_file}" in names


def test_installed_wheel_works_anywhere_without_a_compiler(wheelhouse, python_image, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "export.sqlite").write_bytes(lzma.decompress((REAL / f"{EXPORT}.sqlite.xz").read_bytes()))
    shutil.copy(LOG, data / "nccl.log")
    done = docker("run", "--rm", "--network", "none", "-v", f"{wheelhouse}:/wheels:ro", "-v", f"{data}:/data:ro",
                  python_image, "bash", "-c", SCRIPT)  # fmt: skip
    out = sections(done.stdout)
    assert out["version"].strip() == f"nsyskit {__version__}"
    assert out["help"].startswith("Usage: nsyskit [--core-opts] analyze ")
    assert out["native"].split() == ["True"] * 6  # built into the wheel: no cc, no cache written
    analysis = json.loads(out["analyze"])
    ours = defaultdict(lambda: [0, 0])
    for row in analysis["kernel_summary"]["0"]:
        ours[row["name"]][0] += row["total_ns"]
        ours[row["name"]][1] += row["instances"]
    with open(REAL / f"{EXPORT}.cuda_gpu_kern_sum.csv", newline="") as f:
        nvidia = {row["Name"]: [int(row["Total Time (ns)"]), int(row["Instances"])] for row in csv.DictReader(f)}
    assert dict(ours) == nvidia
    # nsyskit wrap from the wheel (host mode): the rank runs (unprofiled here: no nsys) with what torch expects.
    assert out["wrap"].split("\n")[:2] == ["1 1 29500", "wrap [1]"], out["wrap"]
    log = json.loads(out["nccl-log"])
    assert log["lines"]["collective"] > 0 and log["per_op"]
