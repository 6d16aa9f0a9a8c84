"""Section 5.4: dropout on the output of every sub-layer and on the sums of embeddings and positional encodings.

``Dropout`` is the module the paper's layers hold (so that ``model.eval()`` turns it off); the masks
are drawn by ``fast_paths.dropout``: packed 16-bit masks on a CPU with ``--dropout-masks packed``
(the default; P_drop is then rounded to a multiple of 2^-16), torch's ``F.dropout`` otherwise.

``retain_during_inference`` keeps a module dropping after ``model.eval()``: fairseq's
``--retain-dropout`` (Monte-Carlo dropout at generation time), which the model sets through
fairseq's ``make_generation_fast_`` (models/vaswani_transformer.py).
"""

from torch import Tensor, nn

from . import fast_paths


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
        return fast_paths.dropout(x, self.p, self.active, self.packed)

    def extra_repr(self) -> str:
        retained = ", retained during inference" if self.retain_during_inference else ""
        return f"p={self.p}, masks={'packed' if self.packed else 'torch'}{retained}"
