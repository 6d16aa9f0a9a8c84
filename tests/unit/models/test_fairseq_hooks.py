"""What fairseq's features ask of the model, in-process: activation checkpointing, --retain-dropout,
and fairseq's transformer flags refused with their reason (the features end to end, on trained
models: tests/integration/test_fairseq_features.py)."""

import pytest
import torch
from fairseq import options

from helpers import PLUGIN, build_vaswani, random_batch
from transformer_plugin.models.fairseq_transformer_flags import NOT_IN_THE_PAPER, RENAMED
from transformer_plugin.models.vaswani_transformer import dropouts_held_by
from transformer_plugin.modules.dropout import Dropout

ALL_DROPOUTS = dict(dropout=0.1, attention_dropout=0.1, activation_dropout=0.1)


def loss_and_saved_bytes(model, dictionary, seed=0):
    """A training step's loss, the bytes autograd keeps for the backward pass, and the gradients."""
    src, src_lengths, prev = random_batch(dictionary)
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    torch.manual_seed(seed)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits, _ = model(src, src_lengths, prev)
        loss = logits.float().logsumexp(-1).mean()
    loss.backward()
    return loss.item(), sum(saved), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_checkpoint_activations_recompute_each_layer_with_the_same_dropout(dictionary):
    """--checkpoint-activations: each layer keeps only its input in the forward pass and runs again in
    the backward pass, with the same dropout masks: the same loss and gradients with less saved."""
    torch.manual_seed(1)
    plain = build_vaswani(dictionary, **ALL_DROPOUTS).train()
    torch.manual_seed(1)
    checkpointed = build_vaswani(dictionary, checkpoint_activations=True, **ALL_DROPOUTS).train()
    runs = {layer: 0 for layer in [*checkpointed.encoder.layers, *checkpointed.decoder.layers]}
    for layer in runs:
        layer.ffn.register_forward_hook(lambda m, i, o, layer=layer: runs.__setitem__(layer, runs[layer] + 1))
    loss, plain_bytes, plain_grads = loss_and_saved_bytes(plain, dictionary)
    loss_ckpt, ckpt_bytes, ckpt_grads = loss_and_saved_bytes(checkpointed, dictionary)
    assert set(runs.values()) == {2}  # the forward pass, and its recomputation in the backward pass
    assert loss_ckpt == loss
    assert plain_grads.keys() == ckpt_grads.keys()
    for name in plain_grads:
        torch.testing.assert_close(ckpt_grads[name], plain_grads[name], rtol=0, atol=0, msg=name)
    assert ckpt_bytes < 0.5 * plain_bytes, (ckpt_bytes, plain_bytes)


def test_offload_activations_implies_checkpointing(dictionary):
    model = build_vaswani(dictionary, offload_activations=True)
    assert all(hasattr(layer, "precheckpoint_forward") for layer in [*model.encoder.layers, *model.decoder.layers])
    assert not any(hasattr(layer, "precheckpoint_forward") for layer in build_vaswani(dictionary).encoder.layers)


def outputs(model, dictionary):
    src, src_lengths, prev = random_batch(dictionary)
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        return encoder_out["encoder_out"][0], model.decoder(prev, encoder_out)[0]


def test_retain_dropout_keeps_dropout_after_eval(dictionary):
    """--retain-dropout: after eval(), two passes differ (Monte-Carlo dropout); without it they agree.
    --retain-dropout-modules keeps it only in the modules of the named classes."""
    model = build_vaswani(dictionary, **ALL_DROPOUTS).eval()
    first, second = outputs(model, dictionary), outputs(model, dictionary)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    model.make_generation_fast_(retain_dropout=True)
    assert all(not torch.equal(a, b) for a, b in zip(outputs(model, dictionary), outputs(model, dictionary)))

    model = build_vaswani(dictionary, **ALL_DROPOUTS).eval()
    model.make_generation_fast_(retain_dropout=True, retain_dropout_modules="['DecoderLayer']")  # as fairseq passes it
    (enc1, dec1), (enc2, dec2) = outputs(model, dictionary), outputs(model, dictionary)
    assert torch.equal(enc1, enc2) and not torch.equal(dec1, dec2)
    assert not model.training  # eval() itself is untouched


def test_dropouts_held_by(dictionary):
    model = build_vaswani(dictionary, **ALL_DROPOUTS)
    every = dropouts_held_by(model)
    assert len(every) == len([m for m in model.modules() if isinstance(m, Dropout)]) > 0
    decoder = dropouts_held_by(model, ["VaswaniDecoder"])
    assert set(decoder) == {m for m in model.decoder.modules() if isinstance(m, Dropout)}
    attention = dropouts_held_by(model, "MultiHeadAttention")
    assert set(attention) == {m.dropout for m in model.modules() if type(m).__name__ == "MultiHeadAttention"}
    assert set(dropouts_held_by(model, "EncoderLayer,DecoderLayer")) < set(every)
    with pytest.raises(ValueError, match=r"--retain-dropout-modules \['TransformerDecoderLayer'\].*DecoderLayer"):
        dropouts_held_by(model, ["TransformerDecoderLayer"])  # fairseq's name, not this model's


def parse_train_args(*flags):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["data", "--user-dir", PLUGIN, "--arch", "vaswani_tiny", *flags])


@pytest.mark.parametrize("flag", sorted(set(RENAMED) | set(NOT_IN_THE_PAPER)))
def test_fairseq_transformer_flags_are_refused_with_their_reason(flag, capsys):
    from transformer_plugin.models.fairseq_transformer_flags import SWITCHES

    value = [] if flag in SWITCHES else ["7"]
    with pytest.raises(SystemExit):
        parse_train_args(flag, *value)
    error = capsys.readouterr().err
    assert f"argument {flag}: " in error
    if flag in RENAMED:
        assert RENAMED[flag] in error
    else:
        assert NOT_IN_THE_PAPER[flag][0] in error


def test_values_that_change_nothing_are_accepted():
    args = parse_train_args("--encoder-layerdrop", "0", "--activation-fn", "relu", "--quant-noise-pq", "0.0")
    assert args.arch == "vaswani_tiny" and not hasattr(args, "refused_encoder_layerdrop")
