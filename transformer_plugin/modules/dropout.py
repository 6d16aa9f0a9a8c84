"""Section 5.4: dropout on the output of every sub-layer and on the sums of embeddings and positional encodings.

``Dropout`` is the module the paper's layers hold (so that ``model.eval()`` turns it off). Its masks
are drawn by ``dropout()``, one of two ways (``--dropout-masks``):

- ``packed`` (the default; a deviation from the paper's exact P_drop, for speed on a CPU): packed
  16-bit masks, which cost a quarter of torch's random draws, with P_drop rounded to a multiple of
  2^-16 (0.1 becomes 0.100006). On a GPU torch's dropout is used whatever the flag.
- ``torch``: torch's ``F.dropout``, P_drop exactly.

Packed dropout masks: each 64-bit random word from torch's generator gives four independent 16-bit
uniform numbers u in [0, 2^16), and an element is kept when u >= round(p * 2^16). The drop
probability is therefore p rounded to a multiple of 2^-16 (off by at most 2^-17; P_drop = 0.1
becomes 0.100006), and kept elements are scaled by 1 / (1 - that probability), so E[dropout(x)] = x
exactly, as with torch's dropout. The mask is kept as one byte per element for the backward pass
and applied as uint8 (``torch.mul`` by a uint8 mask is several times faster on a CPU than any of
torch's kernels for boolean masks). Both kinds of masks come from torch's default generator, so
fairseq's ``--seed`` makes either reproducible. Inside a layer compiled by ``--compile-layers``
(compiled_layers.py) the dropout is torch's, P_drop exactly, whose masks the compiled kernels draw.

``retain_during_inference`` keeps a module dropping after ``model.eval()``: fairseq's
``--retain-dropout`` (Monte-Carlo dropout at generation time), which the model sets through
fairseq's ``make_generation_fast_`` (models/vaswani_transformer.py).
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

MASK_CHOICES = ("packed", "torch")  # --dropout-masks
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
    if not packed or x.device.type != "cpu" or torch.compiler.is_compiling():  # compiled: compiled_layers.py
        return F.dropout(x, p=p, training=True)
    threshold = drop_threshold(p)
    if threshold == 0:  # p < 2^-17 rounds to "never drop"
        return x
    keep = packed_dropout_mask(x.shape, p, x.device).view(torch.uint8)
    return _ScaleByMask.apply(x, keep, _LEVELS / (_LEVELS - threshold))


class Dropout(nn.Module):
    def __init__(self, p: float, packed: bool = True):
        super().__init__()
        self.p, self.packed = p, packed
        self.retain_during_inference = False

    @property
    def active(self) -> bool:
        """Whether elements are dropped now: in training, or at inference with --retain-dropout."""
        return self.training or self.retain_during_inference

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.active, self.packed)

    def extra_repr(self) -> str:
        retained = ", retained during inference" if self.retain_during_inference else ""
        return f"p={self.p}, masks={'packed' if self.packed else 'torch'}{retained}"
