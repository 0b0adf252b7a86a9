#!/usr/bin/env python3
"""The profiled example: a GPT-2 family causal LM (random weights, synthetic tokens) trained with DDP.

Runs under torchrun, mpirun or srun (see rankinfo.py); NCCL on GPUs, gloo on CPU, bf16 autocast where the
GPU supports it. Marks every step ("step N") and phase (data/forward/backward/optimizer) with NVTX, and
the profiling window (--profile-steps A-B) with an NVTX "profile_window" range plus, on GPU,
cudaProfilerStart/Stop for nsys --capture-range=cudaProfilerApi. With --torch-profile, torch.profiler
records the same window into one Kineto (Chrome) trace per rank at $NSYSKIT_TORCH_TRACE (set by the wrapper).
Prints per-step time and tokens/s and, at the end, a checksum of the parameters on every rank (equal
checksums: the ranks stayed in sync).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import statistics
import sys
import time

import commhook
import flops
import markers
import rankinfo

# The run record's line formats live one folder up (/nsyskit/runrecord.py, shared with the host that parses them).
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import runrecord  # noqa: E402

# name -> GPT2Config overrides; 'tiny' keeps a CPU step in the tens of milliseconds.
GLOO_SETTLE_S = 0.5  # see the end of main()
MODEL_SIZES = {
    "tiny": {"n_layer": 2, "n_head": 2, "n_embd": 64, "vocab_size": 1024},
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257},
    "gpt2-medium": {"n_layer": 24, "n_head": 16, "n_embd": 1024, "vocab_size": 50257},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The example's command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-size", choices=sorted(MODEL_SIZES), default="tiny")
    parser.add_argument("--batch-size", type=int, default=4, help="micro-batch per rank")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profile-steps", default="", help="FIRST-LAST steps (1-based) of the profiling window")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--cpu", action="store_true", help="stay on CPU even when GPUs are visible")
    parser.add_argument("--torch-profile", action="store_true",
                        help="record --profile-steps (else every step) with torch.profiler into $NSYSKIT_TORCH_TRACE "
                             "(empty: this rank is not profiled; unset: torch_rank<R>.pt.trace.json.gz here)")
    parser.add_argument("--no-record-shapes", dest="record_shapes", action="store_false",
                        help="torch profiler: do not record operator input shapes")
    parser.add_argument("--with-stack", action="store_true", help="torch profiler: record Python stacks (costly)")
    parser.add_argument("--dist-timeout-s", type=int, default=int(os.environ.get("NSYSKIT_DIST_TIMEOUT_S", "300")))
    args = parser.parse_args(argv)
    args.window = parse_window(args.profile_steps, args.steps)
    return args


def parse_window(text: str, steps: int) -> tuple[int | None, int | None]:
    """'A-B' -> (A, B) within 1..steps; '' -> (None, None)."""
    if not text:
        return None, None
    first, _, last = text.partition("-")
    window = int(first), int(last or first)
    if not 1 <= window[0] <= window[1] <= steps:
        sys.exit(f"--profile-steps {text}: needs 1 <= FIRST <= LAST <= --steps ({steps})")
    return window


def torch_profiler(args: argparse.Namespace, info: rankinfo.RankInfo, use_cuda: bool):
    """A started torch.profiler over the window (or every step) writing one Chrome trace, or None when off."""
    path = os.environ.get("NSYSKIT_TORCH_TRACE", f"torch_rank{info.rank}.pt.trace.json.gz")
    if not args.torch_profile or not path:
        return None
    import torch.profiler as tp

    first, last = args.window if args.window[0] else (1, args.steps)
    warmup = 1 if first > 1 else 0  # one step of warm-up when there is one before the window
    activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if use_cuda else [])

    def write(profiler) -> None:
        profiler.export_chrome_trace(path)  # a .gz name is written compressed
        log(info, f"torch profiler trace: {path}")

    profiler = tp.profile(
        activities=activities,
        schedule=tp.schedule(wait=first - 1 - warmup, warmup=warmup, active=last - first + 1, repeat=1),
        on_trace_ready=write,
        record_shapes=args.record_shapes,
        with_stack=args.with_stack,
    )
    profiler.start()
    return profiler


def emit(text: str) -> None:
    """One line on stdout, flushed at once so launchers and the progress display see it."""
    sys.stdout.write(text + "\n")  # one write per line: ranks share the launcher's stdout
    sys.stdout.flush()


def log(info: rankinfo.RankInfo, message: str) -> None:
    """One line of this rank's output (runrecord.line: '[rank N] MESSAGE')."""
    emit(runrecord.line(info.rank, message))


def parameter_checksum(model) -> tuple[str, float]:
    """sha256 (16 hex digits) over every parameter's bytes in name order, and the float sum of all parameters."""
    import torch

    digest, total = hashlib.sha256(), 0.0
    for name, param in sorted(model.named_parameters()):
        data = param.detach().to("cpu", torch.float32).contiguous()
        digest.update(name.encode())
        digest.update(data.numpy().tobytes())
        total += float(data.double().sum())
    return digest.hexdigest()[:16], total


def main(argv: list[str] | None = None) -> int:
    """Train for --steps steps and print timings and the parameter checksum."""
    args = parse_args(argv)
    info = rankinfo.detect()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformers import GPT2Config, GPT2LMHeadModel

    use_cuda = torch.cuda.is_available() and not args.cpu
    if use_cuda:
        torch.cuda.set_device(info.local_rank % torch.cuda.device_count())
        device, backend = torch.device("cuda", torch.cuda.current_device()), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
        if "OMP_NUM_THREADS" not in os.environ:  # share the cores between the ranks of this node
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // info.local_world_size))
    autocast_bf16 = use_cuda and torch.cuda.is_bf16_supported()

    log(info, f"world_size={info.world_size} local_rank={info.local_rank} node={info.node} host={rankinfo.short_hostname()} "
              f"launcher={info.launcher} backend={backend} device={device} bf16={autocast_bf16} master={info.master_addr}:{info.master_port}")  # fmt: skip
    dist.init_process_group(
        backend,
        init_method=f"tcp://{info.master_addr}:{info.master_port}",
        rank=info.rank,
        world_size=info.world_size,
        timeout=datetime.timedelta(seconds=args.dist_timeout_s),
    )

    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    size = MODEL_SIZES[args.model_size]
    special = size["vocab_size"] - 1  # GPT-2's end-of-text id, within the vocabulary of every size
    config = GPT2Config(n_positions=max(args.seq_len, 128), bos_token_id=special, eos_token_id=special, **size)
    model = GPT2LMHeadModel(config).to(device)
    model.loss_type = "ForCausalLM"  # name the loss explicitly (recent transformers warn when it is left unset)
    model.train()
    ddp = DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None)
    commhook.register(ddp)  # each bucket's allreduce as an NVTX range of its backend with its size (CPU runs too)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=args.lr)
    tokens = torch.Generator().manual_seed(args.seed * 1000 + info.rank)  # each rank its own synthetic shard
    # The model FLOPs of one step on one GPU (flops.py states the formula), marked in the report for analyze's MFU
    step_flops = flops.training_flops(config.n_layer, config.n_embd, config.vocab_size, args.batch_size, args.seq_len)
    flops_mark = runrecord.flops_mark(step_flops, "bf16" if autocast_bf16 else "fp32")
    if info.rank == 0:
        count = sum(p.numel() for p in model.parameters())
        log(
            info,
            f"model={args.model_size} parameters={count} batch={args.batch_size} seq_len={args.seq_len} steps={args.steps}",
        )
        log(info, f"flops_per_step_per_gpu={step_flops} ({flops.FORMULA})")

    window = markers.ProfileWindow(*args.window, use_cuda=use_cuda)
    profiler = torch_profiler(args, info, use_cuda)
    tokens_per_step = args.batch_size * args.seq_len * info.world_size
    step_times, cpu_times = [], []
    for step in range(1, args.steps + 1):
        window.before_step(step)
        if step == (args.window[0] or 1):  # inside the capture range: the first step nsys records
            markers.mark(flops_mark)
        started, cpu_started = time.perf_counter(), time.process_time()
        markers.push(markers.STEP_FORMAT.format(step))
        with markers.nvtx_range("data"):
            batch = torch.randint(config.vocab_size, (args.batch_size, args.seq_len), generator=tokens)
            batch = batch.to(device, non_blocking=True)
        with markers.nvtx_range("forward"), torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast_bf16):
            loss = ddp(input_ids=batch, labels=batch).loss
        with markers.nvtx_range("backward"):
            loss.backward()
        with markers.nvtx_range("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()  # waits for the GPU, so the step time below is the real one
        markers.pop()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        window.after_step(step)
        if profiler is not None:
            profiler.step()  # the schedule counts steps; it writes the trace when the window ends
        step_times.append(elapsed)
        cpu_times.append(cpu)  # this process's CPU time: unlike wall time, barely moved by other load on the machine
        if info.rank == 0:
            emit(runrecord.step_line(info.rank, step, args.steps, loss_value, elapsed, tokens_per_step / elapsed, cpu))

    if profiler is not None:
        profiler.stop()
    checksum, total = parameter_checksum(model)
    emit(runrecord.checksum_line(info.rank, checksum, total))
    steady = step_times[1:] or step_times  # the first step pays for warm-up
    median = statistics.median(steady)
    median_cpu = statistics.median(cpu_times[1:] or cpu_times)
    if info.rank == 0:
        log(info, f"summary world_size={info.world_size} steps={args.steps} median_step_ms={median * 1e3:.2f} "
                  f"tokens_per_s={tokens_per_step / median:.0f} median_cpu_ms={median_cpu * 1e3:.2f}")  # fmt: skip
    dist.barrier()
    # gloo's worker thread drops the Python objects a finished collective held (which takes the GIL) just after
    # the collective completes. Destroying the group then deadlocks: its destructor joins that thread while this
    # one holds the GIL (seen as a rank hanging at exit under nsys). Sleeping hands the GIL over for that moment.
    time.sleep(GLOO_SETTLE_S)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
