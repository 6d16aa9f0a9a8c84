"""Eq. (1) and multi-head attention against a plain softmax(Q K^T / sqrt(d_k)) V written out here."""

import math

import pytest
import torch

from transformer_plugin.modules.multihead_attention import (
    MultiHeadAttention,
    scaled_dot_product_attention,
)


def reference_attention(q, k, v, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V, one head at a time, with plain loops over heads."""
    outs, weights = [], []
    for head in range(q.size(1)):
        scores = q[:, head] @ k[:, head].transpose(-1, -2) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, 0], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        weights.append(w)
        outs.append(w @ v[:, head])
    return torch.stack(outs, dim=1), torch.stack(weights, dim=1)


@pytest.mark.parametrize("need_weights", [False, True])
def test_eq1_equals_reference(need_weights):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 6)  # d_v != d_k
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    expected, expected_weights = reference_attention(q, k, v, mask)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(weights, expected_weights)


def test_masked_positions_get_zero_weight():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., :2] = False  # left padding of sentence 0
    _, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
    assert torch.all(weights[0, :, :, :2] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4))
    # the masked values do not reach the output, whatever they hold
    v2 = v.clone()
    v2[0, :, :2] = 1e6
    out1, _ = scaled_dot_product_attention(q, k, v, mask)
    out2, _ = scaled_dot_product_attention(q, k, v2, mask)
    torch.testing.assert_close(out1, out2)


def _heads_by_hand(mha, x, memory=None, mask=None, causal=False):
    """MultiHead(Q, K, V) = Concat(head_i) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""
    h, d_k, d_v = mha.h, mha.d_k, mha.d_v
    if mha.self_attention:
        Wq, Wk, Wv = mha.in_proj.weight.split([h * d_k, h * d_k, h * d_v])
        bq, bk, bv = mha.in_proj.bias.split([h * d_k, h * d_k, h * d_v])
        memory = x
    else:
        Wq, bq = mha.q_proj.weight, mha.q_proj.bias
        Wk, Wv = mha.kv_proj.weight.split([h * d_k, h * d_v])
        bk, bv = mha.kv_proj.bias.split([h * d_k, h * d_v])
    heads = []
    T, S = x.size(1), memory.size(1)
    for i in range(h):
        qi = x @ Wq[i * d_k : (i + 1) * d_k].T + bq[i * d_k : (i + 1) * d_k]
        ki = memory @ Wk[i * d_k : (i + 1) * d_k].T + bk[i * d_k : (i + 1) * d_k]
        vi = memory @ Wv[i * d_v : (i + 1) * d_v].T + bv[i * d_v : (i + 1) * d_v]
        scores = qi @ ki.transpose(-1, -2) / math.sqrt(d_k)
        if causal:
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, 0], float("-inf"))
        heads.append(torch.softmax(scores, -1) @ vi)
    return mha.out_proj(torch.cat(heads, dim=-1))


@pytest.mark.parametrize("h,d_k,d_v", [(4, 8, 8), (2, 4, 16), (8, 3, 5)])  # rows A/B: d_k, d_v free
def test_multihead_equals_per_head_formula(h, d_k, d_v):
    torch.manual_seed(2)
    d_model = 16
    x, memory = torch.randn(2, 5, d_model), torch.randn(2, 7, d_model)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., :3] = False
    cross = MultiHeadAttention(d_model, h, d_k, d_v, self_attention=False)
    torch.testing.assert_close(cross(x, memory, mask=mask)[0], _heads_by_hand(cross, x, memory, mask))
    self_attn = MultiHeadAttention(d_model, h, d_k, d_v, self_attention=True)
    torch.testing.assert_close(self_attn(x, causal=True)[0], _heads_by_hand(self_attn, x, causal=True))
    assert self_attn.in_proj.weight.shape == (h * (2 * d_k + d_v), d_model)
    assert self_attn.out_proj.weight.shape == (d_model, h * d_v)


def test_causal_mask_hides_the_future():
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 4, 4, 4, self_attention=True).eval()
    x = torch.randn(1, 6, 16)
    out, weights = mha(x, causal=True, need_weights=True)
    assert torch.all(weights.triu(1) == 0)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, 16)  # change the future of position 3
    torch.testing.assert_close(mha(x2, causal=True)[0][:, :4], out[:, :4])
