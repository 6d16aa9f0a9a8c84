"""The criterion: eps = 0 is cross-entropy, padding changes nothing, a value checked by hand, and the
loss computed from the logits (the fast path) equal to the generic one in value and gradient."""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import DummyTask, build_vaswani, fairseq_transformer, random_batch
from transformer_plugin.criterions import label_smoothed_cross_entropy as criterion_module
from transformer_plugin.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyFromLogits,
    VaswaniLabelSmoothedCrossEntropy,
    label_smoothed_loss,
    plain_log_softmax,
)

PAD = 1


def test_eps_zero_is_cross_entropy():
    torch.manual_seed(0)
    lprobs = torch.randn(10, 7).log_softmax(-1)
    target = torch.tensor([0, 2, 3, PAD, 4, 5, 6, 2, PAD, 3])
    loss, nll = label_smoothed_loss(lprobs, target, 0.0, PAD)
    expected = F.nll_loss(lprobs, target, ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected)


def test_hand_checked_value():
    # V = 3, p = (0.5, 0.25, 0.25), target 0, eps 0.1: q = (0.9, 0.05, 0.05)
    # H(q, p) = 0.9 ln 2 + 2 * 0.05 ln 4 = 1.1 ln 2 = 0.762462...
    lprobs = torch.tensor([[0.5, 0.25, 0.25]]).log()
    loss, nll = label_smoothed_loss(lprobs, torch.tensor([0]), 0.1, padding_idx=99)
    assert loss.item() == pytest.approx(1.1 * math.log(2), rel=1e-6)
    assert nll.item() == pytest.approx(math.log(2), rel=1e-6)


def test_equals_cross_entropy_with_smoothed_targets():
    torch.manual_seed(1)
    V, eps = 9, 0.2
    lprobs = torch.randn(6, V).log_softmax(-1)
    target = torch.tensor([0, 3, 8, 2, 5, 7])
    q = torch.full((6, V), eps / (V - 1)).scatter_(1, target.unsqueeze(1), 1 - eps)
    loss, _ = label_smoothed_loss(lprobs, target, eps, padding_idx=99)
    torch.testing.assert_close(loss, -(q * lprobs).sum())


def _sample(src, src_lengths, prev, dictionary):
    target = torch.cat([prev[:, 1:], torch.full((prev.size(0), 1), dictionary.pad())], dim=1)
    for i in range(prev.size(0)):  # target = prev shifted left, ending with eos
        n = int(prev[i].ne(dictionary.pad()).sum())
        target[i, n - 1] = dictionary.eos()
    return {
        "net_input": {"src_tokens": src, "src_lengths": src_lengths, "prev_output_tokens": prev},
        "target": target,
        "ntokens": int(target.ne(dictionary.pad()).sum()),
    }


def test_padded_batch_equals_sum_of_its_parts(dictionary):
    torch.manual_seed(2)
    model = build_vaswani(dictionary, dropout=0.0).eval()
    criterion = VaswaniLabelSmoothedCrossEntropy(DummyTask(dictionary), 0.1, sentence_avg=False)
    src, src_lengths, prev = random_batch(dictionary, batch_size=3, src_len=8, tgt_len=6)
    batch = _sample(src, src_lengths, prev, dictionary)
    loss, sample_size, log = criterion(model, batch)
    assert sample_size == batch["ntokens"] == sum(int(prev[i].ne(dictionary.pad()).sum()) for i in range(3))
    total, total_nll = 0.0, 0.0
    for i in range(3):  # each sentence alone, without padding
        s = src[i : i + 1][:, src[i].ne(dictionary.pad())]
        p = prev[i : i + 1][:, prev[i].ne(dictionary.pad())]
        part_loss, part_size, part_log = criterion(model, _sample(s, src_lengths[i : i + 1], p, dictionary))
        total, total_nll = total + part_loss, total_nll + part_log["nll_loss"]
    torch.testing.assert_close(loss, total)
    torch.testing.assert_close(log["nll_loss"], total_nll)


def test_refuses_eps_out_of_range(dictionary):
    with pytest.raises(ValueError, match="--label-smoothing"):
        VaswaniLabelSmoothedCrossEntropy(DummyTask(dictionary), 1.0, sentence_avg=False)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_from_logits_equals_the_generic_loss_in_value_and_gradient(eps, dtype):
    """The gradient written by hand, s * (softmax(z) - q), against autograd through log_softmax,
    gather and sum; with padding, and with an upstream gradient other than 1."""
    torch.manual_seed(3)
    logits = (3 * torch.randn(12, 9)).to(dtype)
    target = torch.tensor([0, 2, 3, PAD, 4, 5, 6, 2, PAD, 3, 8, 7])
    results = []
    for fast in (False, True):
        z = logits.clone().requires_grad_()
        if fast:
            loss, nll = LabelSmoothedCrossEntropyFromLogits.apply(z, target, eps, PAD)
        else:
            loss, nll = label_smoothed_loss(z.log_softmax(-1, dtype=torch.float32), target, eps, PAD)
        (0.37 * loss).backward()
        assert z.grad.dtype == dtype and loss.dtype == torch.float32
        results.append((loss, nll, z.grad.float()))
    for generic, fast in zip(*results):
        torch.testing.assert_close(fast, generic, rtol=1e-5, atol=1e-6)
    assert results[1][2][target.eq(PAD)].abs().sum() == 0  # padding gets no gradient
    with pytest.raises(ValueError, match="vocabulary of at least 2"):
        LabelSmoothedCrossEntropyFromLogits.apply(torch.zeros(2, 1), torch.zeros(2, dtype=torch.long), 0.1, PAD)


def test_criterion_takes_the_logits_path_with_the_same_loss_and_gradients(dictionary, monkeypatch):
    torch.manual_seed(4)
    model = build_vaswani(dictionary, dropout=0.0)
    criterion = VaswaniLabelSmoothedCrossEntropy(DummyTask(dictionary), 0.1, sentence_avg=False, report_accuracy=True)
    src, src_lengths, prev = random_batch(dictionary, batch_size=3, src_len=8, tgt_len=6)
    batch = _sample(src, src_lengths, prev, dictionary)
    calls = []
    fast_apply = LabelSmoothedCrossEntropyFromLogits.apply
    monkeypatch.setattr(LabelSmoothedCrossEntropyFromLogits, "apply", lambda *a: calls.append(1) or fast_apply(*a))
    results = []
    for fast in (True, False):
        monkeypatch.setattr(criterion_module, "plain_log_softmax", lambda model, fast=fast: fast)
        model.zero_grad()
        loss, _, log = criterion(model, batch)
        loss.backward()
        results.append((loss, log["nll_loss"], log["n_correct"], model.decoder.output_projection.weight.grad.clone()))
    assert calls == [1]
    for fast, generic in zip(*results):
        torch.testing.assert_close(fast, generic, rtol=1e-5, atol=1e-6)


def test_the_logits_path_is_only_for_fairseqs_stock_log_softmax(dictionary):
    """Both transformers normalise with fairseq's stock log_softmax; a model with its own
    get_normalized_probs, or an adaptive softmax, keeps the generic path, and its own
    normalisation decides the loss."""
    from fairseq.models.transformer import TransformerModel

    model, theirs = build_vaswani(dictionary, dropout=0.0).eval(), fairseq_transformer(dictionary)
    assert isinstance(theirs, TransformerModel) and plain_log_softmax(theirs) and plain_log_softmax(model)

    class Tempered(type(model)):
        def get_normalized_probs(self, net_output, log_probs, sample=None):
            return torch.log_softmax(net_output[0].float() / 2.0, dim=-1)

    tempered = Tempered(model.encoder, model.decoder).eval()
    assert not plain_log_softmax(tempered)
    criterion = VaswaniLabelSmoothedCrossEntropy(DummyTask(dictionary), 0.1, sentence_avg=False)
    src, src_lengths, prev = random_batch(dictionary, batch_size=2, src_len=5, tgt_len=4)
    batch = _sample(src, src_lengths, prev, dictionary)
    loss, _, _ = criterion(tempered, batch)
    logits = model(src, src_lengths, prev)[0]
    expected, _ = label_smoothed_loss(
        torch.log_softmax(logits / 2.0, -1).view(-1, logits.size(-1)), batch["target"].view(-1), 0.1, PAD
    )
    torch.testing.assert_close(loss, expected)

    model.decoder.adaptive_softmax = torch.nn.Identity()  # any adaptive softmax: the generic path
    assert not plain_log_softmax(model)
