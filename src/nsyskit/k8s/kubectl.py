"""Running kubectl: argument lists for each action, and its failures turned into one clear line."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from nsyskit.errors import ClusterError, ClusterUnreachable, KubectlMissing

REQUEST_TIMEOUT = "30s"  # a black-holed API server must not hang a task for minutes
MPIJOB_CRD = "mpijobs.kubeflow.org"

# klog's own lines ("E1121 22:28:51.855457 12688 memcache.go:265] ...") repeat the real message; drop them.
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")
_UNREACHABLE = (
    "connection refused", "was refused", "no such host", "i/o timeout", "unable to connect to the server",
    "dial tcp", "context deadline exceeded", "tls handshake timeout", "no route to host", "network is unreachable",
    "the server could not find the requested resource (get",
)  # fmt: skip
_NO_CRD = (
    'no matches for kind "mpijob"',
    "resource mapping not found",
    "the server doesn't have a resource type \"mpijob",
)
_REASON = re.compile(
    r"connection refused|no such host|i/o timeout|no route to host|network is unreachable|"
    r"context deadline exceeded|TLS handshake timeout|certificate signed by unknown authority|Unauthorized"
)
_SERVER = re.compile(r'(?:the server |(?:Get|Post|Patch|Put|Delete) \\?")(https?://[^/"\\\s]+|[\w.-]+:\d+)')


def binary() -> str:
    """The kubectl executable on PATH, or KubectlMissing with how to install it."""
    path = shutil.which("kubectl")
    if not path:
        raise KubectlMissing(
            "kubectl is not installed (not on PATH)",
            fix="install kubectl (Debian/Ubuntu: apt-get install kubernetes-client) and point it at your cluster, "
            "or use 'invoke deploy --k8s --dry-run' to render only",
        )
    return path


def meaningful(stderr: str) -> list[str]:
    """kubectl's stderr without klog noise and blank lines."""
    return [line.strip() for line in stderr.splitlines() if line.strip() and not _KLOG.match(line)]


def explain(what: str, cmd: Sequence[str], returncode: int, stderr: str) -> ClusterError:
    """The error for a failed kubectl call: unreachable cluster, missing CRD, or kubectl's own last words."""
    lines = meaningful(stderr) or [line.strip() for line in stderr.splitlines() if line.strip()]
    text = " ".join(lines).lower()
    last = lines[-1] if lines else f"exit code {returncode}"
    if any(marker in text for marker in _NO_CRD):
        return ClusterError(
            f"{what}: the cluster has no MPIJob CRD (kubeflow.org/v2beta1)", cmd, returncode, stderr,
            fix="run 'invoke k8s-setup' to install the MPI operator",
        )  # fmt: skip
    if "(notfound)" in text.replace(" ", ""):
        return ClusterError(
            f"{what}: {last}", cmd, returncode, stderr,
            fix="check the name and namespace with 'kubectl get mpijobs -A' "
            "(ended jobs are deleted after K8S_TTL_SECONDS_AFTER_FINISHED)",
        )  # fmt: skip
    if any(marker in text for marker in _UNREACHABLE) or "localhost:8080" in text:
        server = _SERVER.search(stderr)
        at = f" at {re.sub(r'^https?://', '', server[1])}" if server else ""
        reason = _REASON.search(stderr)
        because = "connection refused" if "was refused" in text else reason[0] if reason else last
        return ClusterUnreachable(
            f"{what}: no Kubernetes API server reachable{at} ({because})", cmd, returncode, stderr,
            fix="point kubectl at your cluster (KUBECONFIG, 'kubectl config use-context NAME'; "
            "check with 'kubectl cluster-info')",
        )  # fmt: skip
    return ClusterError(f"{what}: kubectl exited {returncode}: {last}", cmd, returncode, stderr)


def command(*args: str, namespace: str | None = None, timeout: bool = True) -> list[str]:
    """A kubectl argument list (without the executable) with the namespace and request timeout."""
    cmd = list(args)
    if namespace:
        cmd += ["--namespace", namespace]
    if timeout:
        cmd += [f"--request-timeout={REQUEST_TIMEOUT}"]
    return cmd


def run(what: str, args: Sequence[str], cwd: Path | None = None) -> str:
    """Run kubectl ARGS and return its stdout, or raise the ClusterError that explains the failure."""
    cmd = [binary(), *args]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        raise explain(what, ["kubectl", *args], result.returncode, result.stderr)
    return result.stdout


def stream(what: str, args: Sequence[str]) -> None:
    """Run kubectl ARGS with its output going straight to the terminal (logs -f); raise a ClusterError on failure."""
    cmd = [binary(), *args]
    result = subprocess.run(cmd, stdout=None, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise explain(what, ["kubectl", *args], result.returncode, result.stderr)
