"""The criterion: eps = 0 is cross-entropy, padding changes nothing, and a value checked by hand."""

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import DummyTask, build_vaswani, random_batch
from transformer_plugin.criterions.label_smoothed_cross_entropy import (
    VaswaniLabelSmoothedCrossEntropy,
    label_smoothed_loss,
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
