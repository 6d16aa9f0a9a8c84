"""fairseq's beam search (Section 6.1: beam size k, length penalty alpha) with its bookkeeping in tensors.

Not part of the paper's computation: the same search as fairseq's ``SequenceGenerator._generate`` with
``search.BeamSearch``, step for step and operation for operation where it computes (the same candidates, the same
finished hypotheses in the same order, the same scores to the bit), with the per-step bookkeeping that fairseq does
on the host done in tensor operations instead:

- a finished hypothesis is written into a buffer of ``k`` slots a sentence (its tokens, its score, its positional
  scores) by a scatter, where fairseq selects the finished ones by a data-dependent ``masked_select``, reads their
  count, and loops over them in Python (``finalize_hypos``: ``tolist``, ``unique``, a dict a hypothesis);
- the NaN and the ignored-candidate masks are ``masked_fill``s and ``&``s, not boolean-index assignments (each of
  those a ``nonzero``).

So a step reads one thing from the device: which sentences have their k hypotheses, at its end, to drop them from
the batch as fairseq does (the same batch at every step as fairseq's, so that the model computes on the same rows and
rounds the same). fairseq's step reads 34 at beam 4 (counted by ``python -m benchmarks.decoding_profile``; on a GPU
each read waits for the device to finish all it was given).

It runs where it is the same search: the models are ``vaswani_transformer`` and return no attention (no
``--print-alignment``), the search is plain beam search (no sampling, diverse beam, constraints, prefix tokens,
``--match-source-len``, ``--no-repeat-ngram-size``, suppressed tokens or a language model). Everything else, and
everything with ``TRANSFORMER_PLUGIN_BEAM_SEARCH=fairseq`` in the environment, goes to fairseq's own loop
(``transformer_plugin/patches/beam_search_in_tensors.py`` makes the choice).
tests/unit/modules/test_beam_search.py holds the two to the same hypotheses, scores and positional scores.
"""

import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

Hypothesis = Dict[str, Tensor]


def is_plain_beam_search(generator, prefix_tokens: Optional[Tensor], constraints: Optional[Tensor]) -> bool:
    """Whether ``generator`` (a fairseq SequenceGenerator) runs the search that :func:`generate` runs, whatever its
    models (the patch asks which models)."""
    from fairseq import search

    return (
        type(generator.search) is search.BeamSearch
        and prefix_tokens is None
        and constraints is None
        and generator.lm_model is None
        and generator.repeat_ngram_blocker is None
        and generator.token_indices_to_suppress is None
        and not generator.match_source_len
        and not generator.search.stop_on_max_len
    )


class Finished:
    """The finished hypotheses of a batch: ``k`` slots for each of its ``sentences``, filled in order, and one more
    row at the end where the candidates that finish nothing are written (so that a step writes without asking which
    they are)."""

    def __init__(self, sentences: int, k: int, width: int, like_tokens: Tensor, like_scores: Tensor):
        rows = sentences * k + 1
        self.k, self.trash = k, sentences * k
        self.tokens = like_tokens.new_zeros(rows, width)
        self.positional = like_scores.new_zeros(rows, width)
        self.score = like_scores.new_zeros(rows)
        self.length = like_tokens.new_zeros(rows)
        self.count = like_tokens.new_zeros(sentences)  # slots filled, by the batch's original sentence

    def add(
        self,
        step: int,
        ends: Tensor,
        rows: Tensor,
        eos_scores: Tensor,
        normalized: Tensor,
        sentence: Tensor,
        tokens: Tensor,
        scores: Tensor,
        eos: int,
    ) -> Tensor:
        """Write the hypotheses that end here: ``ends`` (live sentences x k) marks the top k candidates that are the
        end of sentence, ``rows`` the hypothesis each extends, ``eos_scores`` their cumulative scores, ``normalized``
        the same over the length penalty; ``sentence`` each live sentence's index in the original batch. As fairseq's
        ``finalize_hypos``: a sentence takes them in order until it has k. Returns how many each live sentence has."""
        k = self.k
        had = self.count.index_select(0, sentence)
        slot = had.unsqueeze(1) + ends.long().cumsum(1) - 1
        taken = ends & (slot < k)
        where = torch.where(taken, sentence.unsqueeze(1) * k + slot, self.trash).view(-1)
        rows = rows.reshape(-1)
        # the hypothesis's tokens without the leading end of sentence, then the end of sentence (fairseq's clone)
        ended = tokens.index_select(0, rows)[:, 1 : step + 2]
        ended[:, step] = eos
        self.tokens[:, : step + 1].index_copy_(0, where, ended)
        # per-position scores from the cumulative ones, as finalize_hypos computes them
        cumulative = scores.index_select(0, rows)[:, : step + 1]
        cumulative[:, step] = eos_scores.reshape(-1)
        cumulative[:, 1:] = cumulative[:, 1:] - cumulative[:, :-1]
        self.positional[:, : step + 1].index_copy_(0, where, cumulative)
        self.score.index_copy_(0, where, normalized.reshape(-1))
        self.length.index_fill_(0, where, step + 1)
        now = had + taken.sum(1)
        self.count.index_copy_(0, sentence, now)
        return now

    def hypotheses(self) -> List[List[Hypothesis]]:
        """Each sentence's hypotheses, best first (fairseq's order), read from the device at once."""
        counts, lengths, scores = self.count.tolist(), self.length.tolist(), self.score.tolist()
        empty = torch.empty(0)
        found: List[List[Hypothesis]] = []
        for s, n in enumerate(counts):
            hyps = []
            for r in range(s * self.k, s * self.k + n):
                length = lengths[r]
                hyps.append(
                    {
                        "tokens": self.tokens[r, :length],
                        "score": self.score[r],
                        "attention": empty,
                        "alignment": empty,
                        "positional_scores": self.positional[r, :length],
                    }
                )
            # fairseq's torch.sort, descending, keeps tied scores in order, as Python's sort does
            order = sorted(range(n), key=lambda i: scores[s * self.k + i], reverse=True)
            found.append([hyps[i] for i in order])
        return found


@torch.no_grad()
def generate(
    generator, sample: Dict[str, Dict[str, Tensor]], bos_token: Optional[int] = None
) -> List[List[Hypothesis]]:
    """fairseq's ``SequenceGenerator._generate`` for plain beam search (:func:`is_plain_beam_search`), its bookkeeping
    in tensors (this module's docstring). The comments name the step of fairseq's loop each part is."""
    model, search = generator.model, generator.search
    eos, pad, unk = generator.eos, generator.pad, generator.unk
    incremental_states = [{} for _ in range(model.models_size)]
    net_input = sample["net_input"]
    src_tokens = net_input["src_tokens"]
    bsz, src_len = src_tokens.size()[:2]
    k = generator.beam_size
    search.init_constraints(None, k)

    max_len = min(int(generator.max_len_a * src_len + generator.max_len_b), generator.max_len - 1)
    assert generator.min_len <= max_len, "min_len cannot be larger than max_len, please adjust these!"
    encoder_outs = model.forward_encoder(net_input)
    new_order = torch.arange(bsz).view(-1, 1).repeat(1, k).view(-1).to(src_tokens.device).long()
    encoder_outs = model.reorder_encoder_out(encoder_outs, new_order)

    scores = torch.zeros(bsz * k, max_len + 1).to(src_tokens).float()
    tokens = torch.zeros(bsz * k, max_len + 2).to(src_tokens).long().fill_(pad)
    tokens[:, 0] = eos if bos_token is None else bos_token
    cands_to_ignore = torch.zeros(bsz, k).to(src_tokens).eq(-1)
    finished: Optional[Finished] = None
    sentence = original = torch.arange(bsz, device=src_tokens.device)  # each live sentence's index in the batch given
    cand_size = 2 * k
    bbsz_offsets = (torch.arange(0, bsz) * k).unsqueeze(1).type_as(tokens).to(src_tokens.device)
    cand_offsets = torch.arange(0, cand_size).type_as(tokens).to(src_tokens.device)
    original_batch_idxs = sample["id"] if isinstance(sample.get("id"), Tensor) else torch.arange(bsz).type_as(tokens)
    penalties = [(step + 1) ** generator.len_penalty for step in range(max_len + 1)]

    reorder_state: Optional[Tensor] = None
    batch_idxs: Optional[Tensor] = None
    for step in range(max_len + 1):
        # follow the beams (and the batch, where sentences finished)
        if reorder_state is not None:
            if batch_idxs is not None:
                corr = batch_idxs - torch.arange(batch_idxs.numel()).type_as(batch_idxs)
                reorder_state.view(-1, k).add_(corr.unsqueeze(-1) * k)
                original_batch_idxs = original_batch_idxs[batch_idxs]
            model.reorder_incremental_state(incremental_states, reorder_state)
            if batch_idxs is not None:  # else the k rows of a sentence trade places among themselves: all the same
                encoder_outs = model.reorder_encoder_out(encoder_outs, reorder_state)
        lprobs, attention = model.forward_decoder(
            tokens[:, : step + 1], encoder_outs, incremental_states, generator.temperature
        )
        if attention is not None:  # is_plain_beam_search asked for models that return none
            raise RuntimeError("the tensor beam search got attention weights it has no room for (--print-alignment)")

        # the scores' constraints: no NaN, no pad, the unknown word's penalty, the length limits
        torch.nan_to_num_(lprobs, nan=-math.inf, posinf=math.inf, neginf=-math.inf)  # fairseq's, in one pass
        lprobs[:, pad] = -math.inf
        lprobs[:, unk] -= generator.unk_penalty
        if step >= max_len:
            lprobs[:, :eos] = -math.inf
            lprobs[:, eos + 1 :] = -math.inf
        if step < generator.min_len:
            lprobs[:, eos] = -math.inf
        scores = scores.type_as(lprobs)

        # the 2k best continuations of each sentence
        cand_scores, cand_indices, cand_beams = search.step(
            step,
            lprobs.view(bsz, -1, generator.vocab_size),
            scores.view(bsz, k, -1)[:, :, :step],
            tokens[:, : step + 1],
            original_batch_idxs,
        )
        cand_bbsz_idx = cand_beams.add(bbsz_offsets)

        # the end of sentence among the top k finishes a hypothesis (fairseq's finalize_hypos)
        eos_mask = cand_indices.eq(eos) & cand_scores.ne(-math.inf)
        eos_mask[:, :k] &= ~cands_to_ignore
        eos_scores = cand_scores[:, :k]
        normalized = eos_scores / penalties[step] if generator.normalize_scores else eos_scores
        if finished is None:  # in the scores' type: the model's log-probabilities'
            finished = Finished(len(original), k, max_len + 1, tokens, scores)
        have = finished.add(
            step, eos_mask[:, :k], cand_bbsz_idx[:, :k], eos_scores, normalized, sentence, tokens, scores, eos
        )
        done = have.eq(k) | (eos_mask[:, :k].any(1) & (step == max_len))

        # the one read a step: which sentences are done
        done_now = done.tolist()
        remaining = done_now.count(False)
        if remaining == 0 or step >= max_len:
            break

        if remaining < bsz:  # drop the finished sentences from the batch, as fairseq does
            batch_idxs = torch.tensor([i for i, d in enumerate(done_now) if not d], device=cand_indices.device)
            eos_mask = eos_mask[batch_idxs]
            cand_beams = cand_beams[batch_idxs]
            bbsz_offsets.resize_(remaining, 1)
            cand_bbsz_idx = cand_beams.add(bbsz_offsets)
            cand_scores = cand_scores[batch_idxs]
            cand_indices = cand_indices[batch_idxs]
            cands_to_ignore = cands_to_ignore[batch_idxs]
            sentence = sentence[batch_idxs]
            scores = scores.view(bsz, -1)[batch_idxs].view(remaining * k, -1)
            tokens = tokens.view(bsz, -1)[batch_idxs].view(remaining * k, -1)
            bsz = remaining
        else:
            batch_idxs = None

        # the k best continuations that do not end: the hypotheses of the next step
        eos_mask[:, :k] = ~((~cands_to_ignore) & (~eos_mask[:, :k]))
        active_mask = torch.add(eos_mask.type_as(cand_offsets) * cand_size, cand_offsets[: eos_mask.size(1)])
        new_cands_to_ignore, active_hypos = torch.topk(active_mask, k=k, dim=1, largest=False)
        cands_to_ignore = new_cands_to_ignore.ge(cand_size)[:, :k]
        active_bbsz_idx = torch.gather(cand_bbsz_idx, dim=1, index=active_hypos).view(-1)
        tokens[:, : step + 1] = torch.index_select(tokens[:, : step + 1], dim=0, index=active_bbsz_idx)
        tokens.view(bsz, k, -1)[:, :, step + 1] = torch.gather(cand_indices, dim=1, index=active_hypos)
        if step > 0:
            scores[:, :step] = torch.index_select(scores[:, :step], dim=0, index=active_bbsz_idx)
        scores.view(bsz, k, -1)[:, :, step] = torch.gather(cand_scores, dim=1, index=active_hypos)
        reorder_state = active_bbsz_idx

    assert finished is not None
    return finished.hypotheses()
