"""The choice of attention kernel, by speed; the paper's modules call it and never branch on devices.

``use_fused_attention(q, k, need_weights, training)``: whether Eq. (1) is computed by torch's fused
``F.scaled_dot_product_attention`` or explicitly (multihead_attention.py holds both). Always fused
on a GPU; on a CPU explicit only for short attention in evaluation (generation), where it is faster.
Both compute the function the paper writes; tests/unit/modules/test_fast_paths.py holds them
to it, and what the choice was measured to save is in docs/2026-11-24-cpu-speed.md. (The other CPU
speed trick, packed dropout masks, changes P_drop slightly and is a flag in dropout.py.)
"""

from torch import Tensor

EXPLICIT_MAX_SCORES = 64 * 64  # on a CPU without backward pass, T * S up to which Eq. (1) is explicit


def use_fused_attention(q: Tensor, k: Tensor, need_weights: bool, training: bool) -> bool:
    """Whether Eq. (1) on q (B, h, T, d_k), k (B, h, S, d_k) is computed by torch's fused kernel.

    Not when the attention weights are wanted (only the explicit path returns them). On a GPU,
    always. On a CPU, in training (a backward pass follows, and the fused kernel's backward is the
    faster one) or when a head has more than ``EXPLICIT_MAX_SCORES`` query-key pairs; short
    attention in evaluation (validation, the encoder and each step of generation) is faster with two
    matrix products. The choice follows the module's mode, not autograd's: with
    --checkpoint-activations a layer's forward pass runs without autograd and is recomputed with it,
    and both must take the same path, which draws the same attention dropout masks.
    """
    if need_weights:
        return False
    if q.device.type != "cpu":
        return True
    return training or q.size(-2) * k.size(-2) > EXPLICIT_MAX_SCORES
