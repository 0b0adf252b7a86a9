"""The example's training FLOPs of one step on one GPU, from its GPT-2 config (standard library, Python 3.8+).

FLOPs per step per GPU = T x (6 N + 12 L d S), with T = micro-batch x sequence length (tokens one rank trains on
per step), N = the parameters that take part in matrix multiplies (per layer the attention's QKV and output
projections, 4 d^2, and the MLP's two, 8 d^2; plus the LM head, vocab x d, tied to the token embedding), L layers,
d the hidden size, S the sequence length. 6 N per token: a multiply-add (2 FLOPs) per weight forward, twice that
backward (gradients of inputs and of weights). 12 L d S per token: the attention scores (Q K^T) and their weighted
sum of V, 2 S d FLOPs each forward per layer, times 3 for backward, counted over the whole S x S matrix (the
causal mask does not skip the work in the usual kernels). Biases, norms, softmax, GELU, the loss and the optimizer
are left out (a few percent at most). This is the count analyze's low_mfu rule divides by the step time.
"""

from __future__ import annotations

FORMULA = "tokens x (6 x matmul parameters + 12 x layers x hidden x seq_len)"


def matmul_parameters(n_layer: int, n_embd: int, vocab_size: int) -> int:
    """Weights that take part in the model's matrix multiplies: 12 d^2 per layer and the LM head (vocab x d)."""
    return n_layer * 12 * n_embd * n_embd + vocab_size * n_embd


def training_flops(n_layer: int, n_embd: int, vocab_size: int, batch_size: int, seq_len: int) -> int:
    """FLOPs of one training step (forward and backward) of one rank's micro-batch (see the module's formula)."""
    tokens = batch_size * seq_len
    per_token = 6 * matmul_parameters(n_layer, n_embd, vocab_size) + 12 * n_layer * n_embd * seq_len
    return tokens * per_token
