"""The CPU fast paths (modules/fast_paths.py) against the plain computation each replaces.

Packed dropout masks against dropout's definition (and the flag that selects them); the choice of
attention kernel (explicit Eq. (1) or torch's fused kernel) against its rule, and both kernels
against each other.
"""

import pytest
import torch
import torch.nn.functional as F

from helpers import build_vaswani
import transformer_plugin.modules.fast_paths as fast_paths
from transformer_plugin.modules.dropout import Dropout
from transformer_plugin.modules.dropout import drop_threshold, dropout, packed_dropout_mask
from transformer_plugin.modules.multihead_attention import MultiHeadAttention, attention, attention_bias

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
    # embeddings (2), sub-layers (2 per encoder layer, 3 per decoder layer), FFN activations (1 per
    # layer), attention weights (1 per attention: 1 per encoder layer, 2 per decoder layer)
    assert len(modules) == 2 + 2 * 2 + 2 * 3 + 4 + 2 * 1 + 2 * 2
    assert {m.packed for m in modules} == {masks == "packed"}


@pytest.mark.parametrize("causal", [False, True])
def test_explicit_and_fused_paths_compute_the_same_function(monkeypatch, causal):
    """Eq. (1) explicit and by torch's fused kernel (chosen by fast_paths.use_fused_attention):
    outputs and gradients must agree, with padding and with the causal mask, and with the padding
    given as a boolean mask or as its attention_bias (the form the encoder and decoder pass)."""
    torch.manual_seed(6)
    mha = MultiHeadAttention(32, 4, 8, 8, self_attention=True)
    x, g = torch.randn(3, 9, 32), torch.randn(3, 9, 32)
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[1, ..., 6:] = False
    results = []
    bias = attention_bias(mask)
    assert bias.dtype == torch.float32 and set(bias.unique().tolist()) == {0.0, float("-inf")}
    for fused in (False, True):
        monkeypatch.setattr(fast_paths, "use_fused_attention", lambda *args, fused=fused: fused)
        for given in (mask, bias):
            mha.zero_grad()
            xi = x.clone().requires_grad_()
            out, _ = mha(xi, mask=given, causal=causal)
            (out * g).sum().backward()
            results.append((out, xi.grad, mha.in_proj.weight.grad.clone()))
    for other in results[1:]:
        for first, value in zip(results[0], other):
            torch.testing.assert_close(value, first, rtol=1e-5, atol=1e-6)


def test_cpu_attention_is_explicit_only_when_short_and_in_evaluation(monkeypatch):
    """The dispatch itself: count calls of torch's fused kernel. Training (a backward pass follows)
    always takes the fused kernel, with autograd on or off (--checkpoint-activations runs a layer
    without it first); evaluation takes it only above EXPLICIT_MAX_SCORES pairs."""
    calls = []
    fused = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused(*a, **k)
    )
    side = int(fast_paths.EXPLICIT_MAX_SCORES**0.5)
    for T, training, expected in ((side, False, 0), (side + 1, False, 1), (side, True, 1), (2, True, 1)):
        for grad in (False, True):
            calls.clear()
            q = torch.randn(1, 2, T, 4, requires_grad=grad)
            with torch.set_grad_enabled(grad):
                attention(q, q, q, training=training)
            assert len(calls) == expected, (T, training, grad)
    q = torch.randn(1, 2, 3, 4, requires_grad=True)
    calls.clear()
    _, weights = attention(q, q, q, need_weights=True, training=True)  # only the explicit path has them
    assert calls == [] and weights is not None


def test_fused_attention_gets_masks_in_the_forms_fused_kernels_take():
    """What reaches torch's fused kernel in training (benchmarks/attention_kernels.py records it):
    the decoder's future mask as ``is_causal``, key padding as (B, 1, 1, S), no mask at all for a
    batch without padding; never a (T, S) or (B, h, T, S) mask."""
    from benchmarks.attention_kernels import survey

    calls = survey("vaswani_tiny", B=4, S=10, T=9)
    forms = {(phase, kind): mask for phase, kind, mask, _ in calls}
    assert len(forms) == len(calls)  # one form for every layer of each attention
    padded, unpadded = "training, padded batch", "training, no padding"
    assert forms[(padded, "decoder self-attention")] == forms[(unpadded, "decoder self-attention")] == "is_causal"
    assert (
        forms[(padded, "encoder self-attention")]
        == forms[(padded, "encoder-decoder attention")]
        == "(4, 1, 1, 10) float32"
    )
    assert forms[(unpadded, "encoder self-attention")] == forms[(unpadded, "encoder-decoder attention")] == "none"


def _fused_kernels_on_a_cuda_tensor():
    """What fast_paths.fused_kernels allows for a tensor on a CUDA device (a stand-in: only its device is read),
    as torch's flags say inside the context, and after it."""
    from types import SimpleNamespace

    cuda_q = SimpleNamespace(device=torch.device("cuda", 0))
    flags = torch.backends.cuda
    with fast_paths.fused_kernels(cuda_q):
        inside = {
            "cudnn": flags.cudnn_sdp_enabled(),
            "flash": flags.flash_sdp_enabled(),
            "efficient": flags.mem_efficient_sdp_enabled(),
            "math": flags.math_sdp_enabled(),
        }
    return inside, flags.cudnn_sdp_enabled()


def test_on_a_cuda_device_every_fused_kernel_but_cudnns_may_compute_eq_1(monkeypatch):
    """cuDNN's kernel builds a graph for every new shape (0.367 s an update against 0.033 on an H200, 2026-11-28);
    flash, memory-efficient and math stay allowed, and torch's own flags are as before once the call is done.
    TRANSFORMER_PLUGIN_CUDNN_ATTENTION=1 (CUDNN_ATTENTION) leaves torch's choice alone; so does a CPU tensor."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    inside, after = _fused_kernels_on_a_cuda_tensor()
    assert inside == {"cudnn": False, "flash": True, "efficient": True, "math": True}
    assert after == before
    monkeypatch.setattr(fast_paths, "CUDNN_ATTENTION", True)
    assert _fused_kernels_on_a_cuda_tensor()[0]["cudnn"] == before
    with fast_paths.fused_kernels(torch.zeros(1)):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_the_fused_attention_runs_inside_the_kernels_fast_paths_allows(monkeypatch):
    """attention() calls torch's fused kernel within fast_paths.fused_kernels(q), not beside it."""
    import contextlib

    entered, calls = [], []

    @contextlib.contextmanager
    def recording(q):
        entered.append(q.shape)
        yield
        entered.append("left")

    def sdpa(*args, **kwargs):
        calls.append(len(entered))
        return torch.zeros(2, 4, 3, 8)

    monkeypatch.setattr(fast_paths, "fused_kernels", recording)
    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)
    q = torch.randn(2, 4, 3, 8)
    attention(q, torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), training=True)
    assert calls == [1] and entered == [q.shape, "left"]
