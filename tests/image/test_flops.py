"""The example's FLOPs per step (workload/flops.py) against PyTorch's own count, and its mark through the image's
real nsys into the analysis's evidence."""

from __future__ import annotations

import sys
from pathlib import Path

from nsyskit.analysis.compute import peaks
from nsyskit.analysis.compute.evidence import pivot
from nsyskit.analysis.trace import analyze_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Container-Root" / "nsyskit" / "workload"))
import flops  # noqa: E402

# Forward and backward of GPT-2 configs under torch.utils.flop_counter.FlopCounterMode, which counts every matmul
# (2 m n k) the step runs: the formula's count, printed beside it.
COUNT = r"""
import sys
sys.path.insert(0, "/nsyskit/workload")
import torch, flops
from torch.utils.flop_counter import FlopCounterMode
from transformers import GPT2Config, GPT2LMHeadModel
for layers, heads, width, vocab, batch, seq in ((2, 2, 64, 1024, 4, 128), (3, 4, 128, 1000, 2, 256)):
    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, vocab_size=vocab, n_positions=seq,
                        bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    model = GPT2LMHeadModel(config)
    tokens = torch.randint(vocab, (batch, seq))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=tokens, labels=tokens).loss.backward()
    print(counter.get_total_flops(), flops.training_flops(layers, width, vocab, batch, seq))
"""


def test_the_formula_counts_the_flops_pytorch_counts(host):
    done = host.run(f"python3 - <<'EOF'\n{COUNT}\nEOF")
    assert done.rc == 0, done.stderr
    pairs = [line.split() for line in done.stdout.splitlines() if line.strip()]
    assert len(pairs) == 2 and all(torch_count == ours for torch_count, ours in pairs), done.stdout


def test_the_example_marks_its_flops_in_the_report_and_the_analysis_reads_them(host, tmp_path):
    profile = host.run(
        "mkdir -p /tmp/flops && cd /tmp/flops && nsys profile -t nvtx --sample=none --cpuctxsw=none -f true -o train "
        "python3 /nsyskit/workload/train.py --steps 4 --profile-steps 2-3 && "
        "nsys export --type sqlite -f true -o train.sqlite train.nsys-rep"
    )
    assert profile.rc == 0, profile.stdout + profile.stderr
    expected = flops.training_flops(2, 64, 1024, 4, 128)  # the example's defaults: 'tiny', --batch-size 4 --seq-len 128
    assert f"flops_per_step_per_gpu={expected} " in profile.stdout
    export = tmp_path / "train.sqlite"
    export.write_bytes(host.file("/tmp/flops/train.sqlite").content)
    facts = pivot(analyze_run([export]).evidence, "low_mfu")
    assert facts["flops_per_step"].tolist() == [float(expected)]
    assert [peaks.DTYPES[int(code)] for code in facts["dtype"]] == ["fp32"]  # a CPU run: no bf16 autocast
