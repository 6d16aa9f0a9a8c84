"""The model's flags for how published MarianMT / OPUS-MT models differ from the paper: --activation-fn swish,
--output-bias, --decoder-start pad. Off by default: the paper's architectures and their parameters do not change."""

import pytest
import torch
import torch.nn.functional as F

from helpers import build_vaswani, random_batch
from transformer_plugin.modules.feed_forward import PositionwiseFeedForward


def count(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.kernel_free
@pytest.mark.parametrize("arch", ["vaswani_tiny", "vaswani_base", "vaswani_big"])
def test_the_papers_architectures_are_unchanged_by_default(dictionary, arch):
    model = build_vaswani(dictionary, arch)
    assert all(layer.ffn.activation is F.relu for layer in [*model.encoder.layers, *model.decoder.layers])
    assert model.decoder.output_bias is None and not model.decoder.embed.start_from_padding_row
    assert count(build_vaswani(dictionary, arch, output_bias=True)) == count(model) + len(dictionary)


def test_swish_is_x_times_sigmoid_x_in_place_of_max_0_x():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 16, activation="swish")
    x = torch.randn(3, 8)
    hidden = ffn.w_1(x)
    torch.testing.assert_close(ffn(x), ffn.w_2(hidden * torch.sigmoid(hidden)))
    ffn.activation = PositionwiseFeedForward(8, 16).activation
    torch.testing.assert_close(ffn(x), ffn.w_2(F.relu(hidden)))
    with pytest.raises(ValueError, match="--activation-fn gelu: choose from relu, swish"):
        PositionwiseFeedForward(8, 16, activation="gelu")


def test_the_output_bias_is_added_to_every_positions_logits_and_learned(dictionary):
    torch.manual_seed(0)
    model = build_vaswani(dictionary, output_bias=True, dropout=0.0).eval()
    src, src_lengths, prev = random_batch(dictionary)
    with torch.no_grad():
        before, _ = model(src, src_lengths, prev)
        model.decoder.output_bias.copy_(torch.randn(len(dictionary)))
        after, _ = model(src, src_lengths, prev)
    torch.testing.assert_close(after - before, model.decoder.output_bias.expand_as(after), atol=1e-5, rtol=0)
    assert "decoder.output_bias" in dict(model.named_parameters())


def test_decoding_starts_from_the_padding_rows_embedding(dictionary):
    """Under --decoder-start pad the first position is embedded with the padding row (MarianMT's <pad> start): the
    same outputs as a model that starts from </s> whose </s> row holds the padding row's values; every later
    position (a </s> among them) keeps its own row."""
    torch.manual_seed(0)
    untied = dict(
        share_all_embeddings=False, share_decoder_input_output_embed=False, dropout=0.0
    )  # </s>'s output row stays
    pad_start = build_vaswani(dictionary, decoder_start="pad", **untied).eval()
    with torch.no_grad():
        pad_start.decoder.embed.embed_tokens.weight[dictionary.pad()].normal_()  # a row that has drifted from zero
    eos_start = build_vaswani(dictionary, **untied).eval()
    eos_start.load_state_dict(pad_start.state_dict())
    src, src_lengths, prev = random_batch(dictionary)
    with torch.no_grad():
        ours, _ = pad_start(src, src_lengths, prev)
        unchanged, _ = eos_start(src, src_lengths, prev)
        assert not torch.allclose(ours[:, 0], unchanged[:, 0])
        # the same model whose </s> row is the padding row, and whose target holds no other </s>
        weight = eos_start.decoder.embed.embed_tokens.weight
        weight[dictionary.eos()] = weight[dictionary.pad()]
        later = prev[:, 1:]
        assert not later.eq(dictionary.eos()).any()
        expected, _ = eos_start(src, src_lengths, prev)
    real = prev.ne(dictionary.pad())
    torch.testing.assert_close(ours[real], expected[real])
