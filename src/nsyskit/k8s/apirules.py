"""What the kube-apiserver refuses beyond a schema's types: schema formats (int32, int64, date-time) and the Job and Pod
rules its validation applies (names, references, the Job's completion-mode rules)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# The integer formats of OpenAPI schemas (the CRD's `format: int32` fields are Go int32s: a larger number is refused).
INT_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
DATE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", re.I)  # RFC 3339
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123 label, at most 63 characters
DNS_LABEL_MAX = 63
IANA_SVC_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a port name: at most 15, a letter, no '--'
IANA_SVC_NAME_MAX = 15
INDEXED_LIMIT = 100_000  # the most parallelism and maxFailedIndexes an Indexed Job may have
JOB_RESTART_POLICIES = ("Never", "OnFailure")


def format_problem(fmt: str, instance: Any) -> str | None:
    """Why INSTANCE does not have schema format FMT (None when it has it, or FMT is not one the API server checks)."""
    if fmt in INT_FORMATS and isinstance(instance, int) and not isinstance(instance, bool):
        low, high = INT_FORMATS[fmt]
        return None if low <= instance <= high else f"{instance} is out of the range of {fmt} ({low} to {high})"
    if fmt == "date-time" and isinstance(instance, str) and not DATE_TIME.fullmatch(instance):
        return f"{instance!r} is not an RFC 3339 date-time"
    return None


def label_problem(name: Any) -> str | None:
    """Why NAME is not an RFC 1123 label (container and volume names must be), or None."""
    if not isinstance(name, str):
        return None  # the schema reports the type
    if len(name) > DNS_LABEL_MAX or not DNS_LABEL.fullmatch(name):
        return (f"{name!r} is not an RFC 1123 label: at most {DNS_LABEL_MAX} lower-case letters, digits and '-', "
                "starting and ending with a letter or digit")  # fmt: skip
    return None


def port_name_problem(name: Any) -> str | None:
    """Why NAME is not an IANA service name (what a container port's name must be), or None."""
    if not isinstance(name, str):
        return None
    well_formed = IANA_SVC_NAME.fullmatch(name) and "--" not in name and re.search("[a-z]", name)
    if len(name) > IANA_SVC_NAME_MAX or not well_formed:
        return (f"{name!r} is not an IANA service name: at most {IANA_SVC_NAME_MAX} lower-case letters, digits and '-', "
                "with a letter, no '--', starting and ending with a letter or digit")  # fmt: skip
    return None


def pod_problems(spec: Any, where: str) -> Iterator[str]:
    """The Pod rules a pod spec at WHERE breaks: container and volume names, ports' names, mounts of unknown volumes."""
    if not isinstance(spec, dict):
        return
    containers = [(kind, i, c) for kind in ("initContainers", "containers")
                  for i, c in enumerate(spec.get(kind) or []) if isinstance(c, dict)]  # fmt: skip
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
    yield from _named([(f"{where}.{kind}.{index}", c.get("name")) for kind, index, c in containers], "container")
    volume_names = {v.get("name") for v in volumes}
    for kind, index, container in containers:
        at = f"{where}.{kind}.{index}"
        for port_index, port in enumerate(container.get("ports") or []):
            if isinstance(port, dict) and "name" in port and (problem := port_name_problem(port["name"])):
                yield f"{at}.ports.{port_index}.name: {problem}"
        for mount_index, mount in enumerate(container.get("volumeMounts") or []):
            if isinstance(mount, dict) and isinstance(mount.get("name"), str) and mount["name"] not in volume_names:
                yield f"{at}.volumeMounts.{mount_index}.name: {mount['name']!r} is not a volume of the pod"
    yield from _named([(f"{where}.volumes.{index}", v.get("name")) for index, v in enumerate(volumes)], "volume")


def _named(items: list[tuple[str, Any]], what: str) -> Iterator[str]:
    """The name problems of a pod's containers or volumes, given as (where, name): an RFC 1123 label, unique."""
    seen: set[str] = set()
    for at, name in items:
        if problem := label_problem(name):
            yield f"{at}.name: {problem}"
        elif name in seen:
            yield f"{at}.name: {name!r} is the name of another {what} of the pod (names are unique)"
        seen.add(name)


def job_problems(spec: Any) -> Iterator[str]:
    """The Job rules a batch/v1 JobSpec breaks: what needs `completionMode: Indexed`, and the pods' restart policy."""
    if not isinstance(spec, dict):
        return
    indexed = spec.get("completionMode", "NonIndexed") == "Indexed"
    for key in ("backoffLimitPerIndex", "maxFailedIndexes", "successPolicy"):
        if key in spec and not indexed:
            yield f"spec.{key}: requires completionMode: Indexed"
    if indexed and "completions" not in spec:
        yield "spec.completions: is required when completionMode is Indexed"
    if indexed and _int(spec.get("parallelism")) > INDEXED_LIMIT:
        yield f"spec.parallelism: must be at most {INDEXED_LIMIT} when completionMode is Indexed"
    if "maxFailedIndexes" in spec:
        failed = _int(spec["maxFailedIndexes"])
        if "backoffLimitPerIndex" not in spec:
            yield "spec.maxFailedIndexes: requires backoffLimitPerIndex"
        if indexed and "completions" in spec and failed > _int(spec["completions"]):
            yield "spec.maxFailedIndexes: must be at most completions"
        if indexed and failed > INDEXED_LIMIT:
            yield f"spec.maxFailedIndexes: must be at most {INDEXED_LIMIT}"
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    pod = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    if pod.get("restartPolicy") not in JOB_RESTART_POLICIES:
        yield (f"spec.template.spec.restartPolicy: {pod.get('restartPolicy')!r} is not allowed in a Job: "
               f"use {' or '.join(JOB_RESTART_POLICIES)}")  # fmt: skip


def _int(value: Any) -> int:
    """VALUE when it is an integer, else 0 (the schema reports the type)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def problems(document: Any) -> list[str]:
    """The Job and Pod rules an MPIJob or a batch/v1 Job breaks, each as 'path.to.field: message'."""
    if not isinstance(document, dict) or not isinstance(document.get("spec"), dict):
        return []
    spec = document["spec"]
    found: list[str] = []
    if document.get("kind") == "Job":
        found += job_problems(spec)
        template = spec.get("template")
        found += pod_problems(template.get("spec") if isinstance(template, dict) else None, "spec.template.spec")
    replicas = spec.get("mpiReplicaSpecs") if document.get("kind") == "MPIJob" else None
    for role, replica in (replicas or {}).items():
        if isinstance(replica, dict) and isinstance(replica.get("template"), dict):
            found += pod_problems(replica["template"].get("spec"), f"spec.mpiReplicaSpecs.{role}.template.spec")
    return found
