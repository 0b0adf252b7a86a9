"""The Kubernetes renderer: CRD validity with unknown fields rejected, golden files, one distributed job, bad values."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from fixtures.golden import assert_matches_golden
from fixtures.realdata import SHARED, need
from k8s_variants import ECR, ROOT, VARIANTS, config  # tests/unit is on sys.path

from nsyskit import k8s, targets
from nsyskit.config.k8s_parse import quantity_bytes
from nsyskit.errors import ConfigErrors
from nsyskit.k8s import crd, render
from nsyskit.local import cluster
from nsyskit.ranks import launch

CRD = ROOT / crd.CRD_FILE
GOLDEN = ROOT / "tests" / "data" / "golden" / "k8s"
JOB = "nsyskit-golden"


def mpijob(variant: str = "default", **more: str) -> dict:
    """The rendered MPIJob of a variant, parsed."""
    return yaml.safe_load(render.render(config(variant, **more), JOB, ROOT)[render.MPIJOB_FILE])


def replica(document: dict, role: str) -> dict:
    """The pod spec of the Launcher or Worker replica."""
    return document["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]


# --- CRD validity ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_validates_against_the_crd_with_unknown_fields_rejected(variant):
    assert crd.problems(mpijob(variant), CRD) == []


def test_vendored_crd_is_the_shared_one():
    assert CRD.read_bytes() == need(SHARED / "schemas" / CRD.name).read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        ("spec",),
        ("spec", "runPolicy"),
        ("spec", "mpiReplicaSpecs", "Worker"),
        ("spec", "mpiReplicaSpecs", "Worker", "template", "spec"),
        ("spec", "mpiReplicaSpecs", "Worker", "template", "spec", "containers", 0),
        ("spec", "mpiReplicaSpecs", "Worker", "template", "spec", "containers", 0, "resources"),
        ("spec", "mpiReplicaSpecs", "Launcher", "template", "metadata"),
        ("metadata",),
    ],
    ids=lambda path: ".".join(map(str, path)),
)
def test_an_unknown_field_anywhere_is_rejected(path):
    document = copy.deepcopy(mpijob())
    node = document
    for part in path:
        node = node[part]
    node["slotsPerWorkr"] = 8  # a typo: the API server would drop it silently
    found = crd.problems(document, CRD)
    assert any("slotsPerWorkr" in problem for problem in found), found


def test_wrong_types_and_values_are_rejected():
    document = copy.deepcopy(mpijob())
    document["spec"]["slotsPerWorker"] = "8"
    document["spec"]["mpiImplementation"] = "MVAPICH"
    replica(document, "Worker")["containers"][0]["resources"]["limits"]["memory"] = "lots"
    found = "\n".join(crd.problems(document, CRD))
    assert "spec.slotsPerWorker" in found and "spec.mpiImplementation" in found and "limits.memory" in found


def test_metadata_name_must_be_a_dns_label():
    document = copy.deepcopy(mpijob())
    document["metadata"]["name"] = "Not_A_Name"
    assert any(problem.startswith("metadata.name") for problem in crd.problems(document, CRD))


def test_strict_keeps_schemas_that_preserve_unknown_fields_open():
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}, crd.PRESERVE: True}}}
    strict = crd.strict(schema)
    assert strict["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["a"]


def test_invalid_manifest_error_is_one_line_naming_file_and_field():
    document = copy.deepcopy(mpijob())
    document["spec"]["bogus"] = 1
    with pytest.raises(crd.InvalidManifest) as error:
        crd.validate(yaml.safe_dump(document), CRD, name="jobs/x/mpijob.yaml")
    assert error.value.one_line().startswith(
        "jobs/x/mpijob.yaml does not match the MPIJob CRD: spec: Additional properties"
    )


# --- golden files ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_files_match_the_golden_files(variant):
    assert_matches_golden(render.render(config(variant), JOB, ROOT), GOLDEN / variant)


# --- one distributed job, rendered by launch.py -------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["default", "cpu", "gpu-efa", "pvc"])
def test_launcher_runs_exactly_the_mpirun_command_of_the_local_multi_container_run(variant):
    cfg = config(variant)
    command = replica(mpijob(variant), "Launcher")["containers"][0]["command"]
    local = cluster.launcher_mpirun(cfg, JOB)  # what `invoke run --local --nodes N` execs in its launcher
    # The same command, but for the name of worker 0 (rank 0's host), which each platform's DNS decides.
    assert (
        command[command.index(f"MASTER_ADDR={render.worker_host(JOB, 0)}")]
        == f"MASTER_ADDR={JOB}-worker-0.{JOB}-worker"
    )
    assert f"MASTER_ADDR={cluster.worker_name(0)}" in local
    assert [a for a in command if not a.startswith("MASTER_ADDR=")] == [
        a for a in local if not a.startswith("MASTER_ADDR=")
    ]
    assert command[:1] == ["mpirun"] and launch.WRAPPER in command and f"NSYSKIT_JOB_ID={JOB}" in command


@pytest.mark.parametrize("variant", ["default", "cpu", "gpu-efa"])
def test_one_job_over_all_ranks(variant):
    cfg = config(variant)
    document = mpijob(variant)
    spec = document["spec"]
    assert spec["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == cfg.nodes
    assert spec["slotsPerWorker"] == cfg.procs_per_node
    command = replica(document, "Launcher")["containers"][0]["command"]
    assert command[command.index("-np") + 1] == str(cfg.nodes * cfg.procs_per_node)
    assert command[command.index("--hostfile") + 1] == "/etc/mpi/hostfile"  # the operator's hostfile of all workers
    # Workers run no training of their own: only sshd, which the launcher's mpirun uses to start the ranks.
    assert "train.py" not in " ".join(replica(document, "Worker")["containers"][0]["command"])
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"


def test_gpu_efa_worker_resources_are_requested_and_limited_equally():
    worker = replica(mpijob("gpu-efa"), "Worker")
    resources = worker["containers"][0]["resources"]
    assert (
        resources["limits"]
        == resources["requests"]
        == {
            "nvidia.com/gpu": 8,
            "vpc.amazonaws.com/efa": 4,
            "hugepages-2Mi": "10240Mi",
            "memory": "256Gi",
        }
    )
    assert worker["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert worker["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK", "SYS_ADMIN"]
    command = replica(mpijob("gpu-efa"), "Launcher")["containers"][0]["command"]
    for variable in ("FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1", "NCCL_DEBUG=INFO", "NSYSKIT_PROFILE_RANKS=local0"):
        assert command[command.index(variable) - 1] == "-x"


def test_cpu_worker_asks_for_no_gpu_efa_or_huge_pages_and_has_no_node_selector():
    worker = replica(mpijob("cpu"), "Worker")
    assert "nodeSelector" not in worker and "securityContext" not in worker["containers"][0]
    assert set(worker["containers"][0]["resources"]["limits"]) == {"memory"}


def test_the_local_cpu_profile_asks_for_what_its_example_needs_so_a_small_cluster_can_schedule_it():
    worker = replica(mpijob("cpu"), "Worker")
    resources = worker["containers"][0]["resources"]
    # 512Mi + 768Mi for each of its 2 ranks: the example peaked at 0.8 GiB in a local run's container.
    assert resources["limits"] == resources["requests"] == {"memory": "2048Mi"}
    assert {v["name"]: v for v in worker["volumes"]}["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "512Mi"}
    launcher = replica(mpijob("cpu"), "Launcher")["containers"][0]["resources"]["requests"]
    # The launcher and a worker fit one 4 GiB node (kind, minikube), with no huge pages a dev cluster rarely has.
    assert quantity_bytes(launcher["memory"]) + quantity_bytes(resources["limits"]["memory"]) <= 4 * 2**30


@pytest.mark.parametrize(
    ("overrides", "memory", "shm", "hugepages"),
    [
        ({}, "256Gi", "64Gi", "5120Mi"),  # the committed .env: p5 nodes, 8 GPUs, EFA
        ({"EFA_PER_NODE": "0"}, "256Gi", "64Gi", ""),  # GPUs without EFA: no huge pages
        ({"GPUS_PER_NODE": "0", "EFA_PER_NODE": "0", "PROCS_PER_NODE": "4"}, "3584Mi", "512Mi", ""),  # any CPU profile
        ({"GPUS_PER_NODE": "0", "K8S_MEMORY": "8Gi", "K8S_SHM_SIZE": "AUTO", "K8S_HUGEPAGES": "0"}, "8Gi", "512Mi", ""),
        ({"K8S_MEMORY": "", "K8S_HUGEPAGES": "0", "K8S_SHM_SIZE": "1Gi"}, "", "1Gi", ""),  # set: taken as they are
    ],
)
def test_auto_sizes_a_worker_from_its_gpus_efa_and_ranks_and_set_values_win(overrides, memory, shm, hugepages):
    cfg = config("default", **overrides)
    assert cfg.k8s_worker_sizes == {"memory": memory, "shm": shm, "hugepages": hugepages}
    limits = replica(mpijob("default", **overrides), "Worker")["containers"][0]["resources"].get("limits", {})
    assert (limits.get("memory", ""), limits.get("hugepages-2Mi", "")) == (memory, hugepages)


def test_shm_is_a_memory_empty_dir_and_reports_a_per_job_host_folder():
    worker = replica(mpijob(), "Worker")
    volumes = {volume["name"]: volume for volume in worker["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert volumes["reports"]["hostPath"] == {"path": f"/var/lib/nsyskit/reports/{JOB}", "type": "DirectoryOrCreate"}
    mounts = {mount["name"]: mount for mount in worker["containers"][0]["volumeMounts"]}
    assert mounts["dshm"]["mountPath"] == "/dev/shm" and mounts["reports"] == {
        "name": "reports",
        "mountPath": "/reports",
    }


def test_pvc_reports_go_to_a_per_job_sub_path_and_run_policy_follows_the_settings():
    document = mpijob("pvc")
    worker = replica(document, "Worker")
    volumes = {volume["name"]: volume for volume in worker["volumes"]}
    assert volumes["reports"]["persistentVolumeClaim"] == {"claimName": "fsx-claim"}
    mounts = {mount["name"]: mount for mount in worker["containers"][0]["volumeMounts"]}
    assert mounts["reports"] == {"name": "reports", "mountPath": "/reports", "subPath": JOB}
    assert document["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 2}
    assert mpijob()["spec"]["runPolicy"] == {
        "cleanPodPolicy": "None",
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": 3600,
    }


# --- the injector mode ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "label", "match_key"),
    [
        ("sidecar-injector", "nvidia-devtools-sidecar-injector", "injectionMatch"),
        ("nsight-operator", "nvidia-nsight-profile", "injectionIncludePatterns"),
    ],
)
def test_injector_mode_labels_workers_unwraps_ranks_and_renders_helm_values(variant, label, match_key):
    files = render.render(config(variant), JOB, ROOT)
    assert sorted(files) == [render.VALUES_FILE, render.MPIJOB_FILE, render.LABEL_FILE]
    document = yaml.safe_load(files[render.MPIJOB_FILE])
    worker_labels = document["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    assert worker_labels[label] == "enabled"
    command = replica(document, "Launcher")["containers"][0]["command"]
    assert (
        launch.WRAPPER not in command
        and command[-len(launch.rank_command(config(variant))) + 1 :] == launch.rank_command(config(variant))[1:]
    )
    values = yaml.safe_load(files[render.VALUES_FILE])["profile"]
    pattern = values[match_key] if isinstance(values[match_key], str) else values[match_key][0]
    assert re.match(pattern, "python3 /nsyskit/workload/train.py --model-size gpt2")
    assert "--output=/reports/" in values["devtoolArgs"] and "OMPI_COMM_WORLD_RANK" in values["devtoolArgs"]
    assert "--capture-range=cudaProfilerApi" in values["devtoolArgs"]
    assert values["volumeMounts"] == [{"name": "nsys-reports", "mountPath": "/reports"}]
    patch = yaml.safe_load(files[render.LABEL_FILE])
    assert patch == {"spec": {"template": {"metadata": {"labels": {label: "enabled"}}}}}


def test_sidecar_injector_values_name_the_binaries_image():
    values = yaml.safe_load(render.render(config("sidecar-injector"), JOB, ROOT)[render.VALUES_FILE])
    assert values["devtoolBinariesImage"]["image"] == f"{ECR}/nsight-systems-cli:2024.6.1"
    assert values["profile"]["volumes"][0]["hostPath"]["path"] == "/var/lib/nsyskit/reports"


# --- bad values: rejected before anything is written -------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ({"NODES": "0"}, "NODES", "is not a positive integer"),
        ({"GPUS_PER_NODE": "3"}, "GPUS_PER_NODE", "does not divide PROCS_PER_NODE=8"),
        ({"PROCS_PER_NODE": "4"}, "GPUS_PER_NODE", "does not divide PROCS_PER_NODE=4"),
        ({"K8S_HUGEPAGES": "-2Gi"}, "K8S_HUGEPAGES", "is negative"),
        ({"K8S_HUGEPAGES": "3Mi"}, "K8S_HUGEPAGES", "is not a whole number of 2Mi pages"),
        ({"REGISTRY": ""}, "REGISTRY", "must pull the image nsyskit:latest from a registry"),
        ({"K8S_MEMORY": ""}, "K8S_HUGEPAGES", "only with a memory request"),
        ({"K8S_SHM_SIZE": "300Gi"}, "K8S_SHM_SIZE", "is larger than K8S_MEMORY=auto (256Gi)"),
        ({"GPUS_PER_NODE": "0", "K8S_SHM_SIZE": "7Gi"}, "K8S_SHM_SIZE", "is larger than K8S_MEMORY=auto (6656Mi)"),
        ({"K8S_REPORT_VOLUME": "pvc"}, "K8S_REPORT_PVC", "needs the name of a claim"),
        ({"K8S_NAMESPACE": "My_Team"}, "K8S_NAMESPACE", "is not a Kubernetes name"),
        ({"K8S_MEMORY": "lots"}, "K8S_MEMORY", "is not a Kubernetes quantity"),
    ],
)
def test_bad_values_are_rejected_with_one_line_before_anything_is_written(tmp_path, overrides, key, words):
    with pytest.raises(ConfigErrors) as error:
        targets.deploy(targets.get("k8s"), config("default", **overrides), tmp_path, dry_run=True)
    line = error.value.one_line()
    assert line.startswith(f"{key}=") and words in line and "fix:" in line and "\n" not in line
    assert list(tmp_path.iterdir()) == []  # no jobs/ folder, no file


def test_zero_workers_or_slots_are_rejected_even_when_the_config_was_built_in_code(tmp_path):
    cfg = config().replace(nodes=0, procs_per_node=0)
    with pytest.raises(ConfigErrors) as error:
        targets.deploy(targets.get("k8s"), cfg, tmp_path, dry_run=True)
    assert [e.key for e in error.value.errors][:2] == ["NODES", "PROCS_PER_NODE"]
    assert not (tmp_path / "jobs").exists()


# --- dry run: files in jobs/<id>/, nothing needs a cluster ------------------------------------------------------------


def _project(tmp_path: Path) -> Path:
    """A project root with this repository's templates, so jobs/ lands in a temporary folder."""
    (tmp_path / "k8s").symlink_to(ROOT / "k8s")
    return tmp_path


def test_dry_run_writes_valid_files_into_a_fresh_job_folder_and_remembers_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no kubectl: a dry run must not need it
    root = _project(tmp_path)
    result = targets.deploy(targets.get("k8s"), config("sidecar-injector"), root, dry_run=True).job
    assert not result.submitted and result.job_dir.parent == root / "jobs"
    assert sorted(path.name for path in result.files) == sorted(
        [render.MPIJOB_FILE, render.VALUES_FILE, render.LABEL_FILE]
    )
    text = (result.job_dir / render.MPIJOB_FILE).read_text()
    assert crd.problems(yaml.safe_load(text), CRD) == []
    assert f"name: {result.job_id}" in text and result.job_id == "nsyskit-" + result.job_dir.name
    assert any(line.startswith("dry run: nothing submitted") for line in result.lines)
    assert (root / "jobs" / "last-k8s").read_text().strip() == result.job_dir.name
    record = k8s.jobdir.read_record(result.job_dir)
    assert record["job_id"] == result.job_id and record["submitted"] is False and record["namespace"] == "default"
    second = targets.deploy(targets.get("k8s"), config(), root, dry_run=True).job
    assert second.job_dir != result.job_dir and second.job_id != result.job_id
