"""Section 5.4: dropout on the output of every sub-layer and on the sums of embeddings and positional encodings.

``Dropout`` is the module the paper's layers hold (so that ``model.eval()`` turns it off); the masks
are drawn by ``fast_paths.dropout``: packed 16-bit masks on a CPU with ``--dropout-masks packed``
(the default; P_drop is then rounded to a multiple of 2^-16), torch's ``F.dropout`` otherwise.
"""

from torch import Tensor, nn

from . import fast_paths


class Dropout(nn.Module):
    def __init__(self, p: float, packed: bool = True):
        super().__init__()
        self.p, self.packed = p, packed

    def forward(self, x: Tensor) -> Tensor:
        return fast_paths.dropout(x, self.p, self.training, self.packed)

    def extra_repr(self) -> str:
        return f"p={self.p}, masks={'packed' if self.packed else 'torch'}"
