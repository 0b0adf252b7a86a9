"""The example's DDP communication hook, recorded by the image's real nsys: one range per bucket in its backend's
domain (gloo here: not labelled NCCL), sized, and read by the analysis as gloo's AllReduce."""

from __future__ import annotations

from nsyskit.analysis import run_analysis
from nsyskit.analysis.read.reader import ExportReader

# One process of DDP on gloo (CPU): two layers, buckets small enough that each layer gets its own bucket.
SCRIPT = r"""
import sys
sys.path.insert(0, "/nsyskit/workload")
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
import commhook
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 16))
ddp = DistributedDataParallel(model)
commhook.register(ddp)
for _ in range(3):
    ddp(torch.randn(8, 256)).sum().backward()
dist.destroy_process_group()
"""
PARAM_BYTES = (256 * 256 + 256 + 256 * 16 + 16) * 4  # float32 gradients of both layers: DDP's first bucket holds all


def test_each_bucket_allreduce_is_an_nvtx_range_of_its_backend_with_its_bytes(host, tmp_path):
    assert host.run(f"mkdir -p /tmp/hook && cat > /tmp/hook/script.py <<'EOF'\n{SCRIPT}\nEOF").rc == 0
    profile = host.run(
        "cd /tmp/hook && nsys profile -t nvtx --sample=none --cpuctxsw=none -f true -o hook python3 script.py "
        "&& nsys export --type sqlite -f true -o hook.sqlite hook.nsys-rep"
    )
    assert profile.rc == 0, profile.stdout + profile.stderr
    export = tmp_path / "hook.sqlite"
    export.write_bytes(host.file("/tmp/hook/hook.sqlite").content)
    reader = ExportReader(export)
    ranges = reader.nvtx_ranges()
    hooked = [i for i in range(len(ranges)) if ranges.text[i].startswith("glooAllReduce (DDP bucket")]
    assert len(hooked) == 3  # one bucket, three steps
    assert {ranges.domain[i] for i in hooked} == {"gloo"}
    assert {int(ranges.payload[i]) for i in hooked} == {PARAM_BYTES}
    assert all(ranges.end[i] > ranges.start[i] for i in hooked)  # closed when the allreduce completed
    sizes = run_analysis([export], write=False)[0].nccl_sizes
    assert [(r["op"], r["origin"], r["count"]) for r in sizes.rows()] == [("AllReduce", "gloo-nvtx", 3)]
