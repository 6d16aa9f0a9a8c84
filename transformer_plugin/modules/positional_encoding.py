"""Section 3.5: positional encodings, added to the (scaled) token embeddings.

Default, the paper's formula, with sines and cosines interleaved::

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

with pos = 0, 1, 2, ... counted over the real tokens of each sentence (left padding is skipped).

Deviations, each chosen by a flag:

- ``--sinusoid-variant fairseq``: fairseq's ``SinusoidalPositionalEmbedding`` (the tensor2tensor
  layout): all sines, then all cosines, ``[sin(pos w_i) | cos(pos w_i)]`` with
  ``w_i = 10000^(-i / (d_model/2 - 1))``, and positions starting at ``padding_idx + 1``. It
  differs slightly from Section 3.5 and exists for checkpoint parity with fairseq's
  ``transformer``.
- ``--positional-encoding learned``: Table 3 row (E), a learned embedding per position.

Padding positions get a zero vector in every variant.
"""

import math
import torch
from torch import Tensor, nn

SINUSOID_VARIANTS = ("paper", "fairseq")


def sinusoid_table(num_positions: int, d_model: int, variant: str = "paper") -> Tensor:
    """The (num_positions, d_model) table of sinusoids for positions 0 .. num_positions-1."""
    if d_model % 2 != 0:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {d_model}")
    pos = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    half = d_model // 2
    i = torch.arange(half, dtype=torch.float64)
    if variant == "paper":
        angle = pos / torch.pow(10000.0, 2 * i / d_model)  # (P, d_model/2)
        table = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)  # interleaved
    elif variant == "fairseq":  # float32 and in the same order of operations as fairseq, for parity
        w = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
        angle = torch.arange(num_positions, dtype=torch.float).unsqueeze(1) * w.unsqueeze(0)
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)  # concatenated
    else:
        raise ValueError(f"unknown sinusoid variant {variant!r}; choose from {SINUSOID_VARIANTS}")
    return table.float()


def token_positions(tokens: Tensor, padding_idx: int) -> Tensor:
    """0-based position of every real token in its sentence (B, T); padding gets -1."""
    real = tokens.ne(padding_idx)
    return torch.cumsum(real, dim=1).sub_(1).masked_fill_(~real, -1)


EAGER_POSITIONS = 1024  # rows of the sinusoid table made with the model; more when a sentence needs them


class PositionalEncoding(nn.Module):
    """Maps tokens (B, T) to their positional encodings (B, T, d_model).

    ``learned=False``: fixed sinusoids (``variant`` "paper" or "fairseq", see the module doc).
    ``learned=True``: Table 3 row (E), an embedding of ``max_positions`` learned vectors.
    In incremental decoding only the last position is returned, (B, 1, d_model).
    """

    def __init__(
        self, max_positions: int, d_model: int, padding_idx: int, learned: bool = False, variant: str = "paper"
    ):
        super().__init__()
        self.max_positions, self.d_model, self.padding_idx = max_positions, d_model, padding_idx
        self.learned, self.variant = learned, variant
        # fairseq's variant numbers positions from padding_idx + 1
        self.offset = padding_idx + 1 if (variant == "fairseq" and not learned) else 0
        if learned:
            self.weight = nn.Parameter(torch.empty(max_positions, d_model))
            nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)
        else:  # made for the first EAGER_POSITIONS, grown when a longer sentence comes (a model given 100,000
            # positions to translate any test line holds no 100,000-row table until one needs it)
            rows = min(max_positions, EAGER_POSITIONS) + self.offset
            self.register_buffer("table", sinusoid_table(rows, d_model, variant), persistent=False)

    def sinusoids(self, positions: int) -> Tensor:
        """The table's first ``positions`` rows (after fairseq's offset), grown if it is shorter."""
        if positions + self.offset > self.table.size(0):
            self.table = sinusoid_table(positions + self.offset, self.d_model, self.variant).to(
                self.table
            )  # device, dtype
        return self.table[self.offset : self.offset + positions]

    def forward(self, tokens: Tensor, incremental: bool = False) -> Tensor:
        positions = token_positions(tokens, self.padding_idx)  # (B, T)
        if incremental:
            positions = positions[:, -1:]
        rows = self.max_positions if self.learned else self.table.size(0) - self.offset
        if tokens.size(1) > rows:  # only then can a position be out of range
            longest = int(positions.max()) + 1
            if self.learned and longest > self.max_positions:
                raise ValueError(
                    f"a sentence of {longest} tokens is longer than the {self.max_positions} learned positions"
                    " (raise --max-source-positions / --max-target-positions)"
                )
            if not self.learned:  # sinusoids extrapolate (Section 3.5)
                self.sinusoids(longest)
        pad = positions.lt(0)
        weight = self.weight if self.learned else self.table
        pe = nn.functional.embedding(positions.clamp(min=0) + self.offset, weight)  # (B, T, d_model)
        return pe.masked_fill(pad.unsqueeze(-1), 0.0)
