"""The tensor beam search (modules/beam_search.py) against fairseq's own loop: the same hypotheses in the same order,
the same scores and positional scores to the bit, with one read from the device a step where fairseq's makes about
a dozen; and fairseq's loop wherever the search is not plain beam search."""

import pytest
import torch
from helpers import build_vaswani, random_batch

from transformer_plugin.modules import beam_search
from transformer_plugin.patches import beam_search_in_tensors


def model_with_eos_bias(dictionary, seed, eos_bias):
    """A random vaswani_tiny whose output bias makes the end of sentence likely by ``eos_bias`` nats: hypotheses
    finish at different steps, some sentences before others, and the end of sentence is often among the top 2k."""
    torch.manual_seed(seed)
    model = build_vaswani(dictionary, output_bias=True).eval()
    with torch.no_grad():
        model.decoder.output_bias[dictionary.eos()] = eos_bias
    return model


def both(monkeypatch, models, dictionary, sample, **settings):
    """fairseq's loop's hypotheses and the tensor beam search's, for the same generator settings."""
    from fairseq.sequence_generator import SequenceGenerator

    found = {}
    for path in ("fairseq", "tensors"):
        monkeypatch.setenv(beam_search_in_tensors.OFF, path)
        generator = SequenceGenerator(models, dictionary, **settings)
        with torch.no_grad():
            found[path] = generator.forward(sample)
    return found["fairseq"], found["tensors"]


def assert_same(expected, got):
    assert len(expected) == len(got)
    for sentence, (hyps_a, hyps_b) in enumerate(zip(expected, got)):
        assert len(hyps_a) == len(hyps_b), sentence
        for a, b in zip(hyps_a, hyps_b):
            assert torch.equal(a["tokens"], b["tokens"]), (sentence, a["tokens"], b["tokens"])
            assert torch.equal(a["score"], b["score"]), sentence
            assert torch.equal(a["positional_scores"], b["positional_scores"]), sentence
            assert a["attention"].numel() == b["attention"].numel() == 0


SETTINGS = [
    dict(beam_size=4, len_penalty=0.6, max_len_a=1, max_len_b=10),  # the paper's decoding (Section 6.1)
    dict(beam_size=1, max_len_b=8),
    dict(beam_size=5, len_penalty=2.0, max_len_b=6, min_len=3),
    dict(beam_size=3, normalize_scores=False, unk_penalty=0.5, temperature=0.7, max_len_b=12),
    dict(beam_size=4, max_len_b=2),  # every sentence runs into the length limit
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("eos_bias", [0.0, 2.5, 4.0])
def test_the_same_hypotheses_scores_and_positional_scores_as_fairseq(monkeypatch, dictionary, settings, eos_bias):
    model = model_with_eos_bias(dictionary, seed=3, eos_bias=eos_bias)
    src, src_lengths, _ = random_batch(dictionary, batch_size=7, src_len=9, seed=5)
    sample = {"id": torch.arange(7), "net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    expected, got = both(monkeypatch, [model], dictionary, sample, **settings)
    assert_same(expected, got)


def test_a_nan_score_is_never_chosen_as_in_fairseq(monkeypatch, dictionary):
    """A model whose log-probabilities carry NaN (one word in every row, and every ordinary word in the first row):
    both searches take it as -inf, fairseq with a boolean mask, the tensor search with nan_to_num."""
    model = model_with_eos_bias(dictionary, seed=3, eos_bias=2.5)
    normalized = model.get_normalized_probs

    def with_nan(net_output, log_probs, sample=None):
        lprobs = normalized(net_output, log_probs, sample)
        lprobs[..., dictionary.nspecial + 1] = float("nan")
        lprobs[0, ..., dictionary.nspecial + 2 :] = float("nan")
        return lprobs

    model.get_normalized_probs = with_nan
    src, src_lengths, _ = random_batch(dictionary, batch_size=5, src_len=8, seed=2)
    sample = {"id": torch.arange(5), "net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    assert_same(*both(monkeypatch, [model], dictionary, sample, beam_size=4, len_penalty=0.6, max_len_b=9))


def test_an_ensemble_and_a_batch_of_one(monkeypatch, dictionary):
    models = [model_with_eos_bias(dictionary, seed=s, eos_bias=2.0) for s in (1, 2)]
    for batch_size in (1, 6):
        src, src_lengths, _ = random_batch(dictionary, batch_size=batch_size, src_len=6, seed=batch_size)
        sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
        assert_same(*both(monkeypatch, models, dictionary, sample, beam_size=4, len_penalty=0.6, max_len_b=8))


@pytest.mark.parametrize("eos_bias", [0.0, 3.0])
def test_the_ignored_candidates_case(monkeypatch, eos_bias):
    """A beam as wide as the vocabulary allows (V - 1) and the end of sentence allowed at the first step
    (``--min-len 0``): there fewer than k candidates do not end, so fairseq keeps an ended one among the live
    hypotheses and ignores its ends later (its ``cands_to_ignore``), as the tensors must."""
    from helpers import make_dictionary

    dictionary = make_dictionary(6)
    model = model_with_eos_bias(dictionary, seed=9, eos_bias=eos_bias)
    src, src_lengths, _ = random_batch(dictionary, batch_size=5, src_len=7, seed=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    assert_same(*both(monkeypatch, [model], dictionary, sample, beam_size=len(dictionary) - 1, max_len_b=6, min_len=0))


def test_one_read_a_step_where_fairseq_makes_many(monkeypatch, dictionary):
    """Counted by the decoding profile (benchmarks/decoding_profile.py): the reads from the device a decoding step
    makes, in the search and in the model. Besides the one a step, a batch reads its hypotheses at its end (3), and
    each encoder-decoder attention checks once that the rows it is given are beam copies."""
    from benchmarks import decoding_profile

    model = model_with_eos_bias(dictionary, seed=3, eos_bias=2.5)
    src, src_lengths, _ = random_batch(dictionary, batch_size=6, src_len=9, seed=5)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    counts = {}
    for path in ("fairseq", "tensors"):
        monkeypatch.setenv(beam_search_in_tensors.OFF, path)
        counts[path] = decoding_profile.count([model], dictionary, [sample], beam_size=4, len_penalty=0.6)
    assert counts["tensors"]["steps"] == counts["fairseq"]["steps"] > 5
    steps, layers = counts["tensors"]["steps"], len(model.decoder.layers)
    assert round(counts["tensors"]["reads a step"] * steps) == steps + 3 + layers, counts["tensors"]
    assert counts["fairseq"]["reads a step"] >= 10, counts["fairseq"]


def test_what_is_not_plain_beam_search_goes_to_fairseq(monkeypatch, dictionary):
    """Prefix tokens, sampling, a repeated n-gram block, --print-alignment's attention and fairseq's own transformer
    decode by fairseq's loop: the tensor beam search is never asked."""
    from fairseq import search
    from fairseq.sequence_generator import SequenceGenerator, SequenceGeneratorWithAlignment
    from helpers import fairseq_transformer

    asked = []
    monkeypatch.setattr(beam_search, "generate", lambda *a, **k: asked.append(1))
    model = model_with_eos_bias(dictionary, seed=3, eos_bias=2.0)
    src, src_lengths, _ = random_batch(dictionary, batch_size=3, src_len=6)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    with torch.no_grad():
        SequenceGenerator([model], dictionary, beam_size=2, max_len_b=4).generate(
            [model], sample, prefix_tokens=src[:, -2:-1]
        )
        SequenceGenerator([model], dictionary, max_len_b=4, search_strategy=search.Sampling(dictionary)).forward(sample)
        SequenceGenerator([model], dictionary, beam_size=2, max_len_b=4, no_repeat_ngram_size=2).forward(sample)
        SequenceGeneratorWithAlignment([model], dictionary, beam_size=2, max_len_b=4).forward(sample)
        model.decoder.need_attn = False
        SequenceGenerator([fairseq_transformer(dictionary).eval()], dictionary, beam_size=2, max_len_b=4).forward(
            sample
        )
        assert asked == []
        SequenceGenerator([model], dictionary, beam_size=2, max_len_b=4).forward(sample)
    assert asked == [1]
