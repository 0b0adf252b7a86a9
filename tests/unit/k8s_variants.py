"""The k8s test configurations shared by the k8s test modules: the committed .env and the variants the issue names."""

from __future__ import annotations

from pathlib import Path

from nsyskit.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"

# name -> (profile, overrides): the committed .env (the real AWS use) and the variants the issue names.
VARIANTS = {
    "default": (None, {"REGISTRY": ECR}),
    "cpu": ("local-cpu", {"REGISTRY": "127.0.0.1:5000", "NODES": "2"}),  # K8S_MEMORY, _SHM_SIZE, _HUGEPAGES: auto
    "gpu-efa": (None, {"REGISTRY": ECR, "NODES": "4", "INSTANCE_TYPE": "p4d.24xlarge", "EFA_PER_NODE": "4",
                       "K8S_NAMESPACE": "training", "K8S_HUGEPAGES": "10240Mi", "NSYS_SAMPLE": "process-tree", "PROFILE_RANKS": "local0"}),
    "pvc": (None, {"REGISTRY": ECR, "K8S_REPORT_VOLUME": "pvc", "K8S_REPORT_PVC": "fsx-claim", "K8S_CLEAN_POD_POLICY": "running",
                   "K8S_TTL_SECONDS_AFTER_FINISHED": "", "K8S_BACKOFF_LIMIT": "2", "INSTANCE_TYPE": ""}),
    # An injector runs one nsys for every rank: no EFA sampler limited to local rank 0 (config --check refuses it).
    "sidecar-injector": (None, {"REGISTRY": ECR, "K8S_PROFILER": "devtools-sidecar-injector", "EFA_METRICS": "false",
                                "K8S_INJECTOR_IMAGE": f"{ECR}/nsight-systems-cli:2024.6.1"}),
    "nsight-operator": (None, {"REGISTRY": ECR, "K8S_PROFILER": "nsight-operator", "EFA_METRICS": "false", "K8S_REPORT_VOLUME": "pvc", "K8S_REPORT_PVC": "fsx-claim"}),
    # WORKLOAD=nccl-tests with two tests: one mpirun each, in order, in the launcher.
    "nccl-tests": (None, {"REGISTRY": ECR, "WORKLOAD": "nccl-tests", "NCCL_TESTS": "all_reduce_perf -b 8 -e 2G -f 2 -g 1; alltoall_perf -b 1M -e 1G -f 2 -g 1"}),
    # WORKLOAD=command: the user's training script from a node folder, every rank under the wrapper, its window.
    "command": (None, {"REGISTRY": ECR, "WORKLOAD": "command", "PROFILE_STEPS": "20-25",
                       "COMMAND": "env OMP_NUM_THREADS=4 python3 /code/train.py --config /code/mine.yaml --lr 3e-4",
                       "MOUNTS": "/fsx/code:/code:ro,/fsx/data:/data"}),
}  # fmt: skip


def config(variant: str = "default", **more: str) -> Config:
    """The config of a variant, read from this repository's .env and profiles (the process environment left out)."""
    profile, overrides = VARIANTS[variant]
    return load_config(ROOT, profile=profile, overrides={**overrides, **more}, environ={})
