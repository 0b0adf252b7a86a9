"""What the non-collective INFO lines tell: NCCL version, network and plugin, communicators, channels, rings,
trees, algorithms and protocols (INIT, NET, GRAPH, TUNING, ENV subsystems)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from nsyskit.nccllog.scan.dtypes import algorithm_name, protocol_name

VERSION = re.compile(r"^NCCL version (\S+)")
CUDA_OF_VERSION = re.compile(r"\+cuda(\d+(?:\.\d+)*)")
# 'Using network IB' (2.5+), 'Using internal Network IB' (older)
USING_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (.+?)\s*$")
OFI_PLUGIN = re.compile(r"^NET/OFI Initializing (aws-ofi-nccl \S+)")
OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (\w[\w-]*)")
# 'NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)'; errors ('No plugin found', 'Could not find: ...',
# 'Plugin load returned 2 : ...') are no value: they say that no plugin is loaded.
LOADED_PLUGIN = re.compile(r"^NET/Plugin\s*:\s*Loaded net plugin (.+?)(?: \(v\d+\))?\s*$")
NO_PLUGIN = re.compile(
    r"^NET/Plugin\s*:.*(?:[Nn]o plugin found|[Cc]ould not find|[Ff]ailed|load returned|[Cc]annot open)"
)
NET_TRANSPORT = re.compile(r"^NET/(\w+)")
NO_DEVICE = re.compile(r"^NET/(\w+)\s*:\s*No device found")
# 'comm 0x.. rank 6 nRanks 16 nNodes 2 localRanks 8 localRank 6 MNNVL 0' (NCCL 2.19+)
COMM_TOPOLOGY = re.compile(r"\bnRanks (\d+) nNodes (\d+) localRanks (\d+)")
# 'comm 0x.. rank 0 nranks 2 cudaDev 1 nvmlDev 1' (2.4), 'ncclCommInitRankConfig comm 0x.. rank 0 nranks 2 cudaDev
# 0 .. - Init START', 'comm 0x.. rank 36 nranks 64 cudaDev 4 .. - Init COMPLETE': which GPU drives a communicator.
COMM_RANK = re.compile(r"\bcomm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) cudaDev (\d+)")
BARE_NRANKS = re.compile(r"^nranks (\d+)\s*$")  # 2.4: 'nranks 2'
# '16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels, 1 p2p channels per peer'
CHANNEL_COUNTS = re.compile(
    r"^(\d+) coll channels,(?: (\d+) collnet channels,)?(?: (\d+) nvls channels,)? (\d+) p2p channels,"
)
# Ring orders: 'Channel 00/08 :    0   5   4   7', older 'Channel 00 :    0   1   3' and 'Ring 00 : 1 -> 2 -> 3';
# connection lines carry '[dev]' and 'via'.
RING_ORDER = re.compile(r"^(?:Channel|Ring) (\d+)(?:/(\d+))? :(?:(?:\s+\d+)+|\s*\d+(?: -> \d+)+)\s*$")
CONNECTION = re.compile(r"^(?:Channel|Ring) \d+(?:/\d+)? : .*?-> .*? via (.+?)\s*$")
TREES = re.compile(r"^Trees((?: \[\d+\] \S+)+)")
ENV_SETTING = re.compile(r"^(NCCL_\w+) set by environment to (.+?)\.?\s*$")
# TUNING: 'AllReduce: 4194304 Bytes -> Algo Tree proto Simple channel{Lo..Hi}={0..0}' (2.19+), older
# '262144 Bytes -> Algo 0 proto 1 time 54.707825' (numbers, no op name).
TUNING = re.compile(r"^(?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)")
MAX_COMMS = 1 << 16  # communicators remembered (host, pid, comm) -> (rank, cudaDev)
MAX_SOURCES = 1 << 15  # (host, pid) and (host, pid, dev) remembered: hosts and GPUs of jobs of thousands of ranks


def transport_of(via: str) -> str:
    """The transport of a connection's 'via' text: 'NET/<network>' for network ones, else its first part
    ('P2P/IPC/read' -> 'P2P', 'SHM/direct/direct' -> 'SHM', 'NET/AWS Libfabric/0' -> 'NET/AWS Libfabric')."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]


MAX_DISTINCT = 32  # bound on each set of distinct facts: constant memory whatever the log


def _bounded_add(counter: Counter, key: object, n: int = 1) -> None:
    if key in counter or len(counter) < MAX_DISTINCT:
        counter[key] += n


@dataclass
class Facts:
    """Accumulated init/net/graph/tuning facts; every collection is bounded."""

    versions: Counter = field(default_factory=Counter)
    networks: Counter = field(default_factory=Counter)
    networks_via: Counter = field(default_factory=Counter)  # named only in 'via NET/<name>/..' connection lines
    plugins: Counter = field(default_factory=Counter)
    no_plugin: int = 0
    ofi_versions: Counter = field(default_factory=Counter)
    providers: Counter = field(default_factory=Counter)
    net_transports: Counter = field(default_factory=Counter)
    net_using: set = field(default_factory=set)
    net_no_device: set = field(default_factory=set)
    nranks: Counter = field(default_factory=Counter)
    nnodes: Counter = field(default_factory=Counter)
    local_ranks: Counter = field(default_factory=Counter)
    init_complete: int = 0
    coll_channels: Counter = field(default_factory=Counter)
    nvls_channels: Counter = field(default_factory=Counter)
    collnet_channels: Counter = field(default_factory=Counter)
    p2p_channels: Counter = field(default_factory=Counter)
    ring_channels: int = 0
    ring_channel_ids: set = field(default_factory=set)
    trees: Counter = field(default_factory=Counter)
    connections: Counter = field(default_factory=Counter)  # transport -> connection lines
    connected: Counter = field(default_factory=Counter)
    env: dict = field(default_factory=dict)
    tuning: Counter = field(default_factory=Counter)  # (op, algo, proto) -> calls
    tuning_bytes: Counter = field(default_factory=Counter)  # (op, algo, proto) -> bytes
    hosts: set = field(default_factory=set)
    gpus: set = field(default_factory=set)
    comms: dict = field(default_factory=dict)  # (host, pid, comm) -> (rank, cudaDev)

    def add(self, message: str, n: int = 1, per_call: bool = True, origin: tuple[str, str] | None = None) -> bool:
        """Record an INFO message seen n times; False when it carries no fact we keep. per_call=False: the line
        lies outside the window, so per-call lines (TUNING) are not counted. origin: the (host, pid) that logged
        it, which names the communicators of comm-init lines."""
        if " Bytes -> Algo " in message:
            return self._add_tuning(message, n) if per_call else True
        first = message[:1]
        if first.isdigit():
            return self._add_numeric(message, n)
        if message.startswith("NCCL version"):
            m = VERSION.match(message)
            if m:
                _bounded_add(self.versions, m.group(1), n)
                return True
        if message.startswith("Using "):
            m = USING_NETWORK.match(message)
            if m:
                _bounded_add(self.networks, m.group(1), n)
                return True
        if message.startswith("NET/"):
            return self._add_net(message, n)
        if message.startswith(("Channel ", "Ring ")):
            return self._add_channel(message, n)
        if message.startswith("Trees"):
            m = TREES.match(message)
            if m:
                _bounded_add(self.trees, m.group(1).count("["), n)
                return True
        if message.startswith("Connected"):
            # 'Connected all rings, use ring PXN 0 GDR 1' -> 'all rings'; 'Connected to proxy localRank 1 ->
            # connection 0x..' (one per connection) -> 'to proxy', counted
            phrase = message[10:].split(",")[0].split(" localRank")[0].split(" ->")[0].strip()
            _bounded_add(self.connected, phrase, n)
            return True
        if message.startswith("NCCL_"):
            m = ENV_SETTING.match(message)
            if m and (m.group(1) in self.env or len(self.env) < MAX_DISTINCT):
                self.env.setdefault(m.group(1), m.group(2))
                return True
        if "nRanks" in message:
            m = COMM_TOPOLOGY.search(message)
            if m:
                _bounded_add(self.nranks, int(m.group(1)), n)
                _bounded_add(self.nnodes, int(m.group(2)), n)
                _bounded_add(self.local_ranks, int(m.group(3)), n)
                return True
        if "nranks" in message:
            return self._add_comm(message, n, origin)
        return False

    def _add_comm(self, message: str, n: int, origin: tuple[str, str] | None) -> bool:
        m = COMM_RANK.search(message) or BARE_NRANKS.match(message)
        if not m:
            return False
        if m.re is COMM_RANK:
            comm, rank, nranks, cuda_dev = m.groups()
            if origin is not None and len(self.comms) < MAX_COMMS:
                self.comms[(*origin, comm)] = (int(rank), int(cuda_dev))
        else:
            nranks = m.group(1)
        _bounded_add(self.nranks, int(nranks), n)
        if message.endswith("Init COMPLETE"):
            self.init_complete += n
        return True

    def _add_numeric(self, message: str, n: int) -> bool:
        m = CHANNEL_COUNTS.match(message)
        if m:
            coll, collnet, nvls, p2p = m.groups()
            _bounded_add(self.coll_channels, int(coll), n)
            if collnet is not None:
                _bounded_add(self.collnet_channels, int(collnet), n)
            if nvls is not None:
                _bounded_add(self.nvls_channels, int(nvls), n)
            _bounded_add(self.p2p_channels, int(p2p), n)
            return True
        return False

    def _add_net(self, message: str, n: int) -> bool:
        m = NET_TRANSPORT.match(message)
        if m and m.group(1) != "Plugin":  # 'NET/Plugin' is the plugin loader, no transport
            if NO_DEVICE.match(message):
                self.net_no_device.add(m.group(1))
                return True
            _bounded_add(self.net_transports, m.group(1), n)
            if " Using " in message or message.startswith(f"NET/{m.group(1)} : Using"):
                self.net_using.add(m.group(1))
        m = OFI_PLUGIN.match(message)
        if m:
            _bounded_add(self.ofi_versions, m.group(1), n)
            return True
        m = OFI_PROVIDER.match(message)
        if m:
            _bounded_add(self.providers, m.group(1), n)
            return True
        m = LOADED_PLUGIN.match(message)
        if m:
            _bounded_add(self.plugins, m.group(1), n)
            return True
        if NO_PLUGIN.match(message):
            self.no_plugin += n
        return True

    def _add_channel(self, message: str, n: int) -> bool:
        m = RING_ORDER.match(message)
        if m:
            if m.group(2) is not None:
                self.ring_channels = max(self.ring_channels, int(m.group(2)))
            if len(self.ring_channel_ids) < 1024:
                self.ring_channel_ids.add(int(m.group(1)))
            return True
        m = CONNECTION.match(message)
        if m:
            transport = transport_of(m.group(1))
            _bounded_add(self.connections, transport, n)
            if transport.startswith("NET/"):
                _bounded_add(self.networks_via, transport[4:], n)
            return True
        return False

    def merge(self, other: Facts) -> None:
        """Add the facts of another scan (another file read by another process)."""
        for name, mine in vars(self).items():
            theirs = getattr(other, name)
            if name in ("tuning", "tuning_bytes"):
                mine.update(theirs)
            elif isinstance(mine, Counter):
                for key, n in theirs.items():
                    _bounded_add(mine, key, n)
            elif isinstance(mine, set):
                mine.update(list(theirs)[: max(0, MAX_SOURCES - len(mine))])
            elif isinstance(mine, dict):
                for key, value in theirs.items():
                    if key in mine or len(mine) < (MAX_COMMS if name == "comms" else MAX_DISTINCT):
                        mine.setdefault(key, value)
        self.no_plugin += other.no_plugin
        self.init_complete += other.init_complete
        self.ring_channels = max(self.ring_channels, other.ring_channels)

    def _add_tuning(self, message: str, n: int) -> bool:
        m = TUNING.match(message)
        if not m:
            return False
        op, nbytes, algo, proto = m.groups()
        key = (op or "?", algorithm_name(algo), protocol_name(proto))
        if key in self.tuning or len(self.tuning) < 4 * MAX_DISTINCT:
            self.tuning[key] += n
            self.tuning_bytes[key] += n * int(nbytes)
        return True

    def rings(self) -> int:
        """Rings (channels) NCCL printed the order of: the NN/TT total when printed, else distinct channel ids."""
        return self.ring_channels or len(self.ring_channel_ids)

    def summary(self) -> dict:
        """The facts as plain values (most common first where several were logged); None where not logged."""

        def values(counter: Counter) -> list:
            return [key for key, _ in counter.most_common()]

        def top(counter: Counter):
            return counter.most_common(1)[0][0] if counter else None

        version = top(self.versions)
        cuda = CUDA_OF_VERSION.search(version) if version else None
        hosts_seen = len(self.hosts)
        return {
            "nccl_version": version,
            "nccl_versions": values(self.versions),
            "cuda_version": cuda.group(1) if cuda else None,
            "network": top(self.networks) or top(self.networks_via),
            "networks": values(self.networks) or values(self.networks_via),
            "net_plugin": top(self.ofi_versions) or top(self.plugins) or ("none" if self.no_plugin else None),
            "net_plugins": values(self.ofi_versions) + values(self.plugins),
            "ofi_provider": top(self.providers),
            "net_transports": [
                t for t in values(self.net_transports) if t not in self.net_no_device or t in self.net_using
            ],
            "nranks": max(self.nranks) if self.nranks else None,
            "communicator_sizes": sorted(self.nranks),
            "nnodes": max(self.nnodes) if self.nnodes else None,
            "nnodes_from_hostnames": hosts_seen or None,
            "local_ranks": max(self.local_ranks) if self.local_ranks else None,
            "gpus_seen": len(self.gpus),
            "init_complete": self.init_complete or None,
            "coll_channels": max(self.coll_channels) if self.coll_channels else None,
            "nvls_channels": max(self.nvls_channels) if self.nvls_channels else None,
            "collnet_channels": max(self.collnet_channels) if self.collnet_channels else None,
            "p2p_channels": max(self.p2p_channels) if self.p2p_channels else None,
            "rings": self.rings() or None,
            "trees": max(self.trees) if self.trees else None,
            "connections": dict(self.connections.most_common()),
            "connected": dict(self.connected.most_common()),
            "env": dict(sorted(self.env.items())),
            "algorithms": sorted({algo for _, algo, _ in self.tuning}),
            "protocols": sorted({proto for _, _, proto in self.tuning}),
        }

    def tuning_rows(self) -> list[dict]:
        """Algorithm/protocol choices from TUNING lines: op, algorithm, protocol, calls, total bytes."""
        rows = [
            {
                "op": op,
                "algorithm": algo,
                "protocol": proto,
                "calls": calls,
                "total_bytes": self.tuning_bytes[(op, algo, proto)],
            }
            for (op, algo, proto), calls in self.tuning.items()
        ]
        return sorted(rows, key=lambda r: (-r["calls"], r["op"], r["algorithm"], r["protocol"]))
