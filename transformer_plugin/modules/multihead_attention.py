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

Masks are boolean and broadcast to (B, h, T, S); True means "may attend". Masked positions
get exactly zero weight. Decoder self-attention masks future positions (Section 3.2.3).
"""

import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor, nn


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Eq. (1) on q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v) -> (B, h, T, d_v).

    Without ``need_weights`` this calls torch's fused kernel, which computes the same function;
    with it, the weights softmax(Q K^T / sqrt(d_k)) (B, h, T, S) are computed explicitly and
    returned too (dropout, if any, is applied to the weights used for the output, not to the
    returned weights).
    """
    if not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)  # (B, h, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(F.dropout(weights, p=dropout_p, training=dropout_p > 0), v)
    return out, weights


@with_incremental_state
class MultiHeadAttention(nn.Module):
    """Section 3.2.2 multi-head attention with h heads of widths d_k (queries, keys) and d_v (values).

    ``self_attention=True``: queries, keys and values all come from ``x`` (encoder and decoder
    self-attention). Otherwise keys and values come from ``memory`` (encoder-decoder attention,
    Section 3.2.3).

    Incremental decoding (fairseq beam search): in self-attention the keys and values of the
    previous steps are cached, so each step projects only the newest position; in
    encoder-decoder attention the keys and values of the encoder output are projected once per
    sentence, at the first step, and reused.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        attention_dropout: float = 0.0,
        self_attention: bool = True,
    ):
        super().__init__()
        self.d_model, self.h, self.d_k, self.d_v = d_model, h, d_k, d_v
        self.attention_dropout = attention_dropout
        self.self_attention = self_attention
        if self_attention:
            # [W^Q | W^K | W^V] for all heads: d_model -> h*d_k + h*d_k + h*d_v
            self.in_proj = nn.Linear(d_model, h * (2 * d_k + d_v))
        else:
            self.q_proj = nn.Linear(d_model, h * d_k)  # W^Q
            self.kv_proj = nn.Linear(d_model, h * (d_k + d_v))  # [W^K | W^V]
        self.out_proj = nn.Linear(h * d_v, d_model)  # W^O
        self.beam_size = 1  # set by fairseq's SequenceGenerator (set_beam_size)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform weights for each of W^Q, W^K, W^V and W^O on its own, zero biases."""
        with torch.no_grad():
            if self.self_attention:
                blocks = self.in_proj.weight.split([self.h * self.d_k, self.h * self.d_k, self.h * self.d_v])
                biases = [self.in_proj.bias]
            else:
                blocks = (self.q_proj.weight, *self.kv_proj.weight.split([self.h * self.d_k, self.h * self.d_v]))
                biases = [self.q_proj.bias, self.kv_proj.bias]
            for block in (*blocks, self.out_proj.weight):
                nn.init.xavier_uniform_(block)
            for bias in (*biases, self.out_proj.bias):
                nn.init.zeros_(bias)

    def _split_heads(self, x: Tensor, d: int) -> Tensor:
        """(B, T, h*d) -> (B, h, T, d)"""
        B, T, _ = x.shape
        return x.view(B, T, self.h, d).transpose(1, 2)

    def forward(
        self,
        x: Tensor,
        memory: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
        causal: bool = False,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """x (B, T, d_model); memory (B, S, d_model) for encoder-decoder attention.

        ``mask``: bool, broadcastable to (B, h, T, S), True = may attend (key padding).
        ``causal``: mask future positions (decoder self-attention, full-sequence mode only; an
        incremental step sees only the past anyway).
        Returns the output (B, T, d_model) and, with ``need_weights``, the attention weights
        (B, h, T, S).
        """
        B, T, _ = x.shape
        h, d_k, d_v = self.h, self.d_k, self.d_v
        cache = self._get_input_buffer(incremental_state) if incremental_state is not None else None

        if self.self_attention:
            q, k, v = self.in_proj(x).split([h * d_k, h * d_k, h * d_v], dim=-1)
            q, k, v = self._split_heads(q, d_k), self._split_heads(k, d_k), self._split_heads(v, d_v)
            if cache is not None:
                if "k" in cache:  # append this step to the keys/values of the previous steps
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
                self._set_input_buffer(incremental_state, cache)
        else:
            assert memory is not None, "encoder-decoder attention needs the encoder output"
            q = self._split_heads(self.q_proj(x), d_k)
            if cache is not None and "k" in cache:  # encoder keys/values: once per sentence
                k, v = cache["k"], cache["v"]
            else:
                if cache is not None and self.beam_size > 1:
                    # beam search: the encoder output holds beam_size copies of each sentence
                    memory = memory[:: self.beam_size]
                k, v = self.kv_proj(memory).split([h * d_k, h * d_v], dim=-1)
                k, v = self._split_heads(k, d_k), self._split_heads(v, d_v)
                if cache is not None:
                    cache["k"], cache["v"] = k, v
                    self._set_input_buffer(incremental_state, cache)

        if causal and cache is None and T > 1:
            future = torch.ones(T, k.size(2), dtype=torch.bool, device=x.device).tril_(k.size(2) - T)
            mask = future if mask is None else mask & future

        dropout_p = self.attention_dropout if self.training else 0.0
        beams = B // k.size(0)  # > 1: keys/values of one sentence serve all its hypotheses
        if beams > 1:
            q = q.view(-1, beams, h, T, d_k).transpose(1, 2).reshape(-1, h, beams * T, d_k)  # (B/beams, h, beams*T, d_k)
            mask = mask[::beams] if mask is not None else None
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights)
        if beams > 1:
            out = out.view(-1, h, beams, T, d_v).transpose(1, 2).reshape(B, h, T, d_v)
            if weights is not None:
                weights = weights.view(-1, h, beams, T, weights.size(-1)).transpose(1, 2).reshape(B, h, T, -1)
        out = out.transpose(1, 2).reshape(B, T, h * d_v)  # Concat(head_1, ..., head_h)
        return self.out_proj(out), weights

    # -- fairseq incremental-state plumbing (used by SequenceGenerator) --

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "attn_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)

    def set_beam_size(self, beam_size: int):
        """Called by fairseq's SequenceGenerator before beam search."""
        self.beam_size = beam_size

    @torch.jit.unused
    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Follow the beams: select the cached keys/values of the hypotheses that survive.

        Encoder-decoder attention caches one row per sentence during beam search; beams never move
        between sentences, so its cache changes only when finished sentences leave the batch.
        """
        buffer = self.get_incremental_state(incremental_state, "attn_state")
        if buffer is not None:
            for key, value in buffer.items():
                if value is None:
                    continue
                if not self.self_attention and self.beam_size > 1:  # one row per sentence
                    if value.size(0) * self.beam_size == new_order.size(0):
                        continue
                    sentences = new_order.view(-1, self.beam_size)[:, 0] // self.beam_size
                    buffer[key] = value.index_select(0, sentences)
                else:
                    buffer[key] = value.index_select(0, new_order)
            incremental_state = self._set_input_buffer(incremental_state, buffer)
        return incremental_state
