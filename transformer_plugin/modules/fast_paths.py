"""Speed tricks for CPUs, one entry point each. The paper's modules call these and never branch on devices.

- ``dropout(x, p, training, packed)``: Section 5.4's dropout. On a CPU with ``packed`` (the flag
  ``--dropout-masks packed``, the default) its masks cost a quarter of torch's random draws; on a
  GPU, and with ``--dropout-masks torch``, it is torch's ``F.dropout``.
- ``use_fused_attention(q, k, need_weights, training)``: whether Eq. (1) is computed by torch's
  fused ``F.scaled_dot_product_attention`` or explicitly (multihead_attention.py holds both). Always
  fused on a GPU; on a CPU explicit only for short attention in evaluation (generation), where it
  is faster.

Both compute the function the paper writes; tests/unit/optimisations/test_fast_paths.py holds them
to it, and what each trick was measured to save is in docs/2026-11-24-cpu-speed.md.

Packed dropout masks: each 64-bit random word from torch's generator gives four independent 16-bit
uniform numbers u in [0, 2^16), and an element is kept when u >= round(p * 2^16). The drop
probability is therefore p rounded to a multiple of 2^-16 (off by at most 2^-17; P_drop = 0.1
becomes 0.100006), and kept elements are scaled by 1 / (1 - that probability), so E[dropout(x)] = x
exactly, as with torch's dropout. The mask is kept as one byte per element for the backward pass
and applied as uint8 (``torch.mul`` by a uint8 mask is several times faster on a CPU than any of
torch's kernels for boolean masks). Both kinds of masks come from torch's default generator, so
fairseq's ``--seed`` makes either reproducible.
"""

import torch
import torch.nn.functional as F
from torch import Tensor

MASK_CHOICES = ("packed", "torch")  # --dropout-masks
EXPLICIT_MAX_SCORES = 64 * 64  # on a CPU without backward pass, T * S up to which Eq. (1) is explicit

_LEVELS = 1 << 16  # 16-bit uniform numbers


# -- dropout ------------------------------------------------------------------------------------


def drop_threshold(p: float) -> int:
    """The 16-bit threshold for drop probability p: an element is dropped when u < threshold."""
    return round(p * _LEVELS)


def packed_dropout_mask(shape, p: float, device=None) -> Tensor:
    """Boolean keep-mask of ``shape``: True with probability 1 - round(p * 2^16) / 2^16."""
    numel = 1
    for size in shape:
        numel *= size
    words = torch.empty((numel + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)
    u = words.view(torch.int16)[:numel].view(shape)  # uniform in [-2^15, 2^15)
    return u >= drop_threshold(p) - _LEVELS // 2


class _ScaleByMask(torch.autograd.Function):
    """scale * keep * x for a 0/1 uint8 mask ``keep``: one pass forward, one backward."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.addcmul(x.new_zeros(()), x, keep, value=scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return torch.addcmul(grad.new_zeros(()), grad, keep, value=ctx.scale), None, None


def dropout(x: Tensor, p: float, training: bool, packed: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability p and scale the others by 1 / (1 - p)."""
    if not training or p == 0.0:
        return x
    if not packed or x.device.type != "cpu":
        return F.dropout(x, p=p, training=True)
    threshold = drop_threshold(p)
    if threshold == 0:  # p < 2^-17 rounds to "never drop"
        return x
    keep = packed_dropout_mask(x.shape, p, x.device).view(torch.uint8)
    return _ScaleByMask.apply(x, keep, _LEVELS / (_LEVELS - threshold))


# -- choice of attention kernel -------------------------------------------------------------------


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
