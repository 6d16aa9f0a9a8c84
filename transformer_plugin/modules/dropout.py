"""Dropout (Section 5.4: on every sub-layer output and on the embedding sums), with cheaper masks on CPU.

On a CPU, torch's dropout draws one Bernoulli sample per element from its Mersenne twister, which
makes dropout the largest cost of a training step after the matrix products (13% of a step of the
speed benchmark's model). With ``packed=True`` (``--dropout-masks packed``, the default) a mask
costs a quarter of the draws: each 64-bit random word gives four independent 16-bit uniform
numbers u in [0, 2^16), and an element is kept when u >= round(p * 2^16). The drop probability is
therefore p rounded to a multiple of 2^-16 (off by at most 2^-17; P_drop = 0.1 becomes 0.100006),
and kept elements are scaled by 1 / (1 - that probability), so E[dropout(x)] = x exactly, as with
torch's dropout. Only the boolean mask is kept for the backward pass, as torch keeps it.

On a GPU (fused there), and with ``--dropout-masks torch``, this is torch's ``F.dropout``. Both draw from
torch's default generator, so fairseq's ``--seed`` makes either reproducible.
"""

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


def dropout(x: Tensor, p: float, training: bool, packed: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability p and scale the others by 1 / (1 - p)."""
    if not training or p == 0.0:
        return x
    if not packed or x.device.type != "cpu":
        return F.dropout(x, p=p, training=True)
    threshold = drop_threshold(p)
    if threshold == 0:  # p < 2^-17 rounds to "never drop"
        return x
    keep = packed_dropout_mask(x.shape, p, x.device)
    return torch.where(keep, x, 0.0).mul_(_LEVELS / (_LEVELS - threshold))


class Dropout(nn.Module):
    """``dropout`` as a module (so that ``model.eval()`` turns it off)."""

    def __init__(self, p: float, packed: bool = True):
        super().__init__()
        self.p, self.packed = p, packed

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self.packed)

    def extra_repr(self) -> str:
        return f"p={self.p}, masks={'packed' if self.packed else 'torch'}"
