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

Eq. (1) is computed in one of two ways, chosen by speed (both compute the same function):
explicitly, with two matrix products and a softmax, or by torch's fused
``F.scaled_dot_product_attention`` (``use_fused_kernel``). The fused kernel is used on GPUs, and
on a CPU whenever a backward pass follows (training) or a head has more than
``EXPLICIT_MAX_SCORES`` query-key pairs. Without a backward pass, on a CPU, short attention is
faster explicit: 2 cores, torch 2.13, 4 heads of 64, forward only, 1.1-1.3x faster for 64
sentences of 22-40 tokens (the encoder during generation), 1.1-2x for a beam-search step (one
query per hypothesis, 10-30 cached keys). With a backward pass the fused kernel wins: forward +
backward of 180 sentences of 22 tokens took 9.1 ms fused against 16.9 ms explicit (the batched
products of the explicit backward run at a fraction of the machine's matmul peak).
"""

import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor, nn

from .dropout import dropout

EXPLICIT_MAX_SCORES = 64 * 64  # on a CPU without backward pass, T * S up to which Eq. (1) is explicit


def use_fused_kernel(q: Tensor, k: Tensor, v: Tensor, need_weights: bool) -> bool:
    """Whether Eq. (1) is computed by torch's fused kernel rather than explicitly (module docstring)."""
    if need_weights:  # only the explicit path returns the weights
        return False
    if q.device.type != "cpu":
        return True
    backward = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    return backward or q.size(-2) * k.size(-2) > EXPLICIT_MAX_SCORES


def attention_bias(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """A boolean mask (True = may attend) as the float added to the scores: 0 where True, -inf elsewhere.

    Adding it is faster than ``where()`` on the boolean mask, and free in the backward pass.
    """
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

    With ``need_weights`` the weights softmax(Q K^T / sqrt(d_k)) (B, h, T, S) are returned too
    (dropout, if any, is applied to the weights used for the output, not to the returned ones).
    ``packed_dropout``: the masks of dropout.py on the explicit path; the fused kernel draws its own.
    """
    if use_fused_kernel(q, k, v, need_weights):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    scores = torch.matmul(q * (1.0 / math.sqrt(q.size(-1))), k.transpose(-2, -1))  # (B, h, T, S)
    if mask is not None:
        scores = scores + (attention_bias(mask, scores.dtype) if mask.dtype == torch.bool else mask)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(dropout(weights, dropout_p, dropout_p > 0, packed_dropout), v)
    return out, weights if need_weights else None


QKV_GAIN = 2**-0.5  # Xavier gain of W^Q, W^K, W^V: see MultiHeadAttention.reset_parameters


@with_incremental_state
class MultiHeadAttention(nn.Module):
    """Section 3.2.2 multi-head attention with h heads of widths d_k (queries, keys) and d_v (values).

    ``self_attention=True``: queries, keys and values all come from ``x`` (encoder and decoder
    self-attention). Otherwise keys and values come from ``memory`` (encoder-decoder attention,
    Section 3.2.3).

    Incremental decoding (fairseq beam search): in self-attention the keys and values of the
    previous steps are cached, so each step projects only the newest position; in
    encoder-decoder attention the keys and values of the encoder output are projected once per
    sentence, at the first step, and reused by all hypotheses of that sentence.
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
        self.attention_dropout, self.packed_dropout = attention_dropout, packed_dropout
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
        at a time: docs/2026-11-23-learning-speed.md.
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
        memory_copies: int = 1,
        row_copies: int = 1,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """x (B, T, d_model); memory (B, S, d_model) for encoder-decoder attention.

        ``mask``: broadcastable to (B, h, T, S), bool with True = may attend, or its
        ``attention_bias`` (key padding).
        ``causal``: mask future positions (decoder self-attention, full-sequence mode only; an
        incremental step sees only the past anyway).
        ``memory_copies``: k > 1 when the rows of ``memory`` come in blocks of k identical copies of
        one sentence (beam search; the encoder output records it, see reorder_encoder_out).
        ``row_copies``: k > 1 when each row of ``x`` stands for k identical hypotheses (the first
        step of beam search, see VaswaniDecoder); the self-attention cache records it, and the next
        reorder gives every hypothesis its own row.
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
                if "copies" in cache and cache["k"].size(0) != B:  # shared rows, not yet reordered
                    self.reorder_incremental_state(incremental_state, torch.arange(B, device=x.device))
                    cache = self._get_input_buffer(incremental_state)
                k, v = self._append_to_cache(cache, "k", k), self._append_to_cache(cache, "v", v)
                if row_copies > 1:
                    cache["copies"] = torch.tensor(row_copies)
                self._set_input_buffer(incremental_state, cache)
        else:
            assert memory is not None, "encoder-decoder attention needs the encoder output"
            q = self._split_heads(self.q_proj(x), d_k)
            if cache is not None and "k" in cache:  # encoder keys/values: projected at the first step
                k, v = cache["k"], cache["v"]
            else:
                if cache is not None and memory_copies > 1:  # beam search: one row per sentence
                    memory, cache["copies"] = memory[::memory_copies], torch.tensor(memory_copies)
                k, v = self.kv_proj(memory).split([h * d_k, h * d_v], dim=-1)
                k, v = self._split_heads(k, d_k), self._split_heads(v, d_v)
                if cache is not None:  # contiguous once, so that no later step copies them
                    k, v = k.contiguous(), v.contiguous()
                    cache["k"], cache["v"] = k, v
                    self._set_input_buffer(incremental_state, cache)

        if causal and cache is None and T > 1:
            future = torch.ones(T, k.size(2), dtype=torch.bool, device=x.device).tril_(k.size(2) - T)
            if mask is None or mask.dtype == torch.bool:
                mask = future if mask is None else mask & future
            else:
                mask = mask.masked_fill(~future, float("-inf"))

        dropout_p = self.attention_dropout if self.training else 0.0
        beams = B // k.size(0)  # > 1: keys/values of one sentence serve all its hypotheses
        if beams > 1:
            q = q.view(-1, beams, h, T, d_k).transpose(1, 2).reshape(-1, h, beams * T, d_k)  # (B/beams, h, beams*T, d_k)
            mask = mask[::beams] if mask is not None else None
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights, self.packed_dropout)
        if beams > 1:
            out = out.view(-1, h, beams, T, d_v).permute(0, 2, 3, 1, 4).reshape(B, T, h * d_v)  # Concat(heads)
            if weights is not None:
                weights = weights.view(-1, h, beams, T, weights.size(-1)).transpose(1, 2).reshape(B, h, T, -1)
        else:
            out = out.transpose(1, 2).reshape(B, T, h * d_v)  # Concat(head_1, ..., head_h)
        return self.out_proj(out), weights

    # -- fairseq incremental-state plumbing (used by SequenceGenerator) --

    @staticmethod
    def _append_to_cache(cache: Dict[str, Optional[Tensor]], name: str, new: Tensor) -> Tensor:
        """Self-attention keys (``name`` "k") or values ("v") of all steps so far, (B, h, t + T, d).

        ``cache[name]`` holds the t previous steps as the start of ``cache[name + "_room"]``, a
        buffer with room for more steps: ``reorder_incremental_state`` leaves one free step when it
        selects the surviving hypotheses, so that a beam-search step copies the past once (there)
        instead of twice (select, then concatenate).
        """
        past, room = cache.get(name), cache.get(name + "_room")
        if past is None:
            full = room = new
        else:
            t, T = past.size(2), new.size(2)
            if room is not None and room.size(2) >= t + T:
                room[:, :, t : t + T] = new
                full = room[:, :, : t + T]
            else:
                full = room = torch.cat([past, new], dim=2)
        cache[name], cache[name + "_room"] = full, room
        return full

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "attn_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)

    @torch.jit.unused
    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Follow the beams: select the cached keys/values of the hypotheses that survive.

        ``cache["copies"]`` = k: each cached row stands for k consecutive hypotheses. Encoder-decoder
        attention caches one row per sentence during beam search; beams never move between
        sentences, so that cache changes only when finished sentences leave the batch. Self-attention
        has shared rows only after the first step (see VaswaniDecoder); the reorder ends the sharing.
        """
        buffer = self.get_incremental_state(incremental_state, "attn_state")
        if buffer is None or buffer.get("k") is None:
            return incremental_state
        k = int(buffer["copies"]) if "copies" in buffer else 1
        if self.self_attention:  # the (row, head) blocks of t * d values to select: faster than whole rows
            rows = new_order // k if k > 1 else new_order
            blocks = (rows[:, None] * self.h + torch.arange(self.h, device=rows.device)).view(-1)
        for name in ("k", "v"):
            value = buffer[name]
            assert value is not None
            if self.self_attention:  # into a buffer with one free step (see _append_to_cache)
                B, h, t, d = value.shape
                room = value.new_empty(new_order.size(0), h, t + 1, d)
                torch.index_select(value.reshape(B * h, t, d), 0, blocks, out=room.view(-1, t + 1, d)[:, :t])
                buffer[name], buffer[name + "_room"] = room[:, :, :t], room
            elif k > 1:  # one row per sentence, shared by its beams
                if value.size(0) * k != new_order.size(0):
                    sentences = new_order.view(-1, k)[:, 0] // k
                    buffer[name] = value.index_select(0, sentences)
            else:
                buffer[name] = value.index_select(0, new_order)
        if self.self_attention:
            buffer.pop("copies", None)
        return self._set_input_buffer(incremental_state, buffer)
