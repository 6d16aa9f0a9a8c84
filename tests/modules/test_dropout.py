"""Dropout with packed 16-bit masks (modules/dropout.py) against its definition, and the flag that selects it."""

import pytest
import torch
import torch.nn.functional as F

from conftest import build_vaswani
from transformer_plugin.modules.dropout import Dropout, drop_threshold, dropout, packed_dropout_mask

N = 1 << 20  # elements per statistical check; the standard error of a rate is below 0.0005


def quantized(p):
    return drop_threshold(p) / 2**16


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_rate_is_p_rounded_to_a_multiple_of_2_to_the_minus_16(p):
    torch.manual_seed(0)
    assert abs(quantized(p) - p) <= 2**-17
    dropped = 1.0 - packed_dropout_mask((N,), p).float().mean().item()
    assert abs(dropped - quantized(p)) < 5 * (p * (1 - p) / N) ** 0.5


def test_each_16_bit_lane_of_a_random_word_is_uniform():
    """Four numbers come from each 64-bit word: every lane, including the one holding the sign bit,
    must be uniform (with p = 0.5 an element is kept exactly when its lane's top bit is 0)."""
    torch.manual_seed(1)
    keep = packed_dropout_mask((N,), 0.5).view(-1, 4).float().mean(0)
    torch.testing.assert_close(keep, torch.full((4,), 0.5), atol=0.006, rtol=0)


def test_kept_elements_are_scaled_so_the_expectation_is_unchanged():
    torch.manual_seed(2)
    x = torch.rand(N) + 0.5
    y = dropout(x, 0.1, training=True)
    kept = y != 0
    scale = 1.0 / (1.0 - quantized(0.1))
    torch.testing.assert_close(y[kept], x[kept] * scale, rtol=1e-7, atol=0)  # 1 / (1 - p) would be off by 7e-6
    assert abs(y.mean().item() / x.mean().item() - 1.0) < 0.003


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(3)
    x = torch.randn(64, 33, requires_grad=True)  # 2112 elements: not a multiple of 4 words' worth
    y = dropout(x, 0.3, training=True)
    y.backward(torch.ones_like(y))
    kept = (y != 0).float()
    torch.testing.assert_close(x.grad, kept / (1.0 - quantized(0.3)))
    assert 0.6 < kept.mean() < 0.8


@pytest.mark.parametrize("packed", [True, False])
def test_with_a_residual_it_is_the_residual_plus_dropout_in_value_and_gradient(packed):
    """The residual connections call dropout(x, residual=r), which fuses the add (one pass on CPU)."""
    x, r = torch.randn(37, 29, requires_grad=True), torch.randn(37, 29, requires_grad=True)
    torch.manual_seed(6)
    fused = dropout(x, 0.3, training=True, packed=packed, residual=r)
    grad = torch.randn_like(fused)
    fused.backward(grad)
    fused_grads = x.grad.clone(), r.grad.clone()
    x.grad = r.grad = None
    torch.manual_seed(6)
    separate = r + dropout(x, 0.3, training=True, packed=packed)
    separate.backward(grad)
    assert torch.equal(fused, separate)  # bitwise: the same rounding, scale * x then + r
    assert torch.equal(fused_grads[0], x.grad) and torch.equal(fused_grads[1], r.grad)
    kept = (separate - r).detach() != 0
    assert torch.equal(x.grad == 0, ~kept | (grad == 0)) and torch.equal(r.grad, grad)
    assert torch.equal(dropout(x, 0.3, training=False, residual=r), r + x)


def test_same_seed_same_mask_and_eval_or_p0_is_the_identity():
    x = torch.randn(8, 100)
    torch.manual_seed(4)
    a = dropout(x, 0.1, training=True)
    torch.manual_seed(4)
    b = dropout(x, 0.1, training=True)
    assert torch.equal(a, b)
    assert dropout(x, 0.1, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert dropout(x, 1e-6, training=True) is x  # rounds to "never drop"


def test_torch_masks_are_torch_dropout():
    x = torch.randn(8, 100)
    torch.manual_seed(5)
    ours = dropout(x, 0.2, training=True, packed=False)
    torch.manual_seed(5)
    assert torch.equal(ours, F.dropout(x, 0.2, training=True))


@pytest.mark.parametrize("masks", ["packed", "torch"])
def test_the_flag_reaches_every_dropout_of_the_model(dictionary, masks):
    model = build_vaswani(dictionary, dropout_masks=masks, attention_dropout=0.1, activation_dropout=0.1)
    modules = [m for m in model.modules() if isinstance(m, Dropout)]
    # embeddings (2), sub-layers (2 per encoder layer, 3 per decoder layer), FFN activations (1 per layer)
    assert len(modules) == 2 + 2 * 2 + 2 * 3 + 4
    assert {m.packed for m in modules} == {masks == "packed"}
    attention = [m for m in model.modules() if hasattr(m, "packed_dropout") and hasattr(m, "in_proj")]
    assert attention and {m.packed_dropout for m in attention} == {masks == "packed"}
