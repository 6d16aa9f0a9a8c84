"""transformer_plugin_cli.tools.convert: a fairseq transformer checkpoint becomes a vaswani_transformer one."""

import subprocess
import sys
from argparse import Namespace

import pytest
import torch

from helpers import DummyTask, random_batch
from transformer_plugin.patches.checkpoint_allowlist import load_checked
from transformer_plugin_cli.tools.convert import config_from_fairseq_transformer, convert_checkpoint, main
from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel


def fairseq_cfg(**overrides):
    cfg = dict(
        _name="transformer",
        encoder_embed_dim=32,
        decoder_embed_dim=32,
        encoder_ffn_embed_dim=64,
        decoder_ffn_embed_dim=64,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_layers=2,
        decoder_layers=2,
        share_all_embeddings=True,
        dropout=0.0,
        max_source_positions=64,
        max_target_positions=64,
    )
    cfg.update(overrides)
    return cfg


def test_converted_checkpoint_builds_and_computes_the_same(dictionary, tmp_path):
    from fairseq.models.transformer import TransformerModel, base_architecture

    args = Namespace(arch="transformer", **fairseq_cfg())
    base_architecture(args)
    torch.manual_seed(0)
    theirs = TransformerModel.build_model(args, DummyTask(dictionary)).eval()
    path = tmp_path / "fairseq.pt"
    torch.save({"cfg": {"model": dict(vars(args))}, "model": theirs.state_dict(), "last_optimizer_state": {}}, path)
    out = tmp_path / "vaswani.pt"
    assert main([str(path), str(out)]) == 0
    state = load_checked(out)
    assert "last_optimizer_state" not in state
    model_cfg = Namespace(**{k: v for k, v in state["cfg"]["model"].items() if k != "_name"})
    ours = VaswaniTransformerModel.build_model(model_cfg, DummyTask(dictionary)).eval()
    ours.load_state_dict(state["model"], strict=True)
    src, src_lengths, prev = random_batch(dictionary)
    real = prev.ne(dictionary.pad())  # padding positions' outputs differ and are never used
    with torch.no_grad():
        torch.testing.assert_close(ours(src, src_lengths, prev)[0][real], theirs(src, src_lengths, prev)[0][real])


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(encoder_normalize_before=True), "encoder_normalize_before"),
        (dict(encoder_learned_pos=True), "encoder_learned_pos"),
        (dict(activation_fn="gelu"), "activation_fn"),
        (dict(decoder_embed_dim=64), "decoder_embed_dim"),
    ],
)
def test_other_fairseq_transformers_are_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        config_from_fairseq_transformer(fairseq_cfg(**overrides))


def test_checkpoint_without_cfg_is_refused():
    with pytest.raises(ValueError, match="cfg"):
        convert_checkpoint({"args": Namespace(arch="transformer"), "model": {}})


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_plugin_cli.tools.convert", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "vaswani_transformer" in proc.stdout
