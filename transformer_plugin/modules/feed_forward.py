"""Section 3.3, Eq. (2): the position-wise feed-forward network.

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2,   W_1 in R^{d_model x d_ff},  W_2 in R^{d_ff x d_model}

``activation_dropout`` (dropout on the ReLU output) is not in the paper; it is 0 by default.

``activation="swish"`` (``--activation-fn swish``) replaces max(0, .) by x * sigmoid(x) (SiLU), the activation of
published MarianMT / OPUS-MT models (Marian's ``transformer-ffn-activation: swish``), so that they can be imported
exactly; not in the paper.

Initialisation (the paper gives none): torch's default for ``nn.Linear``, as fairseq's transformer
has it: weights and biases uniform in +-1/sqrt(fan_in). W_2 then starts with a standard deviation
of 1/sqrt(3 d_ff), less than half of Xavier-uniform's sqrt(2 / (d_model + d_ff)), so at the start
the sub-layer adds little to the residual stream that LayerNorm(x + Dropout(FFN(x))) normalises.
With Xavier-uniform here, and W^Q, W^K, W^V as multihead_attention.py initialises them, the model
learned more slowly on real text (commit 9bd5faa, CHANGELOG.md).
"""

import torch.nn.functional as F
from torch import Tensor, nn

from .dropout import Dropout

ACTIVATIONS = {"relu": F.relu, "swish": F.silu}


class PositionwiseFeedForward(nn.Module):
    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation_dropout: float = 0.0,
        packed_dropout: bool = True,
        activation: str = "relu",
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"--activation-fn {activation}: choose from {', '.join(ACTIVATIONS)}")
        self.activation = ACTIVATIONS[activation]
        self.w_1 = nn.Linear(d_model, d_ff)  # torch's default initialisation: see the module docstring
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation_dropout = Dropout(activation_dropout, packed_dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.activation(self.w_1(x))  # max(0, x W_1 + b_1), or swish
        return self.w_2(self.activation_dropout(hidden))
