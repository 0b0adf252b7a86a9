"""A real two-node Slurm cluster in Docker containers, for the Slurm integration test.

Each node is a container of the kit's image plus Debian's slurmctld/slurmd/slurm-client, munge and libpmix
(so srun --mpi=pmix works), on a private Docker network. The first node runs slurmctld and both run slurmd,
with ProctrackType=proctrack/linuxproc, TaskPlugin=task/none and SelectType=select/cons_tres (containers have
no systemd and no cgroup delegation). A host folder is bind-mounted at the same path in every node: the shared
file system that holds the project, its job folders and their reports.
"""

from __future__ import annotations

import secrets
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

NODE_PACKAGES = "slurmctld slurmd slurm-client munge libpmix-dev"  # libpmix-dev: slurm's mpi/pmix dlopens libpmix.so
START_TIMEOUT_S = 60
NODE_REPOSITORY = "nsyskit-slurm-node"
SLURM_CONF = """\
ClusterName=nsyskit
SlurmctldHost={controller}
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Containers see all of the host's CPUs: trust the node lines below instead of what slurmd counts.
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
# Keep ended jobs in slurmctld's memory long enough for scontrol to report their state (no accounting here).
MinJobAge=900
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName={nodes} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
START_DAEMONS = (
    "mkdir -p /run/munge /var/log/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd"
    " && chown munge:munge /run/munge && runuser -u munge -- /usr/sbin/munged"
)


def docker(*args: str, check: bool = True, timeout: int = 600, input: str | None = None) -> subprocess.CompletedProcess:
    """Run the docker CLI; a failure shows the command and its stderr."""
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])}… exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    return result


def node_image(kit_image: str) -> str:
    """The kit image plus Slurm and munge, built once per kit image (tagged with its id, so reruns reuse it)."""
    image_id = docker("image", "inspect", "--format", "{{.Id}}", kit_image).stdout.strip()
    tag = f"{NODE_REPOSITORY}:{image_id.split(':')[-1][:12]}"
    if docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    dockerfile = textwrap.dedent(f"""\
        FROM {kit_image}
        RUN apt-get update \\
         && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {NODE_PACKAGES} \\
         && rm -rf /var/lib/apt/lists/*
        """)
    docker("build", "-q", "-t", tag, "-", input=dockerfile, timeout=900)
    # Node images of older kit images are of no further use: untag them (ours only, by repository name).
    for old in docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", NODE_REPOSITORY).stdout.split():
        if old != tag:
            docker("image", "rm", old, check=False)
    return tag


@dataclass
class SlurmCluster:
    """A running cluster: node containers (their names are their host names), network and shared folder."""

    name: str
    image: str
    shared: Path
    nodes: list[str] = field(default_factory=list)
    network: str = ""

    @property
    def controller(self) -> str:
        """The node running slurmctld (where sbatch, squeue, scontrol and scancel run)."""
        return self.nodes[0]

    @property
    def submit_prefix(self) -> str:
        """SLURM_SUBMIT_PREFIX for the kit: run the Slurm commands inside the controller."""
        return f"docker exec {self.controller}"

    def exec(self, node: str, command: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a bash command in a node."""
        return docker("exec", node, "bash", "-c", command, check=check)

    def diagnostics(self) -> str:
        """sinfo and the tails of the daemons' logs, for assertion messages."""
        parts = [self.exec(self.controller, "sinfo; tail -n 20 /var/log/slurm/slurmctld.log", check=False).stdout]
        for node in self.nodes:
            parts.append(
                f"--- {node} slurmd.log\n" + self.exec(node, "tail -n 20 /var/log/slurm/slurmd.log", check=False).stdout
            )
        return "\n".join(parts)

    def start(self, count: int, cpus: int) -> None:
        """Create the network and node containers, write slurm.conf, start munged, slurmctld and slurmd; wait for idle."""
        self.network = docker("network", "create", self.name).stdout.strip() and self.name
        self.nodes = [f"{self.name}-n{i}" for i in range(1, count + 1)]
        conf = self.shared / ".slurm" / "slurm.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(SLURM_CONF.format(controller=self.nodes[0], nodes=",".join(self.nodes), cpus=cpus))
        for node in self.nodes:
            docker(
                "run", "-d", "--name", node, "--hostname", node, "--network", self.name,
                "-v", f"{conf}:/etc/slurm/slurm.conf:ro", "-v", f"{self.shared}:{self.shared}",
                "--entrypoint", "sleep", self.image, "infinity",
            )  # fmt: skip
        for node in self.nodes:  # every node has the munge key of the image it was made from
            self.exec(node, START_DAEMONS)
        self.exec(self.controller, "slurmctld")
        for node in self.nodes:
            self.exec(node, "slurmd")
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            states = self.exec(self.controller, "sinfo -h -N -o '%N %t'", check=False).stdout.split("\n")
            idle = [line for line in states if line.strip().endswith(" idle")]
            if len(idle) == count:
                return
            time.sleep(1)
        raise RuntimeError(f"the Slurm nodes did not become idle within {START_TIMEOUT_S} s:\n{self.diagnostics()}")

    def stop(self) -> None:
        """Remove the node containers and the network (what this cluster created, by name)."""
        for node in self.nodes:
            docker("rm", "-f", node, check=False)
        if self.network:
            docker("network", "rm", self.network, check=False)


def start_cluster(kit_image: str, shared: Path, count: int = 2, cpus: int = 2) -> SlurmCluster:
    """Build (or reuse) the node image and start a cluster of `count` nodes sharing the folder `shared`."""
    cluster = SlurmCluster(name=f"nsyskit-slurm-{secrets.token_hex(3)}", image=node_image(kit_image), shared=shared)
    try:
        cluster.start(count, cpus)
    except BaseException:
        cluster.stop()
        raise
    return cluster
