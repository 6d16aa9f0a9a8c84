"""The model: parameter counts of Table 3, incremental decoding, configuration errors."""

import pytest
import torch

from conftest import build_vaswani, make_dictionary, random_batch, vaswani_args
from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel, check_config


@pytest.fixture(scope="module")
def vocab_37k():
    return make_dictionary(37000 - 4)  # 4 special symbols: 37,000 entries in all


def count(model):
    return sum(p.numel() for p in model.parameters())  # a shared matrix counts once


def closed_form(N=6, d_model=512, d_ff=2048, h=8, d_k=None, d_v=None, V=37000):
    """Parameters from the paper's dimensions alone (biases included, embeddings shared)."""
    d_k = d_k or d_model // h
    d_v = d_v or d_model // h
    attention = d_model * h * (2 * d_k + d_v) + h * (2 * d_k + d_v) + h * d_v * d_model + d_model
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    layer_norm = 2 * d_model
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm
    return N * (encoder_layer + decoder_layer) + V * d_model


# Table 3: (flags on top of vaswani_base, paper's params x 1e6, allowed relative gap)
# The rows of width 512 marked 0.07 sit 2.0-2.3M under the paper's figure, the size of ~4,000 more
# embedding rows: those figures fit a vocabulary of about 41,000 tokens (README, "Parameter counts").
TABLE_3 = {
    "base": ({}, 65, 0.03),
    "B d_k=16": (dict(d_k=16, d_v=64), 58, 0.07),
    "B d_k=32": (dict(d_k=32, d_v=64), 60, 0.03),
    "C N=2": (dict(encoder_layers=2, decoder_layers=2), 36, 0.07),
    "C N=4": (dict(encoder_layers=4, decoder_layers=4), 50, 0.07),
    "C N=8": (dict(encoder_layers=8, decoder_layers=8), 80, 0.03),
    "C d_model=256": (dict(d_model=256, d_k=32, d_v=32), 28, 0.07),
    "C d_model=1024": (dict(d_model=1024, d_k=128, d_v=128), 168, 0.03),
    "C d_ff=1024": (dict(d_ff=1024), 53, 0.07),
    "C d_ff=4096": (dict(d_ff=4096), 90, 0.03),
}


@pytest.mark.parametrize("row", list(TABLE_3))
def test_table3_parameter_counts(vocab_37k, row):
    flags, paper, tolerance = TABLE_3[row]
    model = build_vaswani(vocab_37k, arch="vaswani_base", **flags)
    n = count(model)
    dims = {"N": flags.get("encoder_layers", 6), **{k: v for k, v in flags.items() if not k.endswith("layers")}}
    assert n == closed_form(**dims)
    assert abs(n / 1e6 - paper) / paper <= tolerance, f"{row}: {n / 1e6:.1f}M vs paper {paper}M"


def test_big_parameter_count(vocab_37k):
    n = count(build_vaswani(vocab_37k, arch="vaswani_big"))
    assert n == closed_form(d_model=1024, d_ff=4096, h=16)
    assert abs(n / 1e6 - 213) / 213 <= 0.03


def test_embeddings_are_one_matrix_used_three_times(dictionary):
    model = build_vaswani(dictionary)
    shared = model.encoder.embed.embed_tokens.weight
    assert model.decoder.embed.embed_tokens.weight is shared
    assert model.decoder.output_projection.weight is shared


@pytest.mark.parametrize(
    "flags",
    [
        {},
        dict(positional_encoding="learned"),
        dict(d_k=4, d_v=12),
        dict(normalize_before=True),
    ],
)
def test_incremental_decoding_equals_full_forward(dictionary, flags):
    torch.manual_seed(0)
    model = build_vaswani(dictionary, **flags).eval()
    src, src_lengths, prev = random_batch(dictionary, batch_size=3, src_len=8, tgt_len=6)
    prev = prev[:, :5].masked_fill(prev[:, :5].eq(dictionary.pad()), 7)  # no target padding mid-decode
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        full, _ = model.decoder(prev, encoder_out)
        state = {}
        for t in range(prev.size(1)):
            step, _ = model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
            assert step.shape == (3, 1, len(dictionary))
            torch.testing.assert_close(step[:, 0], full[:, t])


def test_incremental_decoding_follows_reordered_beams(dictionary):
    torch.manual_seed(1)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, prev = random_batch(dictionary, batch_size=3, src_len=8, tgt_len=4)
    prev = prev.masked_fill(prev.eq(dictionary.pad()), 7)
    order = torch.tensor([2, 0, 0])
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        state = {}
        for t in range(2):
            model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
        model.decoder.reorder_incremental_state_scripting(state, order)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        step, _ = model.decoder(prev[order, :3], encoder_out, incremental_state=state)
        full, _ = model.decoder(prev[order, :3], encoder_out)
    torch.testing.assert_close(step[:, 0], full[:, 2])


def test_attention_weights_for_alignment_and_figures(dictionary):
    model = build_vaswani(dictionary).eval()
    src, src_lengths, prev = random_batch(dictionary)
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        _, extra = model.decoder(prev, encoder_out, alignment_layer=-1, need_head_weights=True)
        _, averaged = model.decoder(prev, encoder_out, alignment_layer=-1)
        _, none = model.decoder(prev, encoder_out)
    heads = extra["attn"][0]
    assert heads.shape == (3, 4, 6, 7)  # (B, h, T, S)
    torch.testing.assert_close(heads.sum(-1), torch.ones(3, 4, 6))
    padding = src.eq(dictionary.pad())[:, None, None, :].expand_as(heads)
    assert padding.any() and torch.all(heads[padding] == 0)
    torch.testing.assert_close(averaged["attn"][0], heads.mean(1))
    assert none["attn"] == [None]
    with torch.no_grad():
        encoder_self = model.encoder(src, src_lengths, attention_layer=-1)["self_attn"]
    assert len(encoder_self) == 1 and encoder_self[0].shape == (3, 4, 7, 7)  # (B, h, S, S)
    torch.testing.assert_close(encoder_self[0].sum(-1), torch.ones(3, 4, 7))
    assert torch.all(encoder_self[0][src.eq(dictionary.pad())[:, None, None, :].expand(3, 4, 7, 7)] == 0)
    assert encoder_out["self_attn"] == []


@pytest.mark.parametrize(
    "flags,flag",
    [
        (dict(d_model=30, attention_heads=4), "--attention-heads"),
        (dict(d_model=33, d_k=8, d_v=8, attention_heads=4), "--d-model"),
        (dict(encoder_layers=0), "--encoder-layers"),
        (dict(dropout=1.5), "--dropout"),
        (dict(d_k=0), "--d-k"),
    ],
)
def test_bad_sizes_fail_naming_the_flag(flags, flag):
    with pytest.raises(ValueError, match=flag):
        check_config(vaswani_args("vaswani_tiny", **flags))


def test_shared_embeddings_need_a_joined_dictionary():
    from conftest import DummyTask

    task = DummyTask(make_dictionary(20), make_dictionary(25))
    with pytest.raises(ValueError, match="--joined-dictionary"):
        VaswaniTransformerModel.build_model(vaswani_args("vaswani_tiny", share_all_embeddings=True), task)
    model = VaswaniTransformerModel.build_model(vaswani_args("vaswani_tiny"), task)
    assert model.decoder.output_projection.weight.shape[0] == len(task.target_dictionary)


def test_architectures_follow_the_paper():
    expected = {
        "vaswani_base": dict(encoder_layers=6, d_model=512, d_ff=2048, attention_heads=8, dropout=0.1),
        "vaswani_big": dict(encoder_layers=6, d_model=1024, d_ff=4096, attention_heads=16, dropout=0.3),
        "vaswani_big_en_fr": dict(d_model=1024, d_ff=4096, attention_heads=16, dropout=0.1),
        "vaswani_parsing": dict(encoder_layers=4, decoder_layers=4, d_model=1024, attention_heads=8, d_ff=2048),
    }
    for arch, values in expected.items():
        args = vaswani_args(arch)
        check_config(args)
        assert {k: getattr(args, k) for k in values} == values, arch
        d_head = 128 if arch == "vaswani_parsing" else 64  # d_model / h
        assert args.d_k == args.d_v == d_head, arch
    assert vaswani_args("vaswani_big", dropout=0.2).dropout == 0.2  # flags override the arch


def test_beam_mode_projects_encoder_once_per_sentence(dictionary):
    """With the beam size set (SequenceGenerator calls set_beam_size) and the encoder output expanded
    into beam copies (reorder_encoder_out, as SequenceGenerator calls it), the encoder keys/values
    are cached once per sentence and shared by its beams; results equal the full forward pass of
    every hypothesis, also after a finished sentence leaves the batch."""
    torch.manual_seed(4)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, _ = random_batch(dictionary, batch_size=2, src_len=8)
    beam = 3
    model.set_beam_size(beam)
    expand = torch.arange(2).repeat_interleave(beam)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (2 * beam, 4))
    with torch.no_grad():
        encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, src_lengths), expand)
        state = {}
        for t in range(prev.size(1)):
            step, extra = model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state, alignment_layer=-1)
            full, full_extra = model.decoder(prev[:, : t + 1], encoder_out, alignment_layer=-1)
            torch.testing.assert_close(step[:, 0], full[:, t])
            torch.testing.assert_close(extra["attn"][0][:, 0], full_extra["attn"][0][:, t])
        cross_cache = [v for v in state.values() if v["k"].size(0) == 2]
        assert len(cross_cache) == len(model.decoder.layers)  # one row per sentence, not per beam
        order = torch.tensor([2, 0, 0, 5, 4, 3])  # hypotheses move within their sentence: no copy
        model.decoder.reorder_incremental_state_scripting(state, order)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        kept = [v["k"] for v in state.values() if v["k"].size(0) == 2]
        assert len(kept) == len(cross_cache) and all(a is b for a, b in zip(kept, (v["k"] for v in cross_cache)))
        prev = torch.cat([prev[order], torch.full((6, 1), 8)], dim=1)
        step, _ = model.decoder(prev, encoder_out, incremental_state=state)
        full, _ = model.decoder(prev, encoder_out)
        torch.testing.assert_close(step[:, 0], full[:, -1])
        # sentence 0 finishes: the generator keeps the 3 beams of sentence 1, reordered
        keep = torch.tensor([5, 3, 3])
        model.decoder.reorder_incremental_state_scripting(state, keep)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, keep)
        nxt = torch.cat([prev[keep], torch.full((3, 1), 9)], dim=1)
        step, _ = model.decoder(nxt, encoder_out, incremental_state=state)
        full, _ = model.decoder(nxt, encoder_out)
    torch.testing.assert_close(step[:, 0], full[:, -1])


def test_sequence_generator_projects_the_encoder_once_per_sentence(dictionary):
    """Through fairseq's own SequenceGenerator (beam 4), which calls the model's set_beam_size:
    every projection of encoder keys/values sees one row per sentence, not one per hypothesis."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(7)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, _ = random_batch(dictionary, batch_size=3, src_len=8)
    rows = []
    for layer in model.decoder.layers:
        layer.encoder_attn.kv_proj.register_forward_hook(lambda module, inputs, output: rows.append(inputs[0].size(0)))
    generator = SequenceGenerator([model], dictionary, beam_size=4, max_len_b=5)
    with torch.no_grad():
        hypotheses = generator.forward({"net_input": {"src_tokens": src, "src_lengths": src_lengths}})
    assert len(hypotheses) == 3 and rows == [3] * len(model.decoder.layers)


def test_beam_sharing_finds_the_same_hypotheses_as_without_it(dictionary):
    """Beam 4 through fairseq's SequenceGenerator: the same hypotheses and scores whether or not the
    encoder-decoder attention shares one row of keys/values per sentence."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(8)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, _ = random_batch(dictionary, batch_size=3, src_len=8)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    with torch.no_grad():
        shared = SequenceGenerator([model], dictionary, beam_size=4, max_len_b=6).forward(sample)
        model.set_beam_size(1)  # what a model without the hook gets: one row per hypothesis
        model.decoder.set_beam_size = lambda beam_size: None
        unshared = SequenceGenerator([model], dictionary, beam_size=4, max_len_b=6).forward(sample)
    for hyps_a, hyps_b in zip(shared, unshared):
        for a, b in zip(hyps_a, hyps_b):
            assert torch.equal(a["tokens"], b["tokens"])
            torch.testing.assert_close(a["positional_scores"], b["positional_scores"])


def test_beam_steps_do_not_copy_the_cached_keys_and_values(dictionary):
    """A decoding step reads the cached encoder keys/values (and the self-attention cache) in place:
    no copy of them, which torch.matmul makes of a strided cache at every step."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Copies(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.sources = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket in (torch.ops.aten.clone, torch.ops.aten.copy_, torch.ops.aten._to_copy):
                source = args[1] if func.overloadpacket is torch.ops.aten.copy_ else args[0]
                self.sources.add(source.untyped_storage().data_ptr())
            return func(*args, **(kwargs or {}))

    torch.manual_seed(10)
    model = build_vaswani(dictionary).eval()
    model.set_beam_size(3)
    src, src_lengths, _ = random_batch(dictionary, batch_size=2, src_len=8)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (6, 4))
    with torch.no_grad():
        expand = torch.arange(2).repeat_interleave(3)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, src_lengths), expand)
        state = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
            model.decoder.reorder_incremental_state_scripting(state, torch.tensor([1, 0, 0, 5, 3, 4]))
        cached = {buffer[name].untyped_storage().data_ptr() for buffer in state.values() for name in ("k", "v")}
        copies = Copies()
        with copies:
            model.decoder(prev, encoder_out, incremental_state=state)
    assert len(cached) == 4 * len(model.decoder.layers)  # self-attention k/v rooms, encoder k/v
    assert not cached & copies.sources


def test_a_beam_size_left_over_does_not_merge_different_sentences(dictionary):
    """A beam size set by an earlier generator (fairseq's greedy search does not reset it) must not
    make encoder-decoder attention treat 4 different sentences as the beams of one."""
    torch.manual_seed(5)
    model = build_vaswani(dictionary).eval()
    model.set_beam_size(4)
    src, src_lengths, prev = random_batch(dictionary, batch_size=4, src_len=8)
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        state = {}
        for t in range(3):
            step, _ = model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
            full, _ = model.decoder(prev[:, : t + 1], encoder_out)
            torch.testing.assert_close(step[:, 0], full[:, t])
        order = torch.tensor([3, 1, 0, 2])  # a hypothesis-level cache follows any reordering
        model.decoder.reorder_incremental_state_scripting(state, order)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        step, _ = model.decoder(prev[order, :4], encoder_out, incremental_state=state)
        full, _ = model.decoder(prev[order, :4], encoder_out)
    torch.testing.assert_close(step[:, 0], full[:, -1])


