"""Run batch/v1 Jobs' pods as Docker containers, as the Job controller and the kubelet would (no API server here).

What is emulated is what the analysis Jobs use: an Indexed Job's completions (JOB_COMPLETION_INDEX set in each pod,
at most `parallelism` at once), init containers before the containers, command, env values, persistentVolumeClaim
volumes as bind mounts of a host folder per claim at their mountPath, and emptyDir volumes as a fresh tmpfs. Anything else in a pod spec is refused, so a field the
emulation ignores cannot pass unnoticed.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

POD_FIELDS = {"restartPolicy", "containers", "initContainers", "volumes"}
CONTAINER_FIELDS = {"name", "image", "command", "env", "volumeMounts"}


@dataclass
class PodResult:
    """One pod's end: its Job, completion index (None outside an Indexed Job), exit code and output."""

    job: str
    index: int | None
    exit_code: int
    output: str


def _mounts(spec: dict, container: dict, claims: dict[str, Path]) -> list[str]:
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    args = []
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        assert set(volume) in ({"name", "persistentVolumeClaim"}, {"name", "emptyDir"}), f"unknown volume {volume}"
        if "emptyDir" in volume:
            args += ["--tmpfs", mount["mountPath"]]
            continue
        args += ["-v", f"{claims[volume['persistentVolumeClaim']['claimName']]}:{mount['mountPath']}"]
    for variable in container.get("env", []):
        assert set(variable) == {"name", "value"}, f"the emulation sets plain values only, not {variable}"
        args += ["-e", f"{variable['name']}={variable['value']}"]
    return args


def run_pod(job: dict, index: int | None, claims: dict[str, Path], timeout: int = 600) -> PodResult:
    """Run one pod of `job` (its init containers, then its one container); the pod's result."""
    spec = job["spec"]["template"]["spec"]
    assert set(spec) <= POD_FIELDS, f"the emulation does not know {set(spec) - POD_FIELDS}"
    env = ["-e", f"JOB_COMPLETION_INDEX={index}"] if index is not None else []
    outputs = []
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        assert set(container) <= CONTAINER_FIELDS, f"the emulation does not know {set(container) - CONTAINER_FIELDS}"
        command = container["command"]
        done = subprocess.run(
            ["docker", "run", "--rm", *env, *_mounts(spec, container, claims), "--entrypoint", command[0],
             container["image"], *command[1:]],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        outputs.append(done.stdout + done.stderr)
        if done.returncode != 0:
            return PodResult(job["metadata"]["name"], index, done.returncode, "\n".join(outputs))
    return PodResult(job["metadata"]["name"], index, 0, "\n".join(outputs))


def run_job(job: dict, claims: dict[str, Path]) -> list[PodResult]:
    """Every pod of a Job: one per completion index (Indexed, `parallelism` at once), else one."""
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        return [run_pod(job, None, claims)]
    with ThreadPoolExecutor(max_workers=spec.get("parallelism") or spec["completions"]) as pool:
        return list(pool.map(lambda i: run_pod(job, i, claims), range(spec["completions"])))
