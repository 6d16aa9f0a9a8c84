"""Dropout (Section 5.4: on every sub-layer output and on the embedding sums), with cheaper masks on CPU.

On a CPU, torch's dropout draws one Bernoulli sample per element from its Mersenne twister, which
makes dropout the largest cost of a training step after the matrix products (13% of a step of the
speed benchmark's model). With ``packed=True`` (``--dropout-masks packed``, the default) a mask
costs a quarter of the draws: each 64-bit random word gives four independent 16-bit uniform
numbers u in [0, 2^16), and an element is kept when u >= round(p * 2^16). The drop probability is
therefore p rounded to a multiple of 2^-16 (off by at most 2^-17; P_drop = 0.1 becomes 0.100006),
and kept elements are scaled by 1 / (1 - that probability), so E[dropout(x)] = x exactly, as with
torch's dropout. Only the mask, one byte per element, is kept for the backward pass, as torch
keeps it.

The mask is applied, scaled, and (for the residual connections of Section 5.4) added to the
residual in one pass, ``torch.addcmul(residual, x, mask, value=scale)``, with the mask read as
uint8: torch's kernels for boolean masks (``where``, ``masked_fill``, multiplication) are about
three times slower on a CPU. The backward pass is one pass too. Forward and backward give bitwise
the same numbers as ``residual + where(mask, x, 0) * scale``, in 0.63 instead of 2.30 ms forward
and 0.54 instead of 1.97 ms backward for 4000 x 256 elements (2 cores).

On a GPU (fused there), and with ``--dropout-masks torch``, this is torch's ``F.dropout``. Dropout
on the attention weights (``--attention-dropout``, 0 by default) during training is drawn inside
torch's fused attention kernel (see multihead_attention.py), with the exact rate. Both draw from
torch's default generator, so fairseq's ``--seed`` makes either reproducible.
"""

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

MASK_CHOICES = ("packed", "torch")
_LEVELS = 1 << 16  # 16-bit uniform numbers


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


class _MaskScaleAdd(torch.autograd.Function):
    """residual + scale * keep * x for a 0/1 uint8 mask ``keep``, forward and backward in one pass each."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float, residual: Tensor) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.addcmul(residual, x, keep, value=scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        grad_x = torch.addcmul(grad.new_zeros(()), grad, keep, value=ctx.scale) if ctx.needs_input_grad[0] else None
        return grad_x, None, None, grad if ctx.needs_input_grad[3] else None


def dropout(x: Tensor, p: float, training: bool, packed: bool = True, residual: Optional[Tensor] = None) -> Tensor:
    """Zero each element of ``x`` with probability p and scale the others by 1 / (1 - p).

    With ``residual`` (same shape as ``x``): ``residual + dropout(x)``, computed in one pass.
    """
    threshold = drop_threshold(p) if training and packed and x.device.type == "cpu" else None
    if not training or p == 0.0 or threshold == 0:  # p < 2^-17 rounds to "never drop"
        return x if residual is None else residual + x
    if threshold is None:
        out = F.dropout(x, p=p, training=True)
        return out if residual is None else residual + out
    keep = packed_dropout_mask(x.shape, p, x.device).view(torch.uint8)
    if residual is None:
        residual = x.new_zeros(())
    return _MaskScaleAdd.apply(x, keep, _LEVELS / (_LEVELS - threshold), residual)


class Dropout(nn.Module):
    """``dropout`` as a module (so that ``model.eval()`` turns it off)."""

    def __init__(self, p: float, packed: bool = True):
        super().__init__()
        self.p, self.packed = p, packed

    def forward(self, x: Tensor, residual: Optional[Tensor] = None) -> Tensor:
        """dropout(x), or residual + dropout(x) in one pass."""
        return dropout(x, self.p, self.training, self.packed, residual)

    def extra_repr(self) -> str:
        return f"p={self.p}, masks={'packed' if self.packed else 'torch'}"
