"""--compile-loss (criterions/label_smoothed_cross_entropy.py): the compiled loss is the eager one in value and
gradient, keeps a bfloat16 model's logits rather than float32 log-probabilities for the backward pass, and runs only
in training where the flag says.

The tests that compile are marked ``compiles`` (make test runs them; the kernel paths of make test-kernels do not:
tests/unit/modules/test_compiled_layers.py says why). Each asserts that the loss did compile, so that a fallback to
the eager path cannot pass for it."""

import pytest
import torch

from helpers import DummyTask, build_vaswani, random_batch
from transformer_plugin.criterions import label_smoothed_cross_entropy as criterion_module
from transformer_plugin.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyFromLogits,
    VaswaniLabelSmoothedCrossEntropy,
    smoothed_loss_from_logits,
)
from transformer_plugin.modules import compiled_layers

PAD = 1


def compiled_loss():
    return compiled_layers.compiled(smoothed_loss_from_logits)


def logits_and_target(n, V, dtype, seed=0):
    torch.manual_seed(seed)
    logits = (3 * torch.randn(n, V)).to(dtype).requires_grad_()
    target = torch.randint(0, V, (n,))
    target[::5] = PAD  # padding
    return logits, target


@pytest.mark.compiles
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_the_compiled_loss_is_the_eager_loss_and_gradient(dtype, eps):
    graphs = compiled_layers.graphs_compiled()
    for n in (37, 64):  # two batch sizes, one graph (dynamic shapes)
        logits, target = logits_and_target(n, 50, dtype, seed=n)
        loss, nll = compiled_loss()(logits, target, eps, PAD)
        (grad,) = torch.autograd.grad(loss, logits)
        eager_logits = logits.detach().requires_grad_()
        eager_loss, eager_nll = LabelSmoothedCrossEntropyFromLogits.apply(eager_logits, target, eps, PAD)
        (eager_grad,) = torch.autograd.grad(eager_loss, eager_logits)
        assert compiled_loss().failed is None, compiled_loss().failed
        torch.testing.assert_close(loss, eager_loss, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(nll, eager_nll, rtol=1e-5, atol=1e-4)
        assert grad.dtype == eager_grad.dtype == dtype
        torch.testing.assert_close(grad, eager_grad)  # dtype's tolerance: bfloat16 rounds the float32 gradient
    assert compiled_layers.graphs_compiled() > graphs


@pytest.mark.compiles
def test_of_bfloat16_logits_the_compiled_loss_keeps_half_the_bytes_for_the_backward_pass():
    """The eager path keeps float32 log-probabilities (4 bytes an entry); compiled, the bfloat16 logits (2) and a few
    numbers a token."""
    logits, target = logits_and_target(300, 1000, torch.bfloat16)
    kept = {}
    for name, loss_of in [
        ("eager", lambda: LabelSmoothedCrossEntropyFromLogits.apply(logits, target, 0.1, PAD)),
        ("compiled", lambda: compiled_loss()(logits, target, 0.1, PAD)),
    ]:
        sizes = []
        with torch.autograd.graph.saved_tensors_hooks(
            lambda t: sizes.append(t.numel() * t.element_size()) or t, lambda t: t
        ):
            loss_of()
        kept[name] = sum(sizes)
    assert compiled_loss().failed is None
    entries = logits.numel()
    assert kept["eager"] >= 4 * entries
    assert 2 * entries <= kept["compiled"] <= 2 * entries + 64 * logits.size(0), kept


def sample(dictionary, seed):
    torch.manual_seed(seed)
    src, src_lengths, prev = random_batch(dictionary, batch_size=3, src_len=8, tgt_len=6)
    target = torch.cat([prev[:, 1:], torch.full((3, 1), dictionary.pad())], dim=1)
    return {
        "net_input": {"src_tokens": src, "src_lengths": src_lengths, "prev_output_tokens": prev},
        "target": target,
        "ntokens": int(target.ne(dictionary.pad()).sum()),
    }


@pytest.mark.compiles
def test_the_criterion_compiles_the_loss_in_training_where_the_flag_says(dictionary, monkeypatch):
    torch.manual_seed(3)
    model = build_vaswani(dictionary, dropout=0.0, compile_layers="off")
    batch = sample(dictionary, 5)
    criteria = {
        mode: VaswaniLabelSmoothedCrossEntropy(DummyTask(dictionary), 0.1, sentence_avg=False, compile_loss=mode)
        for mode in ("on", "off", "auto")
    }
    results, calls = {}, []
    eager = LabelSmoothedCrossEntropyFromLogits.apply
    monkeypatch.setattr(LabelSmoothedCrossEntropyFromLogits, "apply", lambda *a: calls.append(1) or eager(*a))
    for mode, criterion in criteria.items():
        model.zero_grad()
        calls.clear()
        loss, _, log = criterion.train()(model, batch)
        loss.backward()
        results[mode] = (loss.detach(), log["nll_loss"], model.decoder.output_projection.weight.grad.clone())
        assert calls == ([] if mode == "on" else [1]), mode  # auto: on a CUDA device only
        if mode == "on":
            assert compiled_loss().failed is None
    for on, off in zip(results["on"], results["off"]):
        torch.testing.assert_close(on, off, rtol=1e-5, atol=1e-5)

    # in evaluation (validation, scoring) the eager path, whatever the flag
    monkeypatch.setattr(criterion_module.compiled_layers, "compiled", lambda f: pytest.fail("compiled in evaluation"))
    with torch.no_grad():
        criteria["on"].eval()(model.eval(), batch)


def test_the_flag_is_checked(dictionary):
    with pytest.raises(ValueError, match="--compile-loss yes: choose from auto, on, off"):
        VaswaniLabelSmoothedCrossEntropy(DummyTask(dictionary), 0.1, sentence_avg=False, compile_loss="yes")
