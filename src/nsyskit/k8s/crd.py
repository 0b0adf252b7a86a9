"""Offline validation of a rendered MPIJob against the MPI operator's CRD schema, with unknown fields rejected."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from nsyskit.errors import NsyskitError

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
    """A rendered manifest does not match the CRD schema: carries the file and every problem found."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path, self.problems = path, problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{path} does not match the MPIJob CRD: {problems[0]}{more}\n" + "\n".join(problems[1:]))


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


def problems(document: Any, crd_path: Path) -> list[str]:
    """Every way `document` breaks the strict schema, each as 'path.to.field: message' (empty when valid)."""
    import jsonschema  # imported here: only validation needs it

    validator = jsonschema.Draft7Validator(mpijob_schema(Path(crd_path)))
    found = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(part) for part in error.absolute_path) or "(document)"
        found.append(f"{where}: {error.message}")
    return found


def validate(text: str, crd_path: Path, name: str = "mpijob.yaml") -> dict[str, Any]:
    """Parse a rendered MPIJob and check it against the CRD; return the document or raise InvalidManifest."""
    document = yaml.safe_load(text)
    found = problems(document, crd_path)
    if found:
        raise InvalidManifest(name, found)
    return document
