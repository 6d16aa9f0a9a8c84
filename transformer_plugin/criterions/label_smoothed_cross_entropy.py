"""Section 5.4: label smoothing of value eps_ls (0.1 in the paper), as a fairseq criterion.

For a target token y over a vocabulary of V entries, the model is trained against the smoothed
distribution

    q(k) = 1 - eps_ls        if k == y
    q(k) = eps_ls / (V - 1)  otherwise (every other entry of the vocabulary, special symbols included)

and the per-token loss is the cross-entropy H(q, p) = -sum_k q(k) log p(k). This spreads eps_ls as
tensor2tensor does (and as fairseq's ``label_smoothed_cross_entropy`` does); unlike tensor2tensor
the constant entropy of q is not subtracted, so the loss is a cross-entropy, not a KL divergence.
With eps_ls = 0 it is the ordinary cross-entropy. Padding positions contribute nothing.

Logged, per target token and in base 2 as every fairseq criterion does: ``loss`` (the smoothed
loss), ``nll_loss`` (plain -log p(y)) and ``ppl`` = 2^nll_loss, the per word-piece perplexity of
Table 3.
"""

import math
from dataclasses import dataclass, field

import torch
from fairseq import utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics
from omegaconf import II


@dataclass
class VaswaniLabelSmoothedCrossEntropyConfig(FairseqDataclass):
    label_smoothing: float = field(default=0.1, metadata={"help": "eps_ls, mass spread over the other V-1 entries"})
    report_accuracy: bool = field(default=False, metadata={"help": "also log the accuracy of the argmax token"})
    sentence_avg: bool = II("optimization.sentence_avg")


def label_smoothed_loss(lprobs: torch.Tensor, target: torch.Tensor, eps: float, padding_idx: int):
    """Summed smoothed loss and summed nll over the non-padding positions.

    lprobs (N, V) log-probabilities, target (N,). Returns (loss, nll_loss), both scalars in nats.
    """
    V = lprobs.size(-1)
    if V < 2 and eps > 0:
        raise ValueError("label smoothing needs a vocabulary of at least 2 entries")
    padding = target.eq(padding_idx)
    nll = -lprobs.gather(dim=-1, index=target.unsqueeze(-1)).squeeze(-1).masked_fill(padding, 0.0)  # -log p(y)
    if eps == 0:
        return nll.sum(), nll.sum()
    sum_all = -lprobs.sum(dim=-1).masked_fill(padding, 0.0)  # -sum_k log p(k)
    off_target = eps / (V - 1)
    loss = (1.0 - eps) * nll + off_target * (sum_all - nll)  # H(q, p)
    return loss.sum(), nll.sum()


@register_criterion("vaswani_label_smoothed_cross_entropy", dataclass=VaswaniLabelSmoothedCrossEntropyConfig)
class VaswaniLabelSmoothedCrossEntropy(FairseqCriterion):
    def __init__(self, task, label_smoothing, sentence_avg, report_accuracy=False):
        super().__init__(task)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
        self.eps = label_smoothing
        self.sentence_avg = sentence_avg
        self.report_accuracy = report_accuracy

    def forward(self, model, sample, reduce=True):
        """Returns (loss, sample_size, logging_output); the gradient is taken of the summed loss."""
        net_output = model(**sample["net_input"])
        lprobs = model.get_normalized_probs(net_output, log_probs=True)  # (B, T, V)
        target = model.get_targets(sample, net_output)  # (B, T)
        lprobs, target = lprobs.view(-1, lprobs.size(-1)), target.view(-1)
        loss, nll_loss = label_smoothed_loss(lprobs, target, self.eps, self.padding_idx)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        if self.report_accuracy:
            keep = target.ne(self.padding_idx)
            logging_output["n_correct"] = utils.item(lprobs.argmax(-1).eq(target).masked_select(keep).sum())
            logging_output["total"] = utils.item(keep.sum())
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        loss_sum = sum(log.get("loss", 0) for log in logging_outputs)
        nll_loss_sum = sum(log.get("nll_loss", 0) for log in logging_outputs)
        ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        metrics.log_scalar("loss", loss_sum / sample_size / math.log(2), sample_size, round=3)
        metrics.log_scalar("nll_loss", nll_loss_sum / ntokens / math.log(2), ntokens, round=3)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["nll_loss"].avg))
        total = sum(log.get("total", 0) for log in logging_outputs)
        if total > 0:
            metrics.log_scalar("total", total)
            metrics.log_scalar("n_correct", sum(log.get("n_correct", 0) for log in logging_outputs))
            metrics.log_derived(
                "accuracy", lambda meters: round(meters["n_correct"].sum * 100.0 / meters["total"].sum, 3)
            )

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
