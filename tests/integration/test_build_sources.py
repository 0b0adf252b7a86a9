"""The EFA and nccl-tests install scripts' mechanics, with local source archives made here (the real ones
cannot be downloaded on these machines): checksum verified, wrong checksum fails the build naming the
file and both checksums, the installer gets the container flags, nccl-tests get MPI=1 and the gencodes,
and the compilers they needed are gone afterwards. The real default URLs stay in the scripts for users."""

from __future__ import annotations

import gzip
import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

import docker
import pytest
from fixtures.kit_image import ROOT, invoke

from nsyskit import image
from nsyskit.config import load_config
from nsyskit.ranks import workloads

TEST_IMAGE = "nsyskit-test-efa"
GENCODE = "-gencode=arch=compute_90,code=sm_90"

FAKE_EFA_INSTALLER = """#!/bin/bash
# Stands in for AWS's efa_installer.sh: records its arguments and lays out what the real one installs.
set -euo pipefail
mkdir -p /opt/amazon/efa/bin /opt/amazon/efa/lib /opt/amazon/openmpi/bin /opt/amazon/openmpi/lib /opt/amazon/ofi-nccl/lib
printf '%s\\n' "$@" > /opt/amazon/efa/installer-argv.txt
printf '#!/bin/sh\\necho "fi_info: 1.22.0amzn-fake"\\n' > /opt/amazon/efa/bin/fi_info
printf '#!/bin/sh\\necho "mpirun (Open MPI) 4.1.7-efa-fake"\\n' > /opt/amazon/openmpi/bin/mpirun
chmod +x /opt/amazon/efa/bin/fi_info /opt/amazon/openmpi/bin/mpirun
: > /opt/amazon/efa/lib/libfabric.so.1
: > /opt/amazon/ofi-nccl/lib/libnccl-net.so
"""

# Stands in for nccl-tests' Makefile: the "binary" prints the make variables it was built with. It builds every
# binary of the kit's list but the last (a version without it) and one the list does not name.
LISTED = workloads.installed_binaries()
BUILT = [*LISTED[:-1], "unlisted_perf"]
FAKE_NCCL_TESTS_MAKEFILE = """all:
\tmkdir -p build
\tprintf '#!/bin/sh\\necho "MPI=$(MPI) MPI_HOME=$(MPI_HOME) CUDA_HOME=$(CUDA_HOME) NCCL_HOME=$(NCCL_HOME) NVCC_GENCODE=$(NVCC_GENCODE)"\\n' > build/all_reduce_perf
\tchmod +x build/all_reduce_perf
""" + "".join(f"\tcp build/all_reduce_perf build/{name}\n" for name in BUILT if name != "all_reduce_perf")


def _archive(path: Path, files: dict[str, str]) -> str:
    """A reproducible .tar.gz of `files` (name -> text, executable); returns its sha256."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    path.write_bytes(compressed.getvalue())
    return hashlib.sha256(compressed.getvalue()).hexdigest()


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    """Settings pointing EFA and nccl-tests at archives made here (a path and a file:// URL), with their sha256."""
    folder = tmp_path_factory.mktemp("sources")
    efa = folder / "aws-efa-installer-fake.tar.gz"
    nccl = folder / "nccl-tests-fake.tar.gz"
    return {
        "INSTALL_EFA": "true", "INSTALL_TESTS": "true", "OPENMPI_SOURCE": "efa", "IMAGE": TEST_IMAGE,
        "EFA_INSTALLER_URL": str(efa), "EFA_INSTALLER_SHA256": _archive(efa, {"aws-efa-installer/efa_installer.sh": FAKE_EFA_INSTALLER}),
        "NCCL_TESTS_URL": f"file://{nccl}", "NCCL_TESTS_SHA256": _archive(nccl, {"nccl-tests-fake/Makefile": FAKE_NCCL_TESTS_MAKEFILE}),
        "NCCL_TESTS_GENCODE": GENCODE,
    }  # fmt: skip


@pytest.fixture(scope="module")
def efa_image(sources, kit_image_build):
    cfg = load_config(ROOT, profile="local-cpu", overrides=sources, environ={})
    result = image.build_image(cfg, ROOT, show_progress=False)
    print(
        f"\nEFA+tests (fake sources) image: {result.seconds:.1f} s, {(result.size_bytes - result.base_size_bytes) / 1e6:,.0f} MB over the base"
    )
    yield result
    client = docker.from_env()
    for tag in result.plan.tags:
        client.images.remove(tag)


def run_in(ref: str, command: str) -> str:
    done = subprocess.run(
        ["docker", "run", "--rm", ref, "bash", "-c", command], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_efa_installer_runs_with_the_container_flags(efa_image):
    argv = run_in(efa_image.plan.content_ref, "cat /opt/amazon/efa/installer-argv.txt").split()
    assert argv == ["-y", "-g", "-d", "--skip-kmod", "--skip-limit-conf", "--no-verify"]


def test_efa_tools_and_bundled_mpi_are_on_path(efa_image):
    out = run_in(efa_image.plan.content_ref, "fi_info; mpirun --version; cat /etc/ld.so.conf.d/nsyskit-efa.conf")
    assert "1.22.0amzn-fake" in out and "4.1.7-efa-fake" in out
    assert "/opt/amazon/efa/lib" in out and "/opt/amazon/ofi-nccl/lib" in out and "/opt/amazon/openmpi/lib" in out


def test_nccl_tests_built_with_mpi_and_the_gencodes(efa_image):
    out = run_in(efa_image.plan.content_ref, "all_reduce_perf; ls /opt/nccl-tests/bin")
    assert "MPI=1 MPI_HOME=/opt/amazon/openmpi CUDA_HOME=/usr/local/cuda" in out
    assert f"NVCC_GENCODE={GENCODE}" in out and "all_gather_perf" in out


def test_exactly_the_listed_binaries_the_build_made_are_installed_on_path(efa_image):
    # The kit accepts only the listed names in NCCL_TESTS; a listed one the build lacks is left out (with a warning).
    installed = run_in(efa_image.plan.content_ref, "ls /opt/nccl-tests/bin").split()
    assert sorted(installed) == sorted(LISTED[:-1])
    on_path = run_in(efa_image.plan.content_ref, f"command -v {' '.join(LISTED)} unlisted_perf || true").split()
    assert on_path == [f"/usr/local/bin/{name}" for name in LISTED[:-1]]


def test_compilers_installed_for_nccl_tests_are_removed(efa_image):
    assert run_in(efa_image.plan.content_ref, "for t in gcc g++ cc make; do command -v $t || true; done").strip() == ""


@pytest.mark.parametrize(("url_key", "sha_key", "step", "file_name"), [
    ("EFA_INSTALLER_URL", "EFA_INSTALLER_SHA256", "efa", "aws-efa-installer-fake.tar.gz"),
    ("NCCL_TESTS_URL", "NCCL_TESTS_SHA256", "nccl-tests", "nccl-tests-fake.tar.gz"),
])  # fmt: skip
def test_wrong_checksum_fails_the_build_naming_file_and_both_checksums(
    sources, efa_image, url_key, sha_key, step, file_name
):
    wrong = "0" * 64
    env = {f"NSYSKIT_{key}": value for key, value in {**sources, sha_key: wrong, "IMAGE": "nsyskit-test-error"}.items()}
    result = invoke("build", "--profile", "local-cpu", "--no-progress", env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert f"(RUN bash /nsyskit/setup.sh {step})" in line
    assert f"checksum mismatch for {file_name}" in line
    assert f"expected sha256 {wrong}, got {sources[sha_key]}" in line
