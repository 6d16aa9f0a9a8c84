"""serving/marian.py: a model with the flags of published MarianMT models (--activation-fn swish, --output-bias,
--decoder-start pad) maps onto MarianMTModel computing the same function, as the paper's model does (CTranslate2's
export of them: tests/integration/test_cli.py)."""

import pytest
import torch

from helpers import build_vaswani, make_dictionary, vaswani_args

transformers = pytest.importorskip("transformers")

from transformer_plugin_cli.serving import marian  # noqa: E402


def mapped(model, cfg, dictionary):
    perm = marian.paper_to_marian(cfg.d_model)
    config = marian.marian_config(cfg, dictionary, dictionary)
    their = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        their.load_state_dict(marian.marian_state_dict(model, perm), strict=False)
    return their, perm


@pytest.mark.parametrize("flags", [{}, dict(activation_fn="swish", output_bias=True, decoder_start="pad")])
def test_a_model_with_marians_flags_exports_to_the_same_function(flags):
    torch.manual_seed(0)
    dictionary = make_dictionary(60)
    model = build_vaswani(dictionary, dropout=0.0, **flags).eval()
    cfg = vaswani_args("vaswani_tiny", share_all_embeddings=True, dropout=0.0, **flags)
    with torch.no_grad():  # what a published model has: a non-zero output bias and padding row
        if model.decoder.output_bias is not None:
            model.decoder.output_bias.normal_()
        model.decoder.embed.embed_tokens.weight[dictionary.pad()].normal_(std=0.1)
    their, perm = mapped(model, cfg, dictionary)
    assert their.config.activation_function == flags.get("activation_fn", "relu")
    assert their.config.decoder_start_token_id == (dictionary.pad() if flags else dictionary.eos())
    assert marian.check_equivalent(model, their, dictionary, dictionary, perm, tolerance=1e-5) <= 1e-5
