"""Section 3.2: scaled dot-product attention and multi-head attention.

Eq. (1)::

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Section 3.2.2::

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    W_i^Q, W_i^K in R^{d_model x d_k},  W_i^V in R^{d_model x d_v},  W^O in R^{h d_v x d_model}

d_k and d_v are free (Table 3 rows A and B change them independently of d_model / h).
The h projections W_i^Q (likewise K, V) are stored as one matrix of h * d_k columns; for
self-attention W^Q, W^K and W^V are further stacked into one matrix so that one matmul
computes all three (``in_proj``), and for encoder-decoder attention W^K and W^V are stacked
(``kv_proj``). The projections have biases, as in tensor2tensor and fairseq (the paper's
equations omit them).

Masks broadcast to (B, h, T, S): boolean, True meaning "may attend", or the same as a float
``attention_bias`` (0 or -inf, added to the scores), which the encoder and decoder build once per
forward pass for all their layers. Masked positions get exactly zero weight. Decoder
self-attention masks future positions (Section 3.2.3).

Eq. (1) is computed explicitly here (``scaled_dot_product_attention``) or by torch's fused
``F.scaled_dot_product_attention``, which computes the same function; ``fast_paths.use_fused_attention``
chooses, by speed.

Beam search (incremental decoding) keeps keys and values from step to step in caches that fairseq's
SequenceGenerator drives; they are not part of the paper's computation and live beside it, in
beam_search_caches.py.
"""

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import fast_paths
from .beam_search_caches import BeamSearchCaches, IncrementalState
from .dropout import Dropout, dropout


def attention_bias(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """A boolean mask (True = may attend) as the float added to the scores: 0 where True, -inf elsewhere."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    packed_dropout: bool = True,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Eq. (1) on q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v) -> (B, h, T, d_v).

    ``mask`` broadcasts to (B, h, T, S): bool (True = may attend) or its ``attention_bias``.
    With ``need_weights`` the weights softmax(Q K^T / sqrt(d_k)) (B, h, T, S) are returned too
    (dropout, if any, is applied to the weights used for the output, not to the returned ones).
    """
    scores = torch.matmul(q * (1.0 / math.sqrt(q.size(-1))), k.transpose(-2, -1))  # (B, h, T, S)
    if mask is not None:
        scores = scores + (attention_bias(mask, scores.dtype) if mask.dtype == torch.bool else mask)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(dropout(weights, dropout_p, dropout_p > 0, packed_dropout), v)
    return out, weights if need_weights else None


def attention(q, k, v, mask=None, causal=False, dropout_p=0.0, need_weights=False, packed_dropout=True, training=False):
    """Eq. (1), with every query's later positions masked too when ``causal`` (Section 3.2.3).

    By torch's fused kernel where ``fast_paths.use_fused_attention`` says so (those of its kernels that
    ``fast_paths.fused_kernels`` allows), else explicitly. The fused kernel is told ``is_causal``
    instead of being given a mask whenever that is all there is to mask (T = S, no other mask): no
    (T, S) mask is built, and on a GPU this is the form the flash kernels accept.
    """
    T, S = q.size(-2), k.size(-2)
    fused = fast_paths.use_fused_attention(q, k, need_weights, training)
    is_causal = True if fused and causal and mask is None and T == S else False  # a bool under torch.compile too
    if causal and not is_causal:
        mask = mask_future(mask, T, S, q.device)
    if fused:
        with fast_paths.fused_kernels(q):
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
            ), None
    return scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights, packed_dropout)


def mask_future(mask: Optional[Tensor], T: int, S: int, device) -> Tensor:
    """Section 3.2.3: ``mask`` (or none) with every query's later positions masked too."""
    future = torch.ones(T, S, dtype=torch.bool, device=device).tril_(S - T)
    if mask is None or mask.dtype == torch.bool:
        return future if mask is None else mask & future
    return mask.masked_fill(~future, float("-inf"))


QKV_GAIN = 2**-0.5  # Xavier gain of W^Q, W^K, W^V: see MultiHeadAttention.reset_parameters


class MultiHeadAttention(BeamSearchCaches, nn.Module):
    """Section 3.2.2 multi-head attention with h heads of widths d_k (queries, keys) and d_v (values).

    ``self_attention=True``: queries, keys and values all come from ``x`` (encoder and decoder
    self-attention). Otherwise keys and values come from ``memory`` (encoder-decoder attention,
    Section 3.2.3).

    Incremental decoding (fairseq's beam search) goes through BeamSearchCaches: self-attention
    appends each step's keys and values to those of the previous steps; encoder-decoder attention
    projects the encoder output once, into one row per sentence shared by its hypotheses.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        attention_dropout: float = 0.0,
        self_attention: bool = True,
        packed_dropout: bool = True,
    ):
        super().__init__()
        self.d_model, self.h, self.d_k, self.d_v = d_model, h, d_k, d_v
        self.dropout = Dropout(attention_dropout, packed_dropout)  # on the weights of Eq. (1); not in the paper
        self.self_attention = self_attention
        if self_attention:
            # [W^Q | W^K | W^V] for all heads: d_model -> h*d_k + h*d_k + h*d_v
            self.in_proj = nn.Linear(d_model, h * (2 * d_k + d_v))
        else:
            self.q_proj = nn.Linear(d_model, h * d_k)  # W^Q
            self.kv_proj = nn.Linear(d_model, h * (d_k + d_v))  # [W^K | W^V]
        self.out_proj = nn.Linear(h * d_v, d_model)  # W^O
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform weights for each of W^Q, W^K, W^V and W^O on its own, zero biases.

        The paper gives no initialisation. W^Q, W^K and W^V take Xavier's gain 1/sqrt(2), as in
        fairseq's transformer (W^O keeps gain 1): with gain 1 the model learned clearly more slowly
        per update on real text (valid nll 8.63 against 7.81 bits at update 400; with this gain and
        the feed-forward's torch default, 7.79), and of the two changes this one mattered more. The
        biases' initialisation made no difference there, so they stay zero. The ablation, one factor
        at a time (commit 9bd5faa, CHANGELOG.md).
        """
        with torch.no_grad():
            if self.self_attention:
                blocks = self.in_proj.weight.split([self.h * self.d_k, self.h * self.d_k, self.h * self.d_v])
                biases = [self.in_proj.bias]
            else:
                blocks = (self.q_proj.weight, *self.kv_proj.weight.split([self.h * self.d_k, self.h * self.d_v]))
                biases = [self.q_proj.bias, self.kv_proj.bias]
            for block in blocks:  # W^Q, W^K, W^V
                nn.init.xavier_uniform_(block, gain=QKV_GAIN)
            nn.init.xavier_uniform_(self.out_proj.weight)  # W^O
            for bias in (*biases, self.out_proj.bias):
                nn.init.zeros_(bias)

    def forward(
        self,
        x: Tensor,
        memory: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
        causal: bool = False,
        incremental_state: Optional[IncrementalState] = None,
        need_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """x (B, T, d_model); memory (B, S, d_model) for encoder-decoder attention.

        ``mask``: broadcastable to (B, h, T, S), bool with True = may attend, or its
        ``attention_bias`` (the form the encoder and decoder pass: key padding).
        ``causal``: mask future positions (decoder self-attention, Section 3.2.3; an incremental
        step sees only the past anyway).
        Returns the output (B, T, d_model) and, with ``need_weights``, the attention weights
        (B, h, T, S).
        """
        B, T, _ = x.shape
        h, d_k, d_v = self.h, self.d_k, self.d_v
        if self.self_attention:
            q, k, v = self.in_proj(x).split([h * d_k, h * d_k, h * d_v], dim=-1)  # Q W^Q, K W^K, V W^V
            q, k, v = self._split_heads(q, d_k), self._split_heads(k, d_k), self._split_heads(v, d_v)
            if incremental_state is not None:
                k, v = self._cached_keys_values(incremental_state, k, v)
        else:
            assert memory is not None, "encoder-decoder attention needs the encoder output"
            q = self._split_heads(self.q_proj(x), d_k)
            k, v = self._memory_keys_values(memory, incremental_state)
        causal = causal and incremental_state is None and T > 1  # a step sees only the past anyway

        beams = B // k.size(0)  # > 1: the hypotheses of one sentence share its keys and values
        dropout_p = self.dropout.p if self.dropout.active else 0.0
        q, mask = self._beams_as_queries(q, mask, beams)
        out, weights = attention(  # Eq. (1)
            q, k, v, mask, causal, dropout_p, need_weights, self.dropout.packed, training=self.training
        )
        out = self._concat_heads(out, beams)  # Concat(head_1, ..., head_h)
        if weights is not None and beams > 1:
            weights = weights.view(-1, h, beams, T, weights.size(-1)).transpose(1, 2).reshape(B, h, T, -1)
        return self.out_proj(out), weights  # ... W^O

    def _split_heads(self, x: Tensor, d: int) -> Tensor:
        """(B, T, h*d) -> (B, h, T, d)"""
        B, T, _ = x.shape
        return x.view(B, T, self.h, d).transpose(1, 2)

    def _concat_heads(self, out: Tensor, beams: int) -> Tensor:
        """(B/beams, h, beams*T, d_v) -> (B, T, h*d_v)"""
        n, h, bT, d_v = out.shape
        return out.view(n, h, beams, bT // beams, d_v).permute(0, 2, 3, 1, 4).reshape(n * beams, bT // beams, h * d_v)
