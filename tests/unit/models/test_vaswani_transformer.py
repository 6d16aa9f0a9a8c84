"""The model: parameter counts of Table 3, incremental decoding, configuration errors."""

import pytest
import torch

from helpers import build_vaswani, make_dictionary, random_batch, vaswani_args
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


@pytest.mark.kernel_free
@pytest.mark.parametrize("row", list(TABLE_3))
def test_table3_parameter_counts(vocab_37k, row):
    flags, paper, tolerance = TABLE_3[row]
    model = build_vaswani(vocab_37k, arch="vaswani_base", **flags)
    n = count(model)
    dims = {"N": flags.get("encoder_layers", 6), **{k: v for k, v in flags.items() if not k.endswith("layers")}}
    assert n == closed_form(**dims)
    assert abs(n / 1e6 - paper) / paper <= tolerance, f"{row}: {n / 1e6:.1f}M vs paper {paper}M"


@pytest.mark.kernel_free
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
        dict(activation_fn="swish", output_bias=True, decoder_start="pad"),  # a published MarianMT model's
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
    assert none["attn"] is None  # none computed unless asked for
    model.make_generation_fast_(need_attn=True)  # what fairseq-generate --print-alignment asks
    with torch.no_grad():
        _, asked = model.decoder(prev, encoder_out)
    torch.testing.assert_close(asked["attn"][0], averaged["attn"][0])  # the last layer's, averaged over heads
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
    from helpers import DummyTask

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


def _left_padded(tokens, pad):
    """The rows of a right-padded (B, T) batch moved to the right end."""
    out = torch.full_like(tokens, pad)
    for i, row in enumerate(tokens):
        n = int(row.ne(pad).sum())
        out[i, tokens.size(1) - n :] = row[:n]
    return out


@pytest.mark.parametrize("target_padding", ["right", "left"])
def test_a_sentence_does_not_depend_on_the_padding_of_its_batch(dictionary, target_padding):
    """Each sentence's decoder outputs in a padded batch equal its outputs alone. With fairseq's
    right-padded targets no self-attention padding mask is built (the causal mask hides the padding
    from every real token); targets padded on the left still get one."""
    torch.manual_seed(0)
    model = build_vaswani(dictionary).eval()
    pad = dictionary.pad()
    src, src_lengths, prev = random_batch(dictionary, batch_size=4, src_len=8, tgt_len=7)
    if target_padding == "left":
        prev = _left_padded(prev, pad)
    with torch.no_grad():
        batched, _ = model(src, src_lengths, prev)
        for i in range(src.size(0)):
            s, t = src[i][src[i].ne(pad)][None], prev[i].ne(pad)
            alone, _ = model(s, src_lengths[i : i + 1], prev[i][t][None])
            torch.testing.assert_close(batched[i][t], alone[0], atol=1e-5, rtol=1e-4)


def test_right_padded_targets_train_as_with_a_padding_mask(dictionary, monkeypatch):
    """Without the self-attention padding mask (right-padded targets), loss and gradients equal those
    with it: only outputs at padding change, and the loss ignores padding."""
    from transformer_plugin.models import vaswani_transformer

    pad = dictionary.pad()
    src, src_lengths, prev = random_batch(dictionary, batch_size=4, src_len=8, tgt_len=7)
    target = torch.cat([prev[:, 1:], torch.full_like(prev[:, :1], pad)], dim=1)
    results = []
    for force_mask in (False, True):
        if force_mask:
            monkeypatch.setattr(vaswani_transformer, "padding_before_tokens", lambda padding: bool(padding.any()))
        torch.manual_seed(0)
        model = build_vaswani(dictionary, dropout=0.0).train()
        logits, _ = model(src, src_lengths, prev)
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=pad, reduction="sum")
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (loss, grads), (masked_loss, masked_grads) = results
    torch.testing.assert_close(loss, masked_loss)
    for name in grads:
        torch.testing.assert_close(grads[name], masked_grads[name], atol=1e-6, rtol=1e-4, msg=name)
