"""Offline validation of rendered manifests, unknown fields rejected: the MPIJob against the MPI operator's CRD schema,
the analysis' batch/v1 Jobs against the Job API (its pod template: the same Kubernetes PodTemplateSpec schema the CRD
embeds); formats and the API server's Job and Pod rules as nsyskit.k8s.apirules checks them."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from nsyskit.errors import NsyskitError
from nsyskit.k8s import apirules

CRD_FILE = Path("k8s") / "crds" / "kubeflow.org_mpijobs.v0.8.2.yaml"  # vendored from kubeflow/mpi-operator v0.8.2
PRESERVE = "x-kubernetes-preserve-unknown-fields"

# The CRD leaves metadata as a bare object (the API server checks ObjectMeta itself); check what we render.
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
OBJECT_META = {
    "type": "object",
    "required": ["name", "namespace"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 63, "pattern": r"^[a-z]([-a-z0-9]*[a-z0-9])?$"},
        "namespace": {"type": "string", "maxLength": 63, "pattern": _DNS_SUBDOMAIN},
        "labels": {
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 63, "pattern": _LABEL_VALUE},
        },
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


class InvalidManifest(NsyskitError):
    """A rendered manifest does not match its schema: carries the file and every problem found."""

    def __init__(self, path: str, problems: list[str], against: str = "the MPIJob CRD") -> None:
        self.path, self.problems = path, problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{path} does not match {against}: {problems[0]}{more}\n" + "\n".join(problems[1:]))


def strict(schema: Any) -> Any:
    """A copy where every object schema that lists its properties, and does not opt in to unknown fields, rejects others."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if "properties" in result and "additionalProperties" not in result and not result.get(PRESERVE):
        result["additionalProperties"] = False
    return result


@functools.lru_cache(maxsize=4)
def mpijob_schema(crd_path: Path) -> dict[str, Any]:
    """The strict openAPIV3Schema of the CRD's first version, with our ObjectMeta check in place of the bare object."""
    try:
        text = Path(crd_path).read_text()
    except OSError as exc:
        raise NsyskitError(
            f"cannot read the MPIJob CRD {crd_path} ({exc.strerror})", fix="restore k8s/crds/ from the nsyskit repository"
        ) from None
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    version = crd["spec"]["versions"][0]
    schema = strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    schema["properties"]["metadata"] = OBJECT_META
    schema["properties"]["apiVersion"] = {"const": f"{crd['spec']['group']}/{version['name']}"}
    schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
    schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind", "metadata", "spec"})
    return schema


# batch/v1 JobSpec (Kubernetes API reference, v1.31+): every field and its type; `template` is the PodTemplateSpec schema
# of the vendored CRD (generated from the same core/v1 types), so a pod field is checked as strictly as in an MPIJob.
_INT = {"type": "integer", "minimum": 0, "format": "int32"}
JOB_SPEC_FIELDS = {
    "activeDeadlineSeconds": {"type": "integer", "minimum": 1, "format": "int64"}, "backoffLimit": _INT, "backoffLimitPerIndex": _INT,
    "completionMode": {"enum": ["NonIndexed", "Indexed"]}, "completions": _INT, "managedBy": {"type": "string"},
    "manualSelector": {"type": "boolean"}, "maxFailedIndexes": _INT, "parallelism": _INT,
    "podFailurePolicy": {"type": "object"}, "podReplacementPolicy": {"enum": ["TerminatingOrFailed", "Failed"]},
    "selector": {"type": "object"}, "successPolicy": {"type": "object"}, "suspend": {"type": "boolean"},
    "ttlSecondsAfterFinished": _INT,
}  # fmt: skip


@functools.lru_cache(maxsize=4)
def job_schema(crd_path: Path) -> dict[str, Any]:
    """The strict schema of a batch/v1 Job whose pod template is checked by the CRD's PodTemplateSpec schema."""
    replica = mpijob_schema(crd_path)["properties"]["spec"]["properties"]["mpiReplicaSpecs"]["additionalProperties"]
    template = replica["properties"]["template"]
    spec = {"type": "object", "additionalProperties": False, "required": ["template"],
            "properties": {**JOB_SPEC_FIELDS, "template": template}}  # fmt: skip
    return {
        "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {"apiVersion": {"const": "batch/v1"}, "kind": {"const": "Job"}, "metadata": OBJECT_META,
                       "spec": spec},
    }  # fmt: skip


@functools.lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Draft 7 whose `format` keyword checks what the API server checks (int32, int64, date-time), not only annotates."""
    import jsonschema  # imported here: only validation needs it

    def check_format(_validator, fmt, instance, _schema):
        problem = apirules.format_problem(fmt, instance)
        if problem:
            yield jsonschema.ValidationError(problem)

    return jsonschema.validators.extend(jsonschema.Draft7Validator, {"format": check_format})


def problems(document: Any, crd_path: Path, schema: dict[str, Any] | None = None) -> list[str]:
    """Every way `document` breaks the strict schema (default: the MPIJob's), its formats and the API server's Job and
    Pod rules, each as 'path.to.field: message'."""
    validator = _validator_class()(schema or mpijob_schema(Path(crd_path)))
    found = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(part) for part in error.absolute_path) or "(document)"
        found.append(f"{where}: {error.message}")
    return found + apirules.problems(document)


def validate(text: str, crd_path: Path, name: str = "mpijob.yaml") -> dict[str, Any]:
    """Parse a rendered MPIJob and check it against the CRD; return the document or raise InvalidManifest."""
    document = yaml.safe_load(text)
    found = problems(document, crd_path)
    if found:
        raise InvalidManifest(name, found)
    return document


def validate_jobs(text: str, crd_path: Path, name: str) -> list[dict[str, Any]]:
    """Parse rendered batch/v1 Jobs (one YAML document each) and check each; the documents, or InvalidManifest."""
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    schema = job_schema(Path(crd_path))
    found = [f"{doc.get('metadata', {}).get('name', index)}: {p}" for index, doc in enumerate(documents)
             for p in problems(doc, crd_path, schema)]  # fmt: skip
    if found:
        raise InvalidManifest(name, found, "the batch/v1 Job API")
    return documents
