"""A plain PyTorch DDP training loop as users write it: gloo on CPU, gradient accumulation, no NVTX, nothing of any
profiler. Started by torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""

import argparse
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
parser.add_argument("--fail-rank", type=int, default=-1, help="this rank exits with code 5 after step 2")
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
step = 0
while step < args.steps:
    for micro in range(args.accum):
        inputs = torch.randn(32, 64)
        with model.no_sync() if micro < args.accum - 1 else torch.enable_grad():
            loss = model(inputs).pow(2).mean() / args.accum
            loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    step += 1
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if rank == args.fail_rank and step == 2:
        sys.exit(5)
dist.destroy_process_group()
print(f"rank {rank} done after {step} steps", flush=True)
