"""The offline validation refuses what the kube-apiserver refuses beyond types: schema formats, Job and Pod rules."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from k8s_variants import ROOT, config  # tests/unit is on sys.path

from nsyskit import k8s
from nsyskit.clusteranalysis import AnalysisPlan, elements_for
from nsyskit.config import load_config
from nsyskit.k8s import analysis, apirules, crd, render

CRD = ROOT / crd.CRD_FILE
JOB = "nsyskit-rules"
RUN = Path("/fsx/nsyskit/reports/run-1")
K8S = {"REGISTRY": "127.0.0.1:5000", "K8S_REPORT_PVC": "fsx-claim", "K8S_SHARED_DIR": "/fsx"}


def mpijob(variant: str = "default") -> dict:
    """A rendered MPIJob, parsed (valid as rendered)."""
    document = yaml.safe_load(render.render(config(variant), JOB, ROOT)[render.MPIJOB_FILE])
    assert crd.problems(document, CRD) == []
    return document


def analysis_jobs() -> list[dict]:
    """The rendered analysis Jobs (the Indexed map, the merge), parsed (valid as rendered)."""
    reports = [RUN / f"nsyskit_1_node_0_rank_{rank}_h0.nsys-rep" for rank in range(4)]
    plan = AnalysisPlan(RUN, reports, elements_for(len(reports)))
    text = analysis.manifests(load_config(ROOT, overrides=K8S, environ={}), ROOT, plan)
    documents = list(yaml.safe_load_all(text))
    assert [crd.problems(d, CRD, crd.job_schema(CRD)) for d in documents] == [[], []]
    return documents


def job_problems(document: dict) -> list[str]:
    return crd.problems(document, CRD, crd.job_schema(CRD))


def worker(document: dict) -> dict:
    return document["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]


# --- formats: int32 and int64 are ranges, as Go's types are -----------------------------------------------------------


def test_slots_per_worker_above_int32_is_refused_and_its_largest_value_passes():
    document = mpijob()
    document["spec"]["slotsPerWorker"] = 2**31
    assert crd.problems(document, CRD) == [
        "spec.slotsPerWorker: 2147483648 is out of the range of int32 (-2147483648 to 2147483647)"
    ]
    document["spec"]["slotsPerWorker"] = 2**31 - 1
    assert crd.problems(document, CRD) == []


def test_a_config_built_in_code_with_too_many_slots_renders_no_job_folder(tmp_path):
    (tmp_path / "k8s").symlink_to(ROOT / "k8s")
    cfg = config().replace(procs_per_node=2**31)  # the .env parser caps it; code can still build one
    refused = r"mpijob.yaml does not match the MPIJob CRD: spec.slotsPerWorker: .*int32"
    with pytest.raises(crd.InvalidManifest, match=refused):
        k8s.render_job(cfg, tmp_path)
    assert [path.name for path in (tmp_path / "jobs").rglob("*")] == []


def test_int64_fields_are_checked_too():
    document = mpijob()
    worker(document)["terminationGracePeriodSeconds"] = 2**63  # format int64 in the CRD's pod spec
    assert crd.problems(document, CRD) == [
        "spec.mpiReplicaSpecs.Worker.template.spec.terminationGracePeriodSeconds: "
        "9223372036854775808 is out of the range of int64 (-9223372036854775808 to 9223372036854775807)"
    ]
    worker(document)["terminationGracePeriodSeconds"] = 2**63 - 1
    assert crd.problems(document, CRD) == []


def test_job_integer_fields_are_int32():
    map_job = analysis_jobs()[0]
    map_job["spec"]["completions"] = 2**31
    assert any(p.startswith("spec.completions: 2147483648 is out of the range of int32") for p in job_problems(map_job))


@pytest.mark.parametrize(
    "fmt, value, ok",
    [("date-time", "2026-11-25T21:00:00Z", True), ("date-time", "2026-11-25 21:00", False), ("int32", -(2**31), True),
     ("int32", -(2**31) - 1, False), ("int32", True, True), ("byte", "anything", True)],
)  # fmt: skip
def test_format_problem(fmt, value, ok):
    assert (apirules.format_problem(fmt, value) is None) == ok


# --- the Job rules -------------------------------------------------------------------------------------------------


def test_backoff_limit_per_index_without_indexed_completion_is_refused():
    map_job = analysis_jobs()[0]
    del map_job["spec"]["completionMode"]
    assert job_problems(map_job) == ["spec.backoffLimitPerIndex: requires completionMode: Indexed"]
    map_job["spec"]["completionMode"] = "NonIndexed"
    assert job_problems(map_job) == ["spec.backoffLimitPerIndex: requires completionMode: Indexed"]


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"maxFailedIndexes": 1, "backoffLimitPerIndex": None}, "spec.maxFailedIndexes: requires backoffLimitPerIndex"),
        ({"maxFailedIndexes": 5}, "spec.maxFailedIndexes: must be at most completions"),
        ({"completions": None}, "spec.completions: is required when completionMode is Indexed"),
        ({"parallelism": 100_001, "completions": 200_000},
         "spec.parallelism: must be at most 100000 when completionMode is Indexed"),
    ],
)  # fmt: skip
def test_the_other_indexed_job_rules(change, expected):
    map_job = analysis_jobs()[0]
    for key, value in change.items():
        if value is None:
            del map_job["spec"][key]
        else:
            map_job["spec"][key] = value
    assert job_problems(map_job) == [expected]


def test_a_job_pod_may_not_restart_always():
    merge_job = analysis_jobs()[1]
    merge_job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert job_problems(merge_job) == [
        "spec.template.spec.restartPolicy: 'Always' is not allowed in a Job: use Never or OnFailure"
    ]


# --- the Pod rules, in a Job's pod and in an MPIJob's replicas ------------------------------------------------------


@pytest.mark.parametrize("name", ["Merge", "merge_step", "-merge", "m" * 64, "merge."])
def test_a_container_name_that_is_not_an_rfc_1123_label_is_refused(name):
    merge_job = analysis_jobs()[1]
    merge_job["spec"]["template"]["spec"]["containers"][0]["name"] = name
    assert job_problems(merge_job) == [
        f"spec.template.spec.containers.0.name: {name!r} is not an RFC 1123 label: at most 63 lower-case letters, "
        "digits and '-', starting and ending with a letter or digit"
    ]
    document = mpijob()
    worker(document)["containers"][0]["name"] = name
    assert [p.split(":")[0] for p in crd.problems(document, CRD)] == [
        "spec.mpiReplicaSpecs.Worker.template.spec.containers.0.name"
    ]


def test_an_init_container_with_a_containers_name_is_refused():
    merge_job = analysis_jobs()[1]
    pod = merge_job["spec"]["template"]["spec"]
    pod["initContainers"][0]["name"] = pod["containers"][0]["name"]
    assert job_problems(merge_job) == [
        "spec.template.spec.containers.0.name: 'merge' is the name of another container of the pod (names are unique)"
    ]


def test_volume_names_mounts_and_port_names_follow_the_pod_rules():
    document = mpijob()
    pod = worker(document)
    pod["volumes"][0]["name"] = "Dshm"
    pod["containers"][0]["ports"][0]["name"] = "ssh-port-of-the-worker"  # longer than 15
    assert crd.problems(document, CRD) == [
        "spec.mpiReplicaSpecs.Worker.template.spec.containers.0.ports.0.name: 'ssh-port-of-the-worker' is not an IANA "
        "service name: at most 15 lower-case letters, digits and '-', with a letter, no '--', starting and ending with "
        "a letter or digit",
        "spec.mpiReplicaSpecs.Worker.template.spec.containers.0.volumeMounts.0.name: 'dshm' is not a volume of the pod",
        "spec.mpiReplicaSpecs.Worker.template.spec.volumes.0.name: 'Dshm' is not an RFC 1123 label: at most 63 "
        "lower-case letters, digits and '-', starting and ending with a letter or digit",
    ]


def test_every_rendered_variant_keeps_passing():
    for variant in ("default", "cpu", "gpu-efa", "pvc", "sidecar-injector", "nsight-operator"):
        assert apirules.problems(copy.deepcopy(mpijob(variant))) == []
