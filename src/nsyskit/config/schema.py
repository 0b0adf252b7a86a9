"""The typed configuration model: every .env key, its parser, default and help, in one dataclass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from nsyskit.config import k8s_parse as kp
from nsyskit.config import parse as p
from nsyskit.config import slurm_parse as sp
from nsyskit.errors import ConfigError
from nsyskit.ranks import mounts, workloads
from nsyskit.ranks.workloads import WORKLOADS

# K8S_MEMORY, K8S_SHM_SIZE, K8S_HUGEPAGES=auto. GPU nodes: the p4d/p5 sizes. CPU: the local-cpu example (tiny model,
# 2 ranks under nsys) peaked at 0.8 GiB in its container (cgroup max_usage); 512Mi + 768Mi a rank leaves 2.5x that.
GPU_WORKER_MEMORY, GPU_WORKER_SHM, EFA_HUGEPAGES = "256Gi", "64Gi", "5120Mi"
CPU_WORKER_MIB, CPU_RANK_MIB, CPU_WORKER_SHM = 512, 768, "512Mi"


def setting(default: str, parser, section: str, help: str) -> Any:
    """A config field whose .env key is the upper-cased attribute name; `default` is raw .env text.

    This is the one place a setting's default, type (its parser), group and help are written: the
    template ('invoke config --template'), 'invoke config' and the validation all read them from here.
    """
    return field(default=parser(default), metadata={"raw_default": default, "parse": parser, "section": section, "help": help})


@dataclass(frozen=True)
class Config:
    """The resolved configuration (defaults < .env < profile < environment < task flags)."""

    # --- image: what is built and where it goes ---
    registry: str = setting("", p.registry_host, "image", "Registry host the image is pushed to; an ECR host (ACCOUNT.dkr.ecr.REGION.amazonaws.com) also gives account and region. Empty: local image only.")
    registry_endpoint: str = setting("", p.registry_host, "image", "Host[:port] Docker really pushes to and pulls from for REGISTRY, when it differs (ECR dual-stack ACCOUNT.dkr-ecr.REGION.on.aws, a proxy, a local test registry); ECR calls still use REGISTRY. Empty: REGISTRY.")
    aws_region: str = setting("us-west-2", p.aws_region, "image", "AWS region of the ECR registry and of the AWS API calls.")
    image: str = setting("nsyskit", p.image_name, "image", "Image repository name.")
    tag: str = setting("latest", p.image_tag, "image", "Image tag; the build also adds a content tag.")
    base_image: str = setting("nvcr.io/nvidia/pytorch:25.01-py3", p.image_reference, "image", "Base image: an NGC PyTorch image for GPUs, or the locally made Debian image of the local-cpu profile.")
    base_image_source: str = setting("pull", p.choice("pull", "debootstrap"), "image", "How BASE_IMAGE is obtained: pull (from its registry) or debootstrap (made locally by 'invoke setup').")
    debian_suite: str = setting("bookworm", p.debian_suite, "image", "Debian suite for BASE_IMAGE_SOURCE=debootstrap.")
    debian_mirror: str = setting("http://deb.debian.org/debian", p.url, "image", "Debian mirror for debootstrap and for apt inside Debian-based builds (point it at a local mirror when air-gapped).")
    ecr_scan_on_push: bool = setting("true", p.boolean, "image", "Create the ECR repository with image scanning on push.")
    ecr_tag_immutability: bool = setting("false", p.boolean, "image", "Create the ECR repository with immutable tags.")

    # --- build: which components go in ---
    install_mpi: bool = setting("true", p.boolean, "build", "Install OpenMPI and sshd for multi-node launch.")
    install_efa: bool = setting("true", p.boolean, "build", "Install the AWS EFA stack and aws-ofi-nccl (needs INSTALL_MPI=true).")
    install_tests: bool = setting("true", p.boolean, "build", "Build the NCCL tests (needs INSTALL_EFA=true).")
    extra_ca_bundle: str = setting("", p.text, "build", "PEM file of extra CA certificates trusted during the build only (TLS-intercepting proxies); never left in the image.")

    # --- components: pinned versions and sources ---
    nsys_source: str = setting("nvidia", p.choice("nvidia", "nvidia-apt", "debian", "base"), "components", "Where the nsys CLI comes from: nvidia (NVIDIA's CLI .deb), nvidia-apt (NVIDIA's apt repository), debian (non-free, 2022.4), base (already in BASE_IMAGE).")
    nsys_version: str = setting("2025.2.1", p.version, "components", "Nsight Systems version (>= 2024.4 for EFA metrics); NSYS_SOURCE=nvidia has a pinned URL and sha256 for 2025.2.1, other versions need NSYS_URL.")
    nsys_url: str = setting("", p.source, "components", "Override the nsys package URL or local path (air-gapped mirrors).")
    nsys_sha256: str = setting("", p.sha256, "components", "sha256 of NSYS_URL; empty uses the pinned checksum.")
    install_ncu: bool = setting("true", p.boolean, "components", "Install the Nsight Compute CLI (ncu) for PROFILER=ncu.")
    ncu_source: str = setting("base", p.choice("nvidia", "nvidia-apt", "debian", "base"), "components", "Where ncu comes from: base (already in BASE_IMAGE: NGC images ship it; any version), nvidia (NVIDIA's Nsight Compute .deb at NCU_URL, checked against NCU_SHA256), nvidia-apt (NVIDIA's CUDA apt repository, package nsight-compute-VERSION), debian (non-free, 2022.3).")
    ncu_version: str = setting("2025.2.1", p.version, "components", "Nsight Compute version installed by NCU_SOURCE=nvidia-apt or debian (checked after install); base keeps the base image's.")
    ncu_url: str = setting("", p.source, "components", "NVIDIA's Nsight Compute .deb for NCU_SOURCE=nvidia: an https:// or file:// URL or a local path (air-gapped mirrors).")
    ncu_sha256: str = setting("", p.sha256, "components", "sha256 of NCU_URL (required with NCU_SOURCE=nvidia).")
    openmpi_source: str = setting("efa", p.choice("release", "efa", "distro"), "components", "Where OpenMPI comes from: release (pinned tarball built from source), efa (bundled by the EFA installer), distro (OS package).")
    openmpi_version: str = setting("4.1.7", p.version, "components", "OpenMPI release for OPENMPI_SOURCE=release.")
    openmpi_url: str = setting("", p.source, "components", "Override the OpenMPI tarball URL or local path.")
    openmpi_sha256: str = setting("", p.sha256, "components", "sha256 of OPENMPI_URL; empty uses the pinned checksum.")
    efa_installer_version: str = setting("1.38.0", p.version, "components", "AWS EFA installer version.")
    efa_installer_url: str = setting("", p.source, "components", "Override the EFA installer tarball URL or local path.")
    efa_installer_sha256: str = setting("", p.sha256, "components", "sha256 of EFA_INSTALLER_URL; empty uses the pinned checksum.")
    nccl_version: str = setting("2.23.4-1", p.version, "components", "NCCL version expected in the image (the NGC base image ships it).")
    nccl_tests_version: str = setting("v2.13.11", p.version, "components", "nccl-tests release tag.")
    nccl_tests_url: str = setting("", p.source, "components", "Override the nccl-tests source tarball URL or local path.")
    nccl_tests_sha256: str = setting("", p.sha256, "components", "sha256 of NCCL_TESTS_URL; empty uses the pinned checksum.")
    nccl_tests_gencode: str = setting("-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90", p.word_list, "components", "nvcc -gencode flags for nccl-tests (A100: sm_80, H100/H200: sm_90).")
    pip_wheelhouse: str = setting("", p.wheelhouse, "components", "Local folder of wheels for the example's Python packages (offline builds; served to the build over HTTP, never copied into a layer), or a URL of a wheel listing; empty: PyPI.")
    torch_version: str = setting("2.13.0", p.version, "components", "PyTorch version installed when BASE_IMAGE has no torch (NGC images keep theirs); found in PIP_WHEELHOUSE first.")

    # --- run: the distributed training job ---
    nodes: int = setting("2", p.positive_int, "run", "Number of nodes (containers locally, workers on Kubernetes, Slurm nodes).")
    procs_per_node: int = setting("8", p.positive_int, "run", "Processes (ranks) per node.")
    gpus_per_node: int = setting("8", p.non_negative_int, "run", "GPUs per node (0: CPU with gloo).")
    efa_per_node: int = setting("32", p.non_negative_int, "run", "EFA devices per node (p5.48xlarge: 32, p4d.24xlarge: 4; 0: no EFA).")
    instance_type: str = setting("p5.48xlarge", p.label_value, "run", "EC2 instance type (Kubernetes node selector; empty: none).")
    model_size: str = setting("gpt2", p.choice("tiny", "gpt2", "gpt2-medium"), "run", "Model of the example: tiny (CPU), gpt2 (~124M), gpt2-medium (~350M); random weights.")
    batch_size: int = setting("8", p.positive_int, "run", "Micro-batch size per rank.")
    seq_len: int = setting("1024", p.positive_int, "run", "Sequence length of the synthetic token batches.")
    steps: int = setting("50", p.positive_int, "run", "Training steps.")
    workload: str = setting("ddp", p.choice(*WORKLOADS), "run", "What the ranks run: ddp (the DDP Hugging Face example), nccl-tests (NCCL_TESTS, one launch per test, each rank under the same nsys wrapper; needs GPUs) or command (your own COMMAND on every rank, under the same wrapper).")
    command: str = setting("", p.command_line, "run", "What one rank runs with WORKLOAD=command, as shell words, e.g. python3 /code/train.py --lr 3e-4 ('env K=V ...' allowed). Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as torch.distributed expects.")
    mounts: str = setting("", p.mounts, "run", "Your code and data in the ranks' containers: HOST:CONTAINER[:ro] bind mounts, comma-separated, absolute paths (local: docker bind mounts; Slurm: added to Pyxis --container-mounts; Kubernetes: hostPath volumes of the nodes). A missing host path stops a local run or Slurm submit.")
    nccl_tests: str = setting(workloads.DEFAULT_TESTS, p.nccl_tests, "run", "The NCCL tests WORKLOAD=nccl-tests runs, separated by ';', in order: a binary the image installs (all_reduce_perf, all_gather_perf, ...; nccl-tests-binaries.txt) and its flags; -g x -t GPUs per rank. Rank 0's output of each goes to nccl-tests/<binary>.out in the run folder.")

    # --- profile: what nsys records ---
    profiler: str = setting("nsys", p.choice("nsys", "ncu", "torch"), "profile", "What profiles the selected ranks: nsys (Nsight Systems timeline), ncu (Nsight Compute per kernel, NCU_* settings), torch (the PyTorch profiler in the example, one Kineto trace per rank, analyzed with HTA).")
    nsys_trace: str = setting("cuda,nvtx,osrt", p.trace_set, "profile", "nsys --trace APIs.")
    nsys_sample: str = setting("none", p.choice("none", "process-tree", "system-wide"), "profile", "CPU sampling (anything but none needs extra container capabilities).")
    profile_delay: int = setting("0", p.non_negative_int, "profile", "Seconds after a rank starts before nsys records, for any program, Python or not (0: from the start). A time window: not with a capture range (PROFILE_RANGE, or PROFILE_STEPS on GPUs), which decides instead.")
    profile_duration: int = setting("0", p.non_negative_int, "profile", "Seconds nsys records, from PROFILE_DELAY on, for any program (0: to the end). Not with a capture range, like PROFILE_DELAY.")
    profile_steps: tuple[int, int] | None = setting("10-15", p.step_range, "profile", "Training steps to record, FIRST-LAST (GPU: cudaProfilerApi capture range; CPU: marked by an NVTX range). Empty: whole run.")
    step_hook: bool = setting("true", p.boolean, "profile", "With WORKLOAD=command, count optimizer steps in every Python rank with no code change (a sitecustomize hook on torch's global optimizer-step hooks), mark each 'step N' and PROFILE_STEPS' 'profile_window' with NVTX, and on GPUs open nsys' capture there (cudaProfilerStart/Stop). false: for programs that mark their own steps.")
    profile_range: str = setting("", p.capture_range, "profile", "nvtx:NAME records only your program's own NVTX range NAME (nsys --capture-range=nvtx); it replaces PROFILE_STEPS' window. Empty: PROFILE_STEPS decides.")
    profile_ranks: str = setting("all", p.rank_selection, "profile", "Ranks to profile: all, local0 (local rank 0 of each node) or a list like 0,3; the others run unprofiled.")
    efa_metrics: bool = setting("true", p.boolean, "profile", "Record EFA NIC metrics (--enable efa_metrics) on local rank 0 of each node.")
    nsys_extra_args: str = setting("", p.word_list, "profile", "Extra arguments appended to 'nsys profile'.")
    ncu_kernel: str = setting("", p.text, "profile", "ncu -k: kernels to profile by name, 'regex:EXPR' for a regular expression; empty: every kernel.")
    ncu_set: str = setting("roofline", p.choice("roofline", "detailed", "full"), "profile", "ncu --set: roofline (Speed of Light + roofline charts), detailed (adds occupancy, memory and compute workload), full (every section).")
    ncu_launch_skip: int = setting("0", p.non_negative_int, "profile", "ncu --launch-skip: matching kernel launches to skip before profiling.")
    ncu_launch_count: int = setting("20", p.non_negative_int, "profile", "ncu --launch-count: matching kernel launches to profile per rank (0: no limit; each is replayed several times).")
    ncu_replay_mode: str = setting("kernel", p.choice("kernel", "application", "range"), "profile", "ncu --replay-mode: kernel (replay each kernel launch), application (rerun the whole rank once per pass; needs a deterministic run), range (replay ranges of launches).")
    nccl_debug: str = setting("INFO", p.choice("", "warn", "info", "trace", "version"), "profile", "NCCL_DEBUG level on GPU runs (empty: unset).")
    nccl_debug_subsys: str = setting("INIT,COLL,NET,TUNING", p.nccl_subsystems, "profile", "NCCL_DEBUG_SUBSYS on GPU runs; COLL is what 'invoke nccl-log' reads.")
    report_dir: str = setting("reports", p.folder, "profile", "Folder for run folders reports/<run-id>/ (relative to the project root).")

    # --- k8s: the Kubeflow MPIJob of 'invoke deploy --k8s' ---
    k8s_namespace: str = setting("default", kp.dns_label, "k8s", "Namespace of the MPIJob.")
    k8s_report_volume: str = setting("hostpath", p.choice("hostpath", "pvc"), "k8s", "Where the workers write reports: hostpath (K8S_REPORT_HOST_PATH/<job> on each node; 'invoke collect --k8s' copies them out of the worker pods) or pvc (subfolder <job> of the claim K8S_REPORT_PVC).")
    k8s_report_host_path: str = setting("/var/lib/nsyskit/reports", kp.absolute_path, "k8s", "Folder on each node for K8S_REPORT_VOLUME=hostpath.")
    k8s_report_pvc: str = setting("", kp.optional_dns_label, "k8s", "PersistentVolumeClaim (ReadWriteMany, e.g. FSx for Lustre) for K8S_REPORT_VOLUME=pvc.")
    k8s_shared_dir: str = setting("", kp.optional_absolute_path, "k8s", "Where this machine sees the claim K8S_REPORT_PVC (e.g. FSx for Lustre mounted at /fsx): 'invoke analyze RUN --k8s' mounts the claim at this same path in its pods, so RUN must lie under it. Empty: analyze --k8s is off.")
    k8s_memory: str = setting("auto", kp.auto_memory_quantity, "k8s", "Memory request and limit of each worker, /dev/shm included. auto: 256Gi with GPUs (p4d/p5 nodes); without GPUs what the example needs, 512Mi + 768Mi per rank (2Gi for the local-cpu profile's 2 ranks); empty: none.")
    k8s_shm_size: str = setting("auto", kp.auto_memory_quantity, "k8s", "Size of /dev/shm (a memory emptyDir) in each worker; it counts against K8S_MEMORY. auto: 64Gi with GPUs, 512Mi without.")
    k8s_hugepages: str = setting("auto", kp.auto_hugepages_quantity, "k8s", "hugepages-2Mi request and limit of each worker (EFA registers memory in them); 0: none. auto: 5120Mi with EFA (EFA_PER_NODE > 0), none without. Needs K8S_MEMORY.")
    k8s_clean_pod_policy: str = setting("none", p.choice("none", "running", "all"), "k8s", "runPolicy.cleanPodPolicy: none keeps the worker pods after the launcher ends so 'invoke collect --k8s' can copy hostpath reports ('invoke undeploy --k8s' frees them); running or all delete them.")
    k8s_backoff_limit: int = setting("0", p.non_negative_int, "k8s", "runPolicy.backoffLimit: how often a failed launcher is retried before the job fails.")
    k8s_ttl_seconds_after_finished: int | None = setting("3600", kp.optional_non_negative_int, "k8s", "runPolicy.ttlSecondsAfterFinished: seconds after the job ends before it and its pods are deleted; empty: kept until 'invoke undeploy --k8s'.")
    k8s_profiler: str = setting("wrapper", p.choice("wrapper", "devtools-sidecar-injector", "nsight-operator"), "k8s", "Who starts nsys in the pods: wrapper (nsyskit's rank-aware wrapper) or NVIDIA's injector installed in the cluster (devtools-sidecar-injector, nsight-operator): then the pods get its label, ranks run unwrapped and its helm values are rendered too.")
    k8s_injector_image: str = setting("", p.optional_image_reference, "k8s", "Nsight Systems binaries image the devtools-sidecar-injector copies into pods (devtoolBinariesImage.image); empty: the chart's default.")
    k8s_mpi_operator_manifest: str = setting("", p.text, "k8s", "Manifest 'invoke k8s-setup' applies when the MPIJob CRD is missing: URL or file; empty: the pinned kubeflow/mpi-operator v0.8.2 release.")

    # --- slurm: 'invoke deploy --slurm' (sbatch; Pyxis/enroot containers or the nodes' own nsys and python) ---
    slurm_mode: str = setting("pyxis", p.choice("pyxis", "host"), "slurm", "pyxis: each task runs in the image through Pyxis/enroot; host: no container, nsys, python and the kit's wrapper and example are on the nodes.")
    slurm_partition: str = setting("", sp.slurm_name, "slurm", "sbatch --partition (empty: the cluster's default partition).")
    slurm_account: str = setting("", sp.slurm_name, "slurm", "sbatch --account (empty: your default account).")
    slurm_time_limit: str = setting("01:00:00", sp.slurm_time, "slurm", "sbatch --time: minutes, HH:MM:SS or D-HH:MM:SS (empty: the partition's default).")
    slurm_exclusive: bool = setting("true", p.boolean, "slurm", "sbatch --exclusive: whole nodes, so no other job disturbs the profile.")
    slurm_mpi: str = setting("none", sp.slurm_name, "slurm", "srun --mpi plugin. none (default): the example's ranks find each other through torch.distributed (MASTER_ADDR), not MPI, so no plugin is needed (WORKLOAD=nccl-tests uses pmix while this is left at its default); pmix: for MPI programs (nccl-tests), needs Slurm's mpi/pmix plugin and libpmix on every node (Debian: libpmix-dev); pmi2: Slurm's own PMI-2, for MPI builds without PMIx; empty: the cluster's MpiDefault.")
    slurm_shared_dir: str = setting("/fsx", sp.node_folder, "slurm", "Shared file system at the same path on every node (FSx for Lustre on ParallelCluster); Pyxis mounts it at the same path. Keep the project on it: the job folder jobs/<id>/ must be visible from the nodes at the same path.")
    slurm_container_image: str = setting("registry", sp.container_image, "slurm", "What Pyxis runs: registry (the pushed REGISTRY/IMAGE:TAG, given as REGISTRY#IMAGE:TAG), sqsh (the file SLURM_SQSH made by 'invoke enroot-import'), an absolute .sqsh path, or any enroot URI Pyxis takes: docker://[USER@][REGISTRY#]IMAGE[:TAG] (docker:// may be left out), dockerd://IMAGE[:TAG] (the nodes' Docker daemon: a locally built image, e.g. dockerd://nsyskit:latest) or podman://IMAGE[:TAG].")
    slurm_sqsh: str = setting("", sp.sqsh_path, "slurm", "Squashfs image 'invoke enroot-import' writes and SLURM_CONTAINER_IMAGE=sqsh runs (empty: SLURM_SHARED_DIR/enroot/IMAGE+TAG.sqsh).")
    slurm_container_mounts: str = setting("", sp.container_mounts, "slurm", "Extra Pyxis --container-mounts SRC:DST[:FLAGS],... (the job's report folder and SLURM_SHARED_DIR are always mounted).")
    slurm_nsyskit: str = setting("nsyskit", sp.nsyskit_command, "slurm", "The nsyskit command of the compute nodes for 'invoke analyze --slurm' in host mode (e.g. a venv on the shared file system: /fsx/venv/bin/nsyskit); in pyxis mode the image's own nsyskit runs.")
    analyze_tree_ranks: int = setting("1024", p.positive_int, "slurm", "'invoke analyze --slurm/--k8s' of more reports than this merges as a tree: blocks of 512 parts merged side by side (a second job array or Indexed Job), then the final merge of those ('analyze --tree-ranks' sets it per call).")
    slurm_submit_prefix: str = setting("", sp.command_prefix, "slurm", "Command prefix for sbatch, squeue, sacct, scontrol and scancel, e.g. 'ssh login-node' when the kit runs off the cluster (empty: run them here).")

    # Not settings: where each value came from, warnings met while loading, the profile overlay read (if any).
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False)
    profile: str | None = field(default=None, compare=False, repr=False)

    # --- derived values ---
    @property
    def image_ref(self) -> str:
        """REGISTRY/IMAGE:TAG, or IMAGE:TAG without a registry."""
        name = f"{self.registry}/{self.image}" if self.registry else self.image
        return f"{name}:{self.tag}"

    @property
    def world_size(self) -> int:
        """Total ranks: NODES x PROCS_PER_NODE."""
        return self.nodes * self.procs_per_node

    @property
    def ecr(self) -> dict[str, str] | None:
        """{'account', 'region'} when REGISTRY is an ECR host, else None."""
        match = p.ECR_HOST.fullmatch(self.registry)
        return {"account": match["account"], "region": match["region"]} if match else None

    @property
    def uses_gpu(self) -> bool:
        """True when the run uses GPUs (NCCL), False on CPU (gloo)."""
        return self.gpus_per_node > 0

    @property
    def nccl_test_list(self) -> tuple[workloads.NcclTest, ...]:
        """The tests of NCCL_TESTS, in order (validated when the config was loaded)."""
        return workloads.parse_tests(self.nccl_tests)

    @property
    def mount_list(self) -> tuple[mounts.Mount, ...]:
        """The bind mounts of MOUNTS, in order (validated when the config was loaded)."""
        return mounts.parse_mounts(self.mounts)

    @property
    def needs_gpu_counters(self) -> bool:
        """True when ncu profiles GPU kernels: its performance counters are admin-only with the driver's default."""
        return self.profiler == "ncu" and self.uses_gpu

    @property
    def k8s_worker_sizes(self) -> dict[str, str]:
        """Each worker's memory, shm and hugepages (K8S_MEMORY, K8S_SHM_SIZE, K8S_HUGEPAGES), auto resolved: p4d/p5
        sizes on GPU nodes, huge pages for EFA, and on CPU what the example needs ('' for none)."""
        sizes = {"memory": self.k8s_memory, "shm": self.k8s_shm_size, "hugepages": self.k8s_hugepages}
        auto = {
            "memory": GPU_WORKER_MEMORY if self.uses_gpu else f"{CPU_WORKER_MIB + CPU_RANK_MIB * self.procs_per_node}Mi",
            "shm": GPU_WORKER_SHM if self.uses_gpu else CPU_WORKER_SHM,
            "hugepages": EFA_HUGEPAGES if self.efa_per_node else "",
        }
        return {key: auto[key] if value == kp.AUTO else value for key, value in sizes.items()}

    def replace(self, **changes: Any) -> Config:
        """A copy with some attributes changed (no re-validation: use load_config for user input)."""
        return dataclasses.replace(self, **changes)


# Keys that were renamed: reading the old one is an error naming the new one (never a silently ignored window).
RENAMED_KEYS = {"NSYS_DELAY": "PROFILE_DELAY", "NSYS_DURATION": "PROFILE_DURATION"}


def renamed_key_problem(key: str, value: str, source: str, spelled: str = "", new_spelled: str = "") -> ConfigError | None:
    """The error for a key that was renamed, as SPELLED where it was found (a file's KEY, an environment variable)
    and with the new name as it is written there; None for any other key."""
    new = RENAMED_KEYS.get(key)
    if new is None:
        return None
    new_spelled = new_spelled or new
    return ConfigError(spelled or key, value, f"this setting was renamed {new}",
                       f"write {new_spelled}={value} instead", source)  # fmt: skip


def settings() -> list[dataclasses.Field]:
    """The settings fields in declaration order (excluding bookkeeping fields)."""
    return [f for f in dataclasses.fields(Config) if "parse" in f.metadata]


def key_of(f: dataclasses.Field) -> str:
    """The .env key of a settings field."""
    return f.name.upper()


# The groups of settings, in the order 'invoke config' and the template show them, with their template headings.
SECTION_TITLES = {
    "image": "Image: what is built and where it is pushed",
    "build": "Build: which components go into the image (EFA needs MPI, TESTS needs EFA)",
    "components": "Components: pinned versions and overridable sources (URL or local path + sha256)",
    "run": "Run: the distributed training job",
    "profile": "Profile: what nsys records and where reports go",
    "k8s": "Kubernetes: the Kubeflow MPIJob of 'invoke deploy --k8s'",
    "slurm": "Slurm: the sbatch job of 'invoke deploy --slurm' (Pyxis/enroot or host mode)",
}
SECTIONS = tuple(SECTION_TITLES)
