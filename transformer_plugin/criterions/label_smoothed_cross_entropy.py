"""Section 5.4: label smoothing of value eps_ls (0.1 in the paper), as a fairseq criterion.

For a target token y over a vocabulary of V entries, the model is trained against the smoothed
distribution

    q(k) = 1 - eps_ls        if k == y
    q(k) = eps_ls / (V - 1)  otherwise (every other entry of the vocabulary, special symbols included)

and the per-token loss is the cross-entropy H(q, p) = -sum_k q(k) log p(k). This spreads eps_ls as
tensor2tensor does (and as fairseq's ``label_smoothed_cross_entropy`` does); unlike tensor2tensor
the constant entropy of q is not subtracted, so the loss is a cross-entropy, not a KL divergence.
With eps_ls = 0 it is the ordinary cross-entropy. Padding positions contribute nothing.

The gradient with respect to the logits z is softmax(z) - q per token. When the model's
log-probabilities are fairseq's stock ``log_softmax(logits)`` (fairseq's ``transformer`` and
``vaswani_transformer``; ``plain_log_softmax``), the loss is computed from the logits by
``LabelSmoothedCrossEntropyFromLogits``, whose backward pass writes that gradient in two passes
over the (tokens x V) logits, instead of the backward passes of the log-softmax, ``gather`` and
``sum`` (about four times faster on a CPU, commit 1f3eb75). The loss is the same
function either way; any other model (an adaptive softmax, its own ``get_normalized_probs``) takes
the generic path on its log-probabilities.

``--compile-loss`` (a speed seam, like ``--compile-layers``): in training, the loss from the logits is
``smoothed_loss_from_logits`` compiled by ``torch.compile`` (modules/compiled_layers.py), which fuses the
log-softmax, the target's gather and the sums into a few generated kernels and derives their backward pass; of a
bfloat16 model's logits it keeps them for the backward pass, where the eager path keeps float32 log-probabilities of
twice their size (the largest tensor of a big model's step at a vocabulary of 32,000). ``auto`` (the default): on
a CUDA device; ``on``: on any device; ``off``: the eager path above. The same function:
tests/unit/criterions/test_compiled_loss.py holds it and its gradient to the eager path's.

Logged, per target token and in base 2 as every fairseq criterion does: ``loss`` (the smoothed
loss), ``nll_loss`` (plain -log p(y)) and ``ppl`` = 2^nll_loss, the per word-piece perplexity of
Table 3.
"""

import math

import torch
from fairseq import utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics
from fairseq.models import BaseFairseqModel, FairseqDecoder
from fairseq.models.transformer import TransformerModelBase
from torch.autograd.function import once_differentiable

from ..config import VaswaniLabelSmoothedCrossEntropyConfig
from ..modules import compiled_layers

# get_normalized_probs of fairseq's base model and of its transformer, which only calls the former's helper
_STOCK_MODEL_NORMALIZERS = (BaseFairseqModel.get_normalized_probs, TransformerModelBase.get_normalized_probs)


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


def smoothed_loss_from_logits(logits: torch.Tensor, target: torch.Tensor, eps: float, padding_idx: int):
    """``label_smoothed_loss(log_softmax(logits), ...)`` as one function, for ``torch.compile`` (``--compile-loss``):
    logits (N, V) of any float dtype, the log-softmax taken in float32 as fairseq does."""
    return label_smoothed_loss(torch.log_softmax(logits, dim=-1, dtype=torch.float32), target, eps, padding_idx)


class LabelSmoothedCrossEntropyFromLogits(torch.autograd.Function):
    """``label_smoothed_loss(log_softmax(logits), ...)`` with the gradient written directly.

    logits (N, V), any float dtype (the log-softmax is taken in float32, as fairseq does); target
    (N,). Returns (loss, nll_loss), summed over non-padding positions, in nats; only ``loss`` has
    a gradient: s * (softmax(z) - q) for a token whose loss has gradient s (0 at padding), with q
    the smoothed target distribution, 1 - eps at the target and eps / (V - 1) elsewhere.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, eps: float, padding_idx: int):
        lprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float32)  # (N, V)
        loss, nll_loss = label_smoothed_loss(lprobs, target, eps, padding_idx)
        ctx.save_for_backward(lprobs, target)
        ctx.eps, ctx.padding_idx = eps, padding_idx
        ctx.mark_non_differentiable(nll_loss)
        return loss, nll_loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: torch.Tensor, _grad_nll):
        lprobs, target = ctx.saved_tensors
        eps = ctx.eps
        off_target = eps / (lprobs.size(-1) - 1) if eps > 0 else 0.0
        s = (grad_loss * target.ne(ctx.padding_idx)).to(lprobs.dtype).unsqueeze(-1)  # (N, 1): each token's gradient
        grad = torch.exp(lprobs)  # softmax(z)
        torch.addcmul(-off_target * s, grad, s, out=grad)  # s * (softmax(z) - eps / (V - 1))
        grad.scatter_add_(1, target.unsqueeze(-1), -(1.0 - eps - off_target) * s)  # the target's q is 1 - eps
        return grad, None, None, None  # autograd casts it to the logits' dtype


def plain_log_softmax(model) -> bool:
    """Whether ``model.get_normalized_probs(net_output, log_probs=True)`` is fairseq's stock
    ``log_softmax(net_output[0])`` (no adaptive softmax, no override), so that the loss may be
    computed from the logits."""
    decoder = getattr(model, "decoder", None)
    return (
        isinstance(model, BaseFairseqModel)
        and isinstance(decoder, FairseqDecoder)
        and type(model).get_normalized_probs in _STOCK_MODEL_NORMALIZERS
        and type(model).get_normalized_probs_scriptable is BaseFairseqModel.get_normalized_probs_scriptable
        and type(decoder).get_normalized_probs is FairseqDecoder.get_normalized_probs
        and type(decoder).get_normalized_probs_scriptable is FairseqDecoder.get_normalized_probs_scriptable
        and getattr(decoder, "adaptive_softmax", None) is None
        and not getattr(decoder, "onnx_trace", False)
    )


@register_criterion("vaswani_label_smoothed_cross_entropy", dataclass=VaswaniLabelSmoothedCrossEntropyConfig)
class VaswaniLabelSmoothedCrossEntropy(FairseqCriterion):
    def __init__(self, task, label_smoothing, sentence_avg, report_accuracy=False, compile_loss="auto"):
        super().__init__(task)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
        if compile_loss not in compiled_layers.MODES:
            raise ValueError(f"--compile-loss {compile_loss}: choose from {', '.join(compiled_layers.MODES)}")
        self.compile_loss = compile_loss
        self.eps = label_smoothing
        self.sentence_avg = sentence_avg
        self.report_accuracy = report_accuracy

    def forward(self, model, sample, reduce=True):
        """Returns (loss, sample_size, logging_output); the gradient is taken of the summed loss."""
        net_output = model(**sample["net_input"])
        target = model.get_targets(sample, net_output).view(-1)  # (B*T,)
        if plain_log_softmax(model):  # the same loss, from the logits (module docstring)
            scores = net_output[0].reshape(-1, net_output[0].size(-1))  # (B*T, V) logits
            if compiled_layers.applies(self.compile_loss, self, scores):  # --compile-loss (module docstring)
                compiled = compiled_layers.compiled(smoothed_loss_from_logits)
                loss, nll_loss = compiled(scores, target, self.eps, self.padding_idx)
            else:
                loss, nll_loss = LabelSmoothedCrossEntropyFromLogits.apply(scores, target, self.eps, self.padding_idx)
        else:
            lprobs = model.get_normalized_probs(net_output, log_probs=True)  # (B, T, V)
            scores = lprobs.view(-1, lprobs.size(-1))
            loss, nll_loss = label_smoothed_loss(scores, target, self.eps, self.padding_idx)
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
            logging_output["n_correct"] = utils.item(scores.argmax(-1).eq(target).masked_select(keep).sum())
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
