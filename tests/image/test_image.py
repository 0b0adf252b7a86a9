"""What is inside the kit image, per flag: nsys, ncu, MPI + sshd, EFA, NCCL tests, Python, wrapper, example, no leftovers."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from pathlib import Path

import docker
import pytest

import nsyskit
from nsyskit import runrecord
from nsyskit.ranks import launch

BUILD_TOOLS = ("gcc", "cc", "g++", "c++", "make", "nvcc")


def test_nsys_reports_the_pinned_version(host, image_config):
    result = host.run("nsys --version")
    assert result.rc == 0, result.stderr
    assert image_config.nsys_version in result.stdout


def test_nsys_profile_writes_a_report_not_just_a_qdstrm(host):
    # The importer link (Debian's split layout) is what turns the capture into a .nsys-rep.
    result = host.run("cd /tmp && nsys profile --sample=none --trace=osrt -o /tmp/nsyskit-probe sleep 0.2")
    assert result.rc == 0, result.stdout + result.stderr
    assert host.file("/tmp/nsyskit-probe.nsys-rep").is_file, result.stdout
    assert host.file("/usr/local/bin/QdstrmImporter").is_file
    assert host.run("/usr/local/bin/QdstrmImporter --help").rc == 0


def test_ncu_present_exactly_when_install_ncu(host, image_config):
    result = host.run("ncu --version")
    if not image_config.install_ncu:
        assert not host.exists("ncu")
        return
    assert result.rc == 0, result.stderr
    if image_config.ncu_source != "base":  # base keeps whatever the base image ships
        assert f"Version {image_config.ncu_version}" in result.stdout
    assert "roofline" in host.run("ncu --list-sets").stdout  # NCU_SET's default exists in this ncu


def test_ncu_on_a_process_without_kernels_records_nothing_and_exits_0(host, image_config):
    # What PROFILER=ncu meets on CPU: the wrapper reports it in one line and the run goes on.
    if not image_config.install_ncu:
        pytest.skip("INSTALL_NCU=false: no ncu in this image")
    result = host.run("cd /tmp && ncu --set roofline --target-processes all --export /tmp/nsyskit-ncu-probe "
                      "--force-overwrite python3 -c 'print(42)'")  # fmt: skip
    assert result.rc == 0, result.stdout + result.stderr
    assert "No kernels were profiled" in result.stdout + result.stderr and "42" in result.stdout
    assert not host.file("/tmp/nsyskit-ncu-probe.ncu-rep").exists


def test_mpi_present_exactly_when_install_mpi(host, image_config):
    result = host.run("mpirun --version")
    if image_config.install_mpi:
        assert result.rc == 0 and "Open MPI" in (result.stdout + result.stderr)
    else:
        assert not host.exists("mpirun")


def test_sshd_is_ready_for_mpi_remote_launch(host, image_config):
    if not image_config.install_mpi:
        assert not host.exists("sshd")
        return
    assert host.file("/usr/sbin/sshd").is_file and host.file("/run/sshd").is_directory
    assert host.run("/usr/sbin/sshd -t").rc == 0  # config and host keys valid
    server = host.file("/etc/ssh/sshd_config.d/nsyskit.conf").content_string
    assert "PermitRootLogin prohibit-password" in server and "PasswordAuthentication no" in server
    client = host.file("/etc/ssh/ssh_config.d/nsyskit.conf").content_string
    assert "StrictHostKeyChecking no" in client and "UserKnownHostsFile /dev/null" in client


def test_efa_present_exactly_when_install_efa(host, image_config):
    if image_config.install_efa:
        assert host.exists("fi_info")
        assert host.run("ls /opt/amazon/efa/lib*/libfabric.so*").rc == 0
    else:
        assert not host.exists("fi_info") and not host.file("/opt/amazon/efa").exists


def test_nccl_tests_present_exactly_when_install_tests(host, image_config):
    assert host.exists("all_reduce_perf") == image_config.install_tests


def test_python_imports_the_example_packages(host, image_config):
    # accelerate: what a user's Hugging Face Trainer script needs besides transformers (WORKLOAD=command, nsyskit wrap)
    result = host.run("python3 -c 'import torch, transformers, accelerate, nvtx, numpy; print(torch.__version__)'")
    assert result.rc == 0, result.stderr
    assert result.stdout.strip().startswith(image_config.torch_version)


def test_cpu_image_has_no_cuda_wheels(host, image_config):
    if image_config.uses_gpu:
        pytest.skip("GPU profile: CUDA libraries belong in the image")
    listing = host.run("python3 -m pip list --format=freeze").stdout
    assert "+cpu" in host.run("python3 -c 'import torch; print(torch.__version__)'").stdout
    assert not [line for line in listing.splitlines() if line.lower().startswith(("nvidia-", "triton"))]


def test_the_image_has_this_nsyskit_for_the_analysis_on_the_cluster(host):
    # analyze --slurm (Pyxis) and --k8s run 'nsyskit analyze-part/-merge' in the run's image: the same version.
    assert host.run("nsyskit --version").stdout.strip() == f"nsyskit {nsyskit.__version__}"
    helped = host.run("cd /tmp && nsyskit analyze-part -h")
    assert helped.rc == 0 and "--array-index" in helped.stdout and "--timeline" in helped.stdout
    # Its packages import (task runner, .env, plots), and a bad input is one line there as here.
    made = host.run("cd /tmp && python3 -c 'import dotenv, invoke, matplotlib' && nsyskit analyze-merge /nowhere")
    assert made.rc == 1 and "holds no part files" in made.stderr, made.stderr


def test_wrapper_and_example_are_present_and_executable(host):
    wrapper = host.file(launch.WRAPPER)
    assert wrapper.is_file and wrapper.mode & 0o111, f"{launch.WRAPPER} missing or not executable"
    assert host.file(launch.EXAMPLE).is_file
    assert host.run(f"python3 -m py_compile {launch.EXAMPLE}").rc == 0


def test_the_wrapper_in_the_image_writes_a_status_the_host_reads(host):
    # The wrapper and the example import the shared modules from /nsyskit (runrecord, nsysargs) with the image's
    # python3; the host reads what they wrote with the same file (nsyskit.runrecord).
    result = host.run(
        "rm -rf /tmp/rr && RANK=1 LOCAL_RANK=1 NSYSKIT_REPORT_DIR=/tmp/rr NSYSKIT_JOB_ID=j NSYSKIT_PROFILE_RANKS=0 "
        f"{launch.WRAPPER} true && cat /tmp/rr/logs/*.status.json"
    )
    assert result.rc == 0, result.stderr
    status = runrecord.RankStatus.from_dict(json.loads(result.stdout))
    assert (status.rank, status.profiled, status.profile_ranks, status.exit_code) == (1, False, "0", 0)
    assert json.loads(result.stdout)["schema_version"] == runrecord.SCHEMA_VERSION
    assert host.run(f"python3 {launch.EXAMPLE} --help").rc == 0  # the example finds /nsyskit/runrecord.py


def test_nsyskit_wrap_and_the_step_hook_are_in_the_image(host):
    # The documented command for the user's own launch line, and the hook the wrapper puts on PYTHONPATH.
    helped = host.run("cd /tmp && nsyskit wrap --help")
    assert helped.rc == 0 and "--profile-steps" in helped.stdout and "NSYSKIT_PROFILE_STEPS" in helped.stdout
    refused = host.run("cd /tmp && nsyskit wrap python3 train.py")
    assert refused.rc == 1 and refused.stderr.startswith("error: nsyskit wrap needs '--'"), refused.stderr
    assert host.file("/nsyskit/stephook/sitecustomize.py").is_file
    # A run without torch under the hook: nothing of torch or NVTX loaded, the program's output as usual.
    plain = host.run("PYTHONPATH=/nsyskit/stephook NSYSKIT_STEP_HOOK=1 python3 -c "
                     "'import sys; print(sorted(m for m in sys.modules if m.startswith((\"torch\", \"_nsyskit\"))))'")  # fmt: skip
    assert plain.rc == 0 and plain.stdout.strip() == "[]", plain.stderr


def test_no_build_toolchain_left_behind(host, image_config):
    if image_config.install_tests or image_config.openmpi_source == "release":
        pytest.skip(
            "this profile compiles in the image (NCCL tests or OpenMPI release); the scripts purge what they add"
        )
    assert [tool for tool in BUILD_TOOLS if host.exists(tool)] == []


def test_no_proxy_or_ca_leftovers_in_env_files_or_history(host, kit_image):
    image = docker.from_env().images.get(kit_image)
    env = image.attrs["Config"].get("Env") or []
    assert not [e for e in env if e.split("=", 1)[0].lower().endswith("_proxy") or "CA_BUNDLE" in e or "SSL_CERT" in e]
    history = " ".join(str(layer.get("CreatedBy", "")) for layer in image.history())
    assert "proxy" not in history.lower() and "BEGIN CERTIFICATE" not in history
    assert host.run("ls -d /tmp/nsyskit-ca.* 2>/dev/null").stdout.strip() == ""
    assert host.run("ls /var/lib/apt/lists | grep -v -e lock -e partial").stdout.strip() == ""


def _certificates(pem: str) -> list[str]:
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", pem, re.S)


def test_extra_ca_is_in_no_layer(host, image_config, kit_image):
    """Certificates only the extra bundle has (the proxy's CA) appear in no layer, not even as a deleted file."""
    if not image_config.extra_ca_bundle:
        pytest.skip("this profile sets no EXTRA_CA_BUNDLE")
    in_image = set(_certificates(host.file("/etc/ssl/certs/ca-certificates.crt").content_string))
    extra = [c for c in _certificates(Path(image_config.extra_ca_bundle).read_text()) if c not in in_image]
    if not extra:
        pytest.skip("every certificate of EXTRA_CA_BUNDLE is also in Debian's CA store: nothing would show a leak")
    # A middle line of each certificate's base64 body identifies it whatever file it might be in.
    needles = [cert.splitlines()[len(cert.splitlines()) // 2] for cert in extra]
    image = docker.from_env(timeout=900).images.get(kit_image)
    driver = image.attrs.get("GraphDriver") or {}
    if driver.get("Name") == "overlay2" and Path(driver["Data"]["UpperDir"]).is_dir():
        # Every layer's own files (deleted ones stay in the layer that added them): grep them in place.
        layers = [driver["Data"]["UpperDir"], *driver["Data"].get("LowerDir", "").split(":")]
        args = [arg for needle in needles for arg in ("-e", needle)]
        found = subprocess.run(["grep", "-rlF", *args, *[d for d in layers if d]], capture_output=True, text=True)
        assert found.returncode == 1, f"extra CA found in layers: {found.stdout[:500]}{found.stderr[:300]}"
        return
    hits = []
    with tarfile.open(fileobj=_Stream(image.save(chunk_size=1 << 20)), mode="r|") as saved:
        for member in saved:
            if not member.name.endswith("layer.tar"):
                continue
            with tarfile.open(fileobj=saved.extractfile(member), mode="r|") as layer:
                for entry in layer:
                    if entry.isfile() and entry.size:
                        data = layer.extractfile(entry).read()
                        hits += [f"{member.name}:{entry.name}" for needle in needles if needle.encode() in data]
    assert hits == []


class _Stream:
    """A read()-able file over the chunks of docker's image save stream."""

    def __init__(self, chunks) -> None:
        self.chunks, self.buffer = iter(chunks), b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            self.buffer += chunk
        if size < 0:
            data, self.buffer = self.buffer, b""
        else:
            data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data
