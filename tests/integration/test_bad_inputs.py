"""The battery: bad inputs walked through the real tasks as a user types them; each ends in one 'error:' line, never a traceback."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from bad_inputs import (  # tests/integration is on sys.path
    BASE_ENV,
    BUILD,
    DIR,
    ECR,
    HTTP_404,
    INVOKE,
    K8S,
    SLURM,
    Case,
    project_copy,
    run_case,
)

pytestmark = pytest.mark.engine  # some cases need the Docker engine (run, push, build)

# Per test session (the machine is shared: two batteries at once must not delete each other's files and images).
SECRET = f"/tmp/nsyskit-battery-secret-{os.getpid()}.bin"
EMPTY_IMAGE = {"NSYSKIT_REGISTRY": "", "NSYSKIT_IMAGE": "nsyskit-battery", "NSYSKIT_TAG": f"empty-{os.getpid()}"}  # imported by the fixture  # a file nobody may see but not read (made by the fixture)

SLURM_CLIENT = ("sbatch", "scontrol", "squeue", "sacct", "scancel", "sinfo", "srun")  # a login node without them

CASES = [
    # --- .env and profiles: not text, unreadable, a folder, lines that are not KEY=value, bad names ---
    Case("env-not-utf8", BUILD, (".env", "UTF-8", "fix"), files={".env": b"TAG=caf\xe9\n"}),
    Case("env-bad-line", BUILD, (".env", "line 2", "KEY=value"), files={".env": "TAG=ok\nthis is not a setting\n"}),
    Case("env-directory", BUILD, (".env", "folder", "fix"), files={".env": DIR}),
    Case("env-unreadable", BUILD, (".env", "read", "fix"), files={".env": "TAG=x\n"}, modes={".env": 0o000}, nobody=True),
    Case("env-nul", BUILD, (".env", "fix"), files={".env": b"TAG=a\x00b\n"}),
    Case("profile-not-utf8", f"{BUILD} --profile bad", ("profiles/bad.env", "UTF-8", "fix"), files={"profiles/bad.env": b"\xff\xfeN\n"}),
    Case("profile-bad-line", f"{BUILD} --profile bad", ("profiles/bad.env", "line 1", "KEY=value"), files={"profiles/bad.env": "NODES 2\n"}),
    Case("profile-directory", f"{BUILD} --profile bad", ("profiles/bad.env", "folder", "fix"), files={"profiles/bad.env": DIR}),
    Case("profile-unreadable", f"{BUILD} --profile bad", ("profiles/bad.env", "read", "fix"), files={"profiles/bad.env": "NODES=1\n"},
         modes={"profiles/bad.env": 0o000}, nobody=True),
    Case("profile-missing", f"{BUILD} --profile nope", ("NSYSKIT_PROFILE", "nope", "local-cpu")),
    Case("profile-too-long", f"{BUILD} --profile {'x' * 300}", ("NSYSKIT_PROFILE", "xxxx", "fix")),
    Case("profile-slash", f"{BUILD} --profile a/b", ("NSYSKIT_PROFILE", "a/b", "local-cpu")),
    Case("profile-env-slash", BUILD, ("NSYSKIT_PROFILE", "../x", "local-cpu"), env={"NSYSKIT_PROFILE": "../x"}),
    Case("profile-env-control", BUILD, ("NSYSKIT_PROFILE", "fix"), env={"NSYSKIT_PROFILE": "a\x01b"}),
    # --- NSYSKIT_* variables of the kit itself ---
    Case("assets-port-word", BUILD, ("NSYSKIT_ASSETS_PORT", "abc", "1-65535"), env={"NSYSKIT_ASSETS_PORT": "abc"}),
    Case("assets-port-zero", BUILD, ("NSYSKIT_ASSETS_PORT", "'0'", "1-65535"), env={"NSYSKIT_ASSETS_PORT": "0"}),
    Case("assets-port-big", BUILD, ("NSYSKIT_ASSETS_PORT", "70000", "1-65535"), env={"NSYSKIT_ASSETS_PORT": "70000"}),
    Case("assets-port-arabic", BUILD, ("NSYSKIT_ASSETS_PORT", "1-65535"), env={"NSYSKIT_ASSETS_PORT": "٧٤٨٩"}),
    # --- REGISTRY / REGISTRY_ENDPOINT hosts ---
    Case("registry-port-zero", BUILD, ("REGISTRY", "localhost:0", "1-65535"), env={"NSYSKIT_REGISTRY": "localhost:0"}),
    Case("registry-port-big", BUILD, ("REGISTRY", "localhost:65536", "1-65535"), env={"NSYSKIT_REGISTRY": "localhost:65536"}),
    Case("registry-port-fullwidth", BUILD, ("REGISTRY", "fix"), env={"NSYSKIT_REGISTRY": "localhost:５０００"}),
    Case("registry-ipv6-bad", BUILD, ("REGISTRY", "[::1::2]", "fix"), env={"NSYSKIT_REGISTRY": "[::1::2]:5000"}),
    Case("registry-ipv6-junk", BUILD, ("REGISTRY", "[zz]", "fix"), env={"NSYSKIT_REGISTRY": "[zz]:5000"}),
    Case("registry-ipv4-bad", BUILD, ("REGISTRY", "999.1.1.1", "fix"), env={"NSYSKIT_REGISTRY": "999.1.1.1:5000"}),
    Case("registry-scheme", BUILD, ("REGISTRY", "https://", "no scheme"), env={"NSYSKIT_REGISTRY": "https://example.com"}),
    Case("registry-endpoint-port", BUILD, ("REGISTRY_ENDPOINT", "99999", "1-65535"), env={"NSYSKIT_REGISTRY_ENDPOINT": "localhost:99999"}),
    # --- numbers: non-ASCII digits, beyond int32 where Kubernetes wants int32 ---
    Case("nodes-arabic", K8S, ("NODES", "fix"), env={"NSYSKIT_NODES": "٢"}),
    Case("steps-fullwidth", BUILD, ("STEPS", "fix"), env={"NSYSKIT_STEPS": "５０"}),
    Case("profile-steps-arabic", BUILD, ("PROFILE_STEPS", "fix"), env={"NSYSKIT_PROFILE_STEPS": "١-٢"}),
    Case("profile-ranks-arabic", BUILD, ("PROFILE_RANKS", "fix"), env={"NSYSKIT_PROFILE_RANKS": "٠"}),
    Case("nodes-int32", K8S, ("NODES", "2147483648", "2147483647"), env={"NSYSKIT_NODES": "2147483648"}),
    Case("procs-int32", K8S, ("PROCS_PER_NODE", "99999999999", "2147483647"), env={"NSYSKIT_PROCS_PER_NODE": "99999999999"}),
    Case("world-int32", K8S, ("NODES", "2147483647", "fix"), env={"NSYSKIT_NODES": "65536", "NSYSKIT_PROCS_PER_NODE": "65536", "NSYSKIT_PROFILE_RANKS": "all"}),
    Case("backoff-int32", K8S, ("K8S_BACKOFF_LIMIT", "4294967296", "2147483647"), env={"NSYSKIT_K8S_BACKOFF_LIMIT": "4294967296"}),
    Case("ttl-int32", K8S, ("K8S_TTL_SECONDS_AFTER_FINISHED", "2147483647"), env={"NSYSKIT_K8S_TTL_SECONDS_AFTER_FINISHED": "9999999999"}),
    Case("gpus-int32", K8S, ("GPUS_PER_NODE", "2147483647"), env={"NSYSKIT_GPUS_PER_NODE": "3000000000"}),
    Case("efa-int32", K8S, ("EFA_PER_NODE", "2147483647"), env={"NSYSKIT_EFA_PER_NODE": "3000000000"}),
    # --- image references Docker would refuse ---
    Case("base-image-scheme", BUILD, ("BASE_IMAGE", "https://", "fix"), env={"NSYSKIT_BASE_IMAGE": "https://nvcr.io/nvidia/pytorch:25.01-py3"}),
    Case("base-image-double-slash", BUILD, ("BASE_IMAGE", "//", "fix"), env={"NSYSKIT_BASE_IMAGE": "nvcr.io//pytorch:1"}),
    Case("base-image-upper", BUILD, ("BASE_IMAGE", "PyTorch", "lower"), env={"NSYSKIT_BASE_IMAGE": "nvcr.io/nvidia/PyTorch:1"}),
    Case("base-image-long", BUILD, ("BASE_IMAGE", "255", "fix"), env={"NSYSKIT_BASE_IMAGE": "a/" + "b" * 260 + ":1"}),
    Case("base-image-flag", f"{BUILD} --base-image ftp://x/y", ("BASE_IMAGE", "ftp://", "fix")),
    Case("injector-image-bad", K8S, ("K8S_INJECTOR_IMAGE", "Bad Image", "fix"),
         env={"NSYSKIT_K8S_PROFILER": "devtools-sidecar-injector", "NSYSKIT_K8S_INJECTOR_IMAGE": "Bad Image"}),
    Case("image-ref-too-long", BUILD, ("IMAGE", "255", "fix"), env={"NSYSKIT_IMAGE": "x" * 250, "NSYSKIT_REGISTRY": "localhost:5000"}),
    # --- word lists and names ---
    Case("extra-args-quote", BUILD, ("NSYS_EXTRA_ARGS", "--foo 'open", "quote"), env={"NSYSKIT_NSYS_EXTRA_ARGS": "--foo 'open"}),
    Case("gencode-quote", BUILD, ("NCCL_TESTS_GENCODE", "fix"), env={"NSYSKIT_NCCL_TESTS_GENCODE": '-gencode="arch'}),
    Case("debian-suite-space", BUILD, ("DEBIAN_SUITE", "book worm", "bookworm"), env={"NSYSKIT_DEBIAN_SUITE": "book worm"}),
    Case("debian-suite-path", BUILD, ("DEBIAN_SUITE", "../../etc", "bookworm"), env={"NSYSKIT_DEBIAN_SUITE": "../../etc"}),
    Case("debian-mirror-bad", BUILD, ("DEBIAN_MIRROR", "deb.debian.org", "http"), env={"NSYSKIT_DEBIAN_MIRROR": "deb.debian.org/debian"}),
    Case("instance-type-space", K8S, ("INSTANCE_TYPE", "p5 48xlarge", "fix"), env={"NSYSKIT_INSTANCE_TYPE": "p5 48xlarge"}),
    Case("nccl-subsys-bad", SLURM, ("NCCL_DEBUG_SUBSYS", "INIT;rm", "fix"), env={"NSYSKIT_NCCL_DEBUG_SUBSYS": "INIT;rm"}),
    Case("report-dir-empty", "run --local", ("REPORT_DIR", "''", "folder"), env={"NSYSKIT_REPORT_DIR": ""}),
    Case("report-dir-comma", "run --local", ("REPORT_DIR", "a,b", "comma"), env={"NSYSKIT_REPORT_DIR": "a,b"}),
    Case("wheelhouse-bad-url", BUILD, ("PIP_WHEELHOUSE", "ftp://x", "https://"), env={"NSYSKIT_PIP_WHEELHOUSE": "ftp://x/wheels"}),
    Case("manifest-bad-url", "k8s-setup", ("K8S_MPI_OPERATOR_MANIFEST", "http://", "https://"), env={"NSYSKIT_K8S_MPI_OPERATOR_MANIFEST": "http://"}),
    Case("pyxis-image-path", SLURM, ("SLURM_CONTAINER_IMAGE", "../x", "fix"), env={"NSYSKIT_SLURM_CONTAINER_IMAGE": "../x"}),
    Case("partition-dash", SLURM, ("SLURM_PARTITION", "-p", "fix"), env={"NSYSKIT_SLURM_PARTITION": "-p"}),
    Case("mounts-comma-in-path", SLURM, ("SLURM_CONTAINER_MOUNTS", "comma", "separate"), env={"NSYSKIT_SLURM_CONTAINER_MOUNTS": "/data,x:/data"}),
    Case("shared-dir-comma", SLURM, ("SLURM_SHARED_DIR", "/fs,x", "comma"), env={"NSYSKIT_SLURM_SHARED_DIR": "/fs,x"}),
    # --- control characters and invalid UTF-8 in values that land in YAML or scripts ---
    Case("control-instance-type", K8S, ("INSTANCE_TYPE", "control", "fix"), env={"NSYSKIT_INSTANCE_TYPE": "p5\x01"}),
    Case("newline-injector", K8S, ("K8S_INJECTOR_IMAGE", "control", "fix"),
         env={"NSYSKIT_K8S_PROFILER": "devtools-sidecar-injector", "NSYSKIT_K8S_INJECTOR_IMAGE": "img\nfoo: bar"}),
    Case("escape-subsys", SLURM, ("NCCL_DEBUG_SUBSYS", "control", "fix"), env={"NSYSKIT_NCCL_DEBUG_SUBSYS": "INIT\x1b[31m"}),
    Case("bell-extra-args", SLURM, ("NSYS_EXTRA_ARGS", "control", "fix"), env={"NSYSKIT_NSYS_EXTRA_ARGS": "--x\x07"}),
    Case("newline-env-file", K8S, ("INSTANCE_TYPE", ".env", "control"), files={".env": 'INSTANCE_TYPE="p5\\nkind: Pod"\n'}),
    Case("invalid-utf8-instance", K8S, ("INSTANCE_TYPE", "UTF-8", "fix"), env={"NSYSKIT_INSTANCE_TYPE": b"p5\xff"}),
    Case("invalid-utf8-gencode", BUILD, ("NCCL_TESTS_GENCODE", "UTF-8", "fix"), env={"NSYSKIT_NCCL_TESTS_GENCODE": b"-gencode=\xfe"}),
    Case("invalid-utf8-mirror", BUILD, ("DEBIAN_MIRROR", "UTF-8", "fix"), env={"NSYSKIT_DEBIAN_MIRROR": b"http://\xff/debian"}),
    Case("invalid-utf8-report-dir", SLURM, ("REPORT_DIR", "UTF-8", "fix"), env={"NSYSKIT_REPORT_DIR": b"rep\xffs"}),
    # --- paths: a file where a folder belongs, a folder where a command belongs, unreadable sources ---
    Case("report-dir-file", "run --local --no-progress", ("REPORT_DIR", "afile", "folder"), env={"NSYSKIT_REPORT_DIR": "afile"}, files={"afile": "x"}),
    Case("submit-prefix-dir", "deploy --slurm", ("SLURM_SUBMIT_PREFIX", "/tmp", "fix"), env={"NSYSKIT_SLURM_SUBMIT_PREFIX": "/tmp"}),
    Case("submit-prefix-missing", "deploy --slurm", ("SLURM_SUBMIT_PREFIX", "/nonexistent/ssh", "fix"),
         env={"NSYSKIT_SLURM_SUBMIT_PREFIX": "/nonexistent/ssh login"}),
    Case("nsys-url-unreadable", BUILD, ("NSYS_URL", SECRET, "read"), env={"NSYSKIT_NSYS_URL": SECRET}, nobody=True),
    Case("nsys-url-file-unreadable", BUILD, ("NSYS_URL", SECRET, "read"), env={"NSYSKIT_NSYS_URL": "file://" + SECRET}, nobody=True),
    Case("nsys-url-hidden", BUILD, ("NSYS_URL", "/root/x.deb", "cannot be reached"), env={"NSYSKIT_NSYS_URL": "/root/x.deb"}, nobody=True),
    Case("nsys-url-folder", BUILD, ("NSYS_URL", "/etc", "folder"), env={"NSYSKIT_NSYS_URL": "file:///etc"}),
    Case("ca-bundle-unreadable", BUILD, ("EXTRA_CA_BUNDLE", SECRET, "read"), env={"NSYSKIT_EXTRA_CA_BUNDLE": SECRET}, nobody=True),
    Case("wheelhouse-unreadable", BUILD, ("PIP_WHEELHOUSE", "wheels", "read"), env={"NSYSKIT_PIP_WHEELHOUSE": "wheels"},
         files={"wheels/a.whl": "x"}, modes={"wheels": 0o000}, nobody=True),
    Case("source-relative-path", BUILD, ("OPENMPI_URL", "openmpi.tar.gz", "absolute path"), env={"NSYSKIT_OPENMPI_URL": "openmpi.tar.gz"}),
    Case("source-ftp", BUILD, ("NCCL_TESTS_URL", "ftp://", "https://"), env={"NSYSKIT_NCCL_TESTS_URL": "ftp://x/y.tar.gz"}),
    Case("ca-bundle-not-pem", BUILD, ("EXTRA_CA_BUNDLE", "PEM", "fix"), env={"NSYSKIT_EXTRA_CA_BUNDLE": "tasks.py"}),
    # --- accepted before, broken later: settings that cannot work together ---
    Case("endpoint-without-registry", BUILD, ("REGISTRY_ENDPOINT", "REGISTRY", "fix"), env={"NSYSKIT_REGISTRY": "", "NSYSKIT_REGISTRY_ENDPOINT": "localhost:5000"}),
    Case("ncu-nvidia-without-url", BUILD, ("NCU_SOURCE", "nvidia", "NCU_URL"), env={"NSYSKIT_NCU_SOURCE": "nvidia"}),
    Case("ncu-url-relative", BUILD, ("NCU_URL", "ncu.deb", "absolute path"), env={"NSYSKIT_NCU_URL": "ncu.deb"}),
    Case("nsys-version-unpinned", BUILD, ("NSYS_VERSION", "2024.1.1", "NSYS_URL"), env={"NSYSKIT_NSYS_VERSION": "2024.1.1"}),
    # --- AWS / ECR ---
    Case("ecr-endpoint-junk", "login", ("AWS_ENDPOINT_URL_ECR", "not a url", "fix"), env={"NSYSKIT_REGISTRY": ECR, "AWS_ENDPOINT_URL_ECR": "not a url"}),
    Case("ecr-endpoint-ipv6", "login", ("AWS_ENDPOINT_URL_ECR", "http://[::1", "fix"), env={"NSYSKIT_REGISTRY": ECR, "AWS_ENDPOINT_URL_ECR": "http://[::1"}),
    Case("aws-profile-unknown", "login", ("AWS_PROFILE", "nope", "aws configure"), env={"NSYSKIT_REGISTRY": ECR, "AWS_PROFILE": "nope"}),
    Case("ecr-endpoint-404", "login", ("404", "not the ECR API", "AWS_ENDPOINT_URL_ECR"),
         env={"NSYSKIT_REGISTRY": ECR, "AWS_ENDPOINT_URL_ECR": HTTP_404, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x"}),
    Case("ecr-endpoint-refused", "login", ("127.0.0.1:9", "AWS_ENDPOINT_URL_ECR"),
         env={"NSYSKIT_REGISTRY": ECR, "AWS_ENDPOINT_URL_ECR": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
              "AWS_SECRET_ACCESS_KEY": "x", "AWS_MAX_ATTEMPTS": "1"}),
    Case("docker-config-corrupt", "login", ("dockercfg/config.json", "JSON", "docker login"),
         env={"DOCKER_CONFIG": "dockercfg"}, files={"dockercfg/config.json": "{bad"}),
    # --- engine ---
    Case("setup-docker-host-nobody", "setup", ("DOCKER_HOST", "unix:///nonexistent.sock", "fix"),
         env={"DOCKER_HOST": "unix:///nonexistent.sock"}, nobody=True),
    Case("docker-host-junk", "run --local --no-progress", ("DOCKER_HOST", "tcp://:x", "fix"), env={"DOCKER_HOST": "tcp://:x"}),
    Case("run-engine-missing", "run --local --no-progress", ("DOCKER_HOST", "fix"), env={"DOCKER_HOST": "unix:///nonexistent.sock"}),
    Case("setup-engine-denied", "setup", ("docker.sock", "docker group"), nobody=True),
    Case("run-engine-denied", "run --local --no-progress", ("docker.sock", "docker group"), nobody=True),
    Case("report-dir-unwritable", "run --local --no-progress", ("REPORT_DIR", "/proc/nsyskit", "writable"), env={"NSYSKIT_REPORT_DIR": "/proc/nsyskit", **EMPTY_IMAGE}),
    Case("report-dir-through-file", "run --local --no-progress", ("REPORT_DIR", "afile/runs", "file"), env={"NSYSKIT_REPORT_DIR": "afile/runs"}, files={"afile": "x"}),
    # --- flags ---
    Case("run-id-traversal", "run --local --run-id ../escape", ("--run-id", "../escape", "fix")),
    Case("run-id-space", "run --local --run-id 'a b'", ("--run-id", "a b", "fix")),
    Case("run-nodes-word", "run --local --nodes abc", ("NODES", "abc", "fix")),
    Case("run-profile-steps-reversed", "run --local --profile-steps 5-1", ("PROFILE_STEPS", "5-1", "fix")),
    Case("stop-run-id-traversal", "stop --run-id ../x", ("--run-id", "../x", "fix")),
    Case("collect-job-traversal", "collect --slurm --job ../..", ("--job", "../..", "fix")),
    Case("status-no-job", "status --slurm", ("slurm", "fix")),
    Case("deploy-both", "deploy --k8s --slurm", ("--k8s", "--slurm")),
    Case("pull-digest-junk", "pull --digest nothex", ("--digest", "nothex", "sha256:")),
    Case("push-tag-space", "push --tag 'a b'", ("TAG", "a b", "fix")),
    Case("build-mpi-maybe", f"{BUILD} --mpi maybe", ("INSTALL_MPI", "maybe", "true or false")),
    # --- images that are not there, and the build lock ---
    Case("run-image-missing", "run --local --no-progress --run-id r1", ("nsyskit-missing", "fix"), env={"NSYSKIT_IMAGE": "nsyskit-missing", "NSYSKIT_REGISTRY": ""}),
    Case("detach-image-missing", "run --local --detach", ("nsyskit-missing", "fix"), env={"NSYSKIT_IMAGE": "nsyskit-missing", "NSYSKIT_REGISTRY": ""}),
    Case("push-image-missing", "push --no-progress", ("nsyskit-missing", "fix"), env={"NSYSKIT_IMAGE": "nsyskit-missing"}),
    Case("build-base-missing", "build --no-progress", ("nsyskit-base:missing", "invoke setup"),
         env={"NSYSKIT_BASE_IMAGE": "nsyskit-base:missing", "NSYSKIT_BASE_IMAGE_SOURCE": "debootstrap"}),
    Case("build-lock-folder", "build --no-progress", ("NSYSKIT_BUILD_LOCK", "/proc/nsyskit/lock", "fix"), env={"NSYSKIT_BUILD_LOCK": "/proc/nsyskit/lock"}),
    # --- flags of the cluster tasks ---
    Case("deploy-nodes-zero", f"{K8S} --nodes 0", ("NODES", "'0'", "fix")),
    Case("deploy-procs-word", f"{SLURM} --procs-per-node many", ("PROCS_PER_NODE", "many", "fix")),
    Case("run-ranks-outside", "run --local --nodes 1 --procs-per-node 2 --profile-ranks 5", ("PROFILE_RANKS", "5", "0-1")),
    Case("run-model-size", "run --local --model-size huge", ("MODEL_SIZE", "huge", "tiny")),
    Case("undeploy-no-job", "undeploy --slurm", ("slurm", "fix")),
    # --- job folders and records of earlier deploys ---
    Case("record-corrupt", "status --slurm", ("job.json", "fix"), files={"jobs/slurm-x/job.json": "{bad", "jobs/last-slurm": "slurm-x\n"}),
    Case("record-not-object", "logs --slurm", ("job.json", "fix"), files={"jobs/slurm-x/job.json": "[1]", "jobs/last-slurm": "slurm-x\n"}),
    Case("record-k8s-corrupt", "collect --k8s", ("job.json", "fix"), files={"jobs/k8s-x/job.json": b"\xff", "jobs/last-k8s": "k8s-x\n"}),
    Case("last-pointer-dangling", "logs --slurm", ("slurm-gone", "--job"), files={"jobs/last-slurm": "slurm-gone\n"}),
    Case("last-pointer-binary", "status --k8s", ("last-k8s", "fix"), files={"jobs/last-k8s": b"\xff\xfe"}),
    Case("never-submitted", "collect --slurm", ("never submitted", "fix"), files={"jobs/slurm-x/job.json": "{}", "jobs/last-slurm": "slurm-x\n"}),
    Case("jobs-is-a-file", SLURM, ("jobs", "fix"), files={"jobs": "x"}),
    Case("jobs-not-writable", K8S, ("jobs", "Permission denied", "writable"), nobody=True),
    Case("status-no-slurm-client", "status --slurm", ("scontrol", "SLURM_SUBMIT_PREFIX"),
         files={"jobs/slurm-x/job.json": '{"job_id": "12"}', "jobs/last-slurm": "slurm-x\n"}, absent=SLURM_CLIENT),
    Case("collect-no-slurm-client", "collect --slurm", ("scontrol", "SLURM_SUBMIT_PREFIX"),
         files={"jobs/slurm-x/job.json": '{"job_id": "12"}', "jobs/last-slurm": "slurm-x\n"}, absent=SLURM_CLIENT),
    # --- enroot and cluster setup ---
    Case("enroot-credentials-not-ecr", "enroot-credentials", ("REGISTRY", "localhost:5000", "ECR")),
    Case("enroot-import-missing", "enroot-import", ("enroot", "fix"), absent=("enroot",)),
    Case("operator-manifest-missing", "k8s-setup", ("K8S_MPI_OPERATOR_MANIFEST", "nope.yaml", "fix"), env={"NSYSKIT_K8S_MPI_OPERATOR_MANIFEST": "nope.yaml"}),
    Case("operator-manifest-folder", "k8s-setup", ("K8S_MPI_OPERATOR_MANIFEST", "k8s", "fix"), env={"NSYSKIT_K8S_MPI_OPERATOR_MANIFEST": "k8s"}),
    # --- the long-running container ---
    Case("exec-no-dev-container", "exec --command true", ("nsyskit-dev", "fix")),
    Case("logs-no-dev-container", "logs", ("nsyskit-dev", "fix")),
    # --- a failing render leaves no job folder ---
    Case("slurm-templates-missing", SLURM, ("slurm", "fix"), drop=("slurm",)),
    Case("k8s-templates-missing", K8S, ("k8s", "fix"), drop=("k8s",)),
]  # fmt: skip


class _NotFound(BaseHTTPRequestHandler):
    """Answers 404 with no body to everything: an endpoint that is not the ECR API."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def results():
    """Every case run once, four at a time (each is a separate 'invoke' process in its own project copy)."""
    secret = Path(SECRET)
    secret.write_bytes(b"secret")
    secret.chmod(0o600)
    empty_tar = b"\0" * 1024  # a tar archive with no members
    empty_ref = f"{EMPTY_IMAGE['NSYSKIT_IMAGE']}:{EMPTY_IMAGE['NSYSKIT_TAG']}"
    subprocess.run(["docker", "import", "-", empty_ref], input=empty_tar, check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            return dict(zip([c.id for c in CASES], pool.map(lambda c: run_case(c, url), CASES), strict=True))
    finally:
        server.shutdown()
        secret.unlink(missing_ok=True)
        subprocess.run(["docker", "rmi", empty_ref], capture_output=True)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_error_line_naming_value_and_fix(case, results):
    result = results[case.id]
    shown = f"exit {result.returncode}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-3000:]}"
    assert "Traceback" not in result.stdout + result.stderr, shown
    assert result.returncode != 0, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, shown
    assert lines[0].startswith("error: "), shown
    for word in case.says:
        assert word in lines[0], f"{word!r} missing in: {lines[0]}"
    assert not result.left, f"a failed task left files: {result.left}"


def _invoke(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(INVOKE), *args], cwd=project, env={**BASE_ENV, "HOME": str(project), **env},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture
def project():
    folder = project_copy()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_config_check_lists_every_problem_at_once_cross_checks_included(project):
    (project / ".env").write_text("STEPS=5\nthis line is not a setting\nnor this one\n")
    (project / "profiles" / "bad.env").write_bytes(b"TAG=caf\xe9\n")
    result = _invoke(project, "config", "--check", "--profile", "bad", NSYSKIT_NODES="abc", NSYSKIT_REGISTRY="host:0",
                     NSYSKIT_INSTALL_MPI="false", NSYSKIT_INSTALL_EFA="true", NSYSKIT_PROFILE_STEPS="10-15", NSYSKIT_INSTANCE_TYPE="p5\x01")  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("✗")]
    expected = [".env line 2", ".env line 3", "profiles/bad.env line 1", "REGISTRY='host:0'", "INSTANCE_TYPE=",
                "NODES='abc'", "INSTALL_EFA=", "PROFILE_STEPS="]  # fmt: skip
    for start in expected:
        assert sum(start in line for line in problems) == 1, (start, problems)
    assert len(problems) == len(expected), problems
    assert "8 configuration problem(s)" in result.stderr


def test_a_failed_deploy_keeps_the_last_job_and_leaves_no_folder(project):
    shared = {"NSYSKIT_SLURM_MODE": "host", "NSYSKIT_SLURM_SHARED_DIR": str(project)}  # the project on the shared fs
    ok = _invoke(project, "deploy", "--slurm", "--dry-run", **shared)
    assert ok.returncode == 0, ok.stderr
    last = (project / "jobs" / "last-slurm").read_text()
    before = sorted(p.name for p in (project / "jobs").iterdir())
    (project / "slurm").unlink()  # the templates are gone: rendering fails after the folder was made
    failed = _invoke(project, "deploy", "--slurm", "--dry-run", **shared)
    assert failed.returncode == 1 and "template slurm/host.sbatch.j2 is missing" in failed.stderr, failed.stderr
    assert (project / "jobs" / "last-slurm").read_text() == last
    assert sorted(p.name for p in (project / "jobs").iterdir()) == before


def test_build_dry_run_prints_a_command_safe_to_paste(project):
    gencode = "-DA=\"it's\" -DB='$(id); `id`'"
    result = _invoke(project, "build", "--dry-run", NSYSKIT_NCCL_TESTS_GENCODE=gencode, NSYSKIT_TAG="v1")
    assert result.returncode == 0, result.stderr
    command = result.stdout.split("\n#", 1)[0].replace("\\\n", " ")
    words = shlex.split(command)
    args = dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "--build-arg")
    assert args["NCCL_TESTS_GENCODE"] == gencode
    assert words[:2] == ["docker", "build"] and "localhost:5000/nsyskit:v1" in words


def test_gpus_asked_of_an_engine_without_gpu_support_name_the_setting(project):
    runtimes = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True).stdout
    if "nvidia" in runtimes:
        pytest.skip("this engine has the NVIDIA runtime: GPU containers start here")
    subprocess.run(["docker", "import", "-", "nsyskit-battery:gpu"], input=b"\0" * 1024, check=True, capture_output=True)
    try:
        result = _invoke(project, "run", "--local", "--no-progress", "--nodes", "1", "--procs-per-node", "1",
                         NSYSKIT_REGISTRY="", NSYSKIT_IMAGE="nsyskit-battery", NSYSKIT_TAG="gpu", NSYSKIT_GPUS_PER_NODE="8")  # fmt: skip
    finally:
        subprocess.run(["docker", "rmi", "-f", "nsyskit-battery:gpu"], capture_output=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: GPUS_PER_NODE=8 (from environment): asks for GPUs, but the Docker engine cannot give containers any"
    ), result.stderr
