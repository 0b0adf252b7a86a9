"""The containers of one local run: 1 node (torchrun) or N worker nodes plus an mpirun launcher on a private network."""

from __future__ import annotations

import contextlib
import io
import shlex
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import APIError, NotFound
from docker.types import DeviceRequest

from nsyskit import console, engine
from nsyskit.config import Config
from nsyskit.ranks import launch, workloads

LABEL_RUN = "nsyskit.run"
LABEL_ROLE = "nsyskit.role"
SHM_SIZE = "1g"  # DataLoader workers and NCCL's shared-memory transport outgrow Docker's 64 MB default
SSH_WAIT_S = 60
STOP_TIMEOUT_S = 10


def worker_name(index: int) -> str:
    """Host name of worker node `index` (as in a Kubeflow MPIJob: <job>-worker-<i>)."""
    return f"worker-{index}"


def multi_node(cfg: Config) -> bool:
    """The one place that decides it: N > 1 nodes run workers with sshd plus an mpirun launcher, 1 node torchrun."""
    return cfg.nodes > 1


def launcher_kind(cfg: Config) -> str:
    """What starts the ranks: mpirun across nodes (and for the NCCL tests, MPI programs), torchrun on one."""
    return "mpirun" if multi_node(cfg) or workloads.needs_mpi(cfg.workload) else "torchrun"


def launcher_role(cfg: Config) -> str:
    """The container whose exit ends the run: the mpirun launcher, or the only worker."""
    return "launcher" if multi_node(cfg) else worker_name(0)


def host_config(cfg: Config, report_dir: Path) -> dict:
    """Options every rank-running container gets (runs and the long-running one): reports, GPUs, shm, capabilities."""
    volumes = {str(Path(report_dir).resolve()): {"bind": launch.CONTAINER_REPORT_DIR, "mode": "rw"}}
    for mount in cfg.mount_list:  # MOUNTS: the user's code and data
        volumes[mount.host] = {"bind": mount.container, "mode": "ro" if mount.read_only else "rw"}
    options: dict = {"volumes": volumes, "shm_size": SHM_SIZE}
    if cfg.uses_gpu:
        options["device_requests"] = [DeviceRequest(count=cfg.gpus_per_node, capabilities=[["gpu"]])]
    if cfg.nsys_sample != "none" or cfg.needs_gpu_counters:
        # CPU sampling needs perf_event_open, which Docker's seccomp profile grants only with CAP_SYS_ADMIN;
        # ncu's GPU performance counters are admin-only with the driver's default (ERR_NVGPUCTRPERM otherwise).
        options["cap_add"] = ["SYS_ADMIN"]
    return options


def warn_capabilities(cfg: Config) -> None:
    """Say why the containers get SYS_ADMIN, when they do."""
    if cfg.nsys_sample != "none":
        console.warn(f"NSYS_SAMPLE={cfg.nsys_sample}: the containers get capability SYS_ADMIN (perf events for CPU sampling)")
    elif cfg.needs_gpu_counters:
        console.warn("PROFILER=ncu on GPUs: the containers get capability SYS_ADMIN (GPU performance counters)")


def hostfile(cfg: Config) -> str:
    """mpirun's hostfile: every worker with PROCS_PER_NODE slots."""
    return "".join(f"{worker_name(i)} slots={cfg.procs_per_node}\n" for i in range(cfg.nodes))


def ssh_keys() -> dict[str, tuple[bytes, int]]:
    """A fresh ed25519 key pair as the files of /root/.ssh: name -> (content, mode)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = (
        key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        + b" nsyskit\n"
    )
    return {"id_ed25519": (private, 0o600), "id_ed25519.pub": (public, 0o644), "authorized_keys": (public, 0o600)}


def tar_of(files: dict[str, tuple[bytes, int]], folder: str | None = None) -> bytes:
    """A tar (owned by root) of `files`, optionally inside `folder` (created with mode 0700 for .ssh, else 0755)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        if folder:
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = (
                tarfile.DIRTYPE,
                0o700 if folder.endswith("ssh") else 0o755,
                int(time.time()),
            )
            archive.addfile(info)
        for name, (content, mode) in files.items():
            info = tarfile.TarInfo(f"{folder}/{name}" if folder else name)
            info.size, info.mode, info.mtime = len(content), mode, int(time.time())
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def launcher_mpirun(cfg: Config, run_id: str) -> list[str]:
    """The launcher's mpirun: launch.mpirun_command over the mounted hostfile, rank 0 on worker 0."""
    return launch.mpirun_command(
        cfg, launch.HOSTFILE, launch.CONTAINER_REPORT_DIR, master_addr=worker_name(0), job_id=run_id
    )


def launcher_script(cfg: Config, run_id: str) -> str:
    """The launcher's shell: wait until every worker's sshd answers, then exec launcher_mpirun."""
    hosts = " ".join(worker_name(i) for i in range(cfg.nodes))
    mpirun = launcher_mpirun(cfg, run_id)
    return (
        f"for host in {hosts}; do "
        f"for try in $(seq {SSH_WAIT_S}); do ssh -o BatchMode=yes -o ConnectTimeout=2 $host true 2>/dev/null && break; sleep 1; done; "
        f'ssh -o BatchMode=yes -o ConnectTimeout=2 $host true || {{ echo "nsyskit: sshd on $host did not answer" >&2; exit 255; }}; '
        f"done; echo 'nsyskit: all {cfg.nodes} workers reachable, starting mpirun'; exec {shlex.join(mpirun)}"
    )


def rank_commands(cfg: Config) -> dict[str, list]:
    """What run.json records the ranks ran: {'rank': argv} for the example and COMMAND, {'tests': {name: argv}} for the NCCL tests."""
    if cfg.workload == "nccl-tests":
        return {"tests": {step.name: step.rank_command for step in launch.steps(cfg)}}
    return {"rank": launch.rank_command(cfg)}


@dataclass
class Member:
    """One container of the run."""

    role: str  # worker-<i> or launcher
    container: object  # docker Container
    runs_ranks: bool


@dataclass
class LocalCluster:
    """Creates, starts and always removes the containers (and network) of one run."""

    client: docker.DockerClient
    cfg: Config
    run_id: str
    run_dir: Path
    members: list[Member] = field(default_factory=list)
    network: object | None = None
    commands: dict[str, list[str]] = field(default_factory=dict)

    @property
    def multi_node(self) -> bool:
        """N > 1 nodes (see multi_node)."""
        return multi_node(self.cfg)

    def _name(self, role: str) -> str:
        return f"nsyskit-{self.run_id}-{role}"

    def _host_config(self) -> dict:
        return host_config(self.cfg, self.run_dir)

    def _create(self, role: str, command: list[str], environment: dict[str, str], runs_ranks: bool, **extra) -> Member:
        labels = {LABEL_RUN: self.run_id, LABEL_ROLE: role}
        if self.network is not None:
            endpoint = self.client.api.create_endpoint_config(aliases=[role])
            extra.update(network=self.network.name, networking_config={self.network.name: endpoint})
        container = self.client.containers.create(
            self.cfg.image_ref, command=command, name=self._name(role), hostname=role, labels=labels,
            environment=environment, init=True, detach=True, **extra,
        )  # fmt: skip
        member = Member(role, container, runs_ranks)
        self.members.append(member)
        return member

    def start(self) -> None:
        """Create everything, then start the containers (workers before the launcher)."""
        engine.require_image(self.client, self.cfg.image_ref)
        warn_capabilities(self.cfg)
        environment = {**launch.wrapper_env(self.cfg, launch.CONTAINER_REPORT_DIR, launcher_kind(self.cfg), job_id=self.run_id),
                       "PYTHONUNBUFFERED": "1"}  # fmt: skip
        if not self.multi_node:
            command = launch.single_node_command(self.cfg, self.run_id)
            self.commands = {"launcher": command, **rank_commands(self.cfg)}
            self._create(worker_name(0), command, environment, True, **self._host_config())
        else:
            self.network = self.client.networks.create(
                f"nsyskit-{self.run_id}", driver="bridge", labels={LABEL_RUN: self.run_id}
            )
            keys = tar_of(ssh_keys(), ".ssh")
            for index in range(self.cfg.nodes):
                # Workers only serve ssh, as in an MPIJob; the wrapper environment arrives with mpirun's -x.
                worker = self._create(
                    worker_name(index),
                    ["/usr/sbin/sshd", "-D", "-e"],
                    {"PYTHONUNBUFFERED": "1"},
                    True,
                    **self._host_config(),
                )
                worker.container.put_archive("/root", keys)
            script = launcher_script(self.cfg, self.run_id)
            launcher = self._create("launcher", ["bash", "-c", script], {}, False)
            launcher.container.put_archive("/root", keys)
            launcher.container.put_archive("/etc", tar_of({"hostfile": (hostfile(self.cfg).encode(), 0o644)}, "mpi"))
            self.commands = {
                "launcher": launcher_mpirun(self.cfg, self.run_id),
                **rank_commands(self.cfg),
                "hostfile": hostfile(self.cfg).splitlines(),
            }  # fmt: skip
        for member in self.members:
            try:
                member.container.start()
            except APIError as exc:
                raise engine.start_failed(exc, self.cfg.gpus_per_node, self.cfg.sources.get("GPUS_PER_NODE", "")) from None

    @property
    def launcher(self) -> Member:
        """The container whose exit ends the run (torchrun's node, or mpirun's launcher)."""
        return self.members[-1]

    def stop(self) -> None:
        """Stop the containers that still run (SIGTERM, then SIGKILL after a grace period)."""
        for member in self.members:
            try:
                member.container.reload()
                if member.container.status == "running":
                    member.container.stop(timeout=STOP_TIMEOUT_S)
            except (NotFound, APIError):
                pass

    def exit_codes(self) -> dict[str, int | None]:
        """role -> exit code of each container (None: still running or gone)."""
        codes = {}
        for member in self.members:
            try:
                member.container.reload()
                state = member.container.attrs.get("State", {})
                codes[member.role] = None if state.get("Running") else state.get("ExitCode")
            except (NotFound, APIError):
                codes[member.role] = None
        return codes

    def remove(self) -> None:
        """Remove every container and the network, whatever state they are in."""
        for member in self.members:
            with contextlib.suppress(NotFound, APIError):
                member.container.remove(force=True)
        if self.network is not None:
            with contextlib.suppress(NotFound, APIError):
                self.network.remove()


def remove_run(client: docker.DockerClient, run_id: str | None = None) -> list[str]:
    """Remove the containers and networks labelled with run_id (None: of every nsyskit run); returns their names."""
    selector = {"label": f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN}
    removed = []
    for container in client.containers.list(all=True, filters=selector):
        container.remove(force=True)
        removed.append(container.name)
    for network in client.networks.list(filters=selector):
        network.remove()
        removed.append(network.name)
    return removed
