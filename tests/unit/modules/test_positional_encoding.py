"""Section 3.5 positional encodings against the formula written out element by element."""

import math

import pytest
import torch

from transformer_plugin.modules.positional_encoding import PositionalEncoding, sinusoid_table


@pytest.mark.parametrize("d_model", [8, 512])
def test_paper_table_equals_section_3_5(d_model):
    table = sinusoid_table(50, d_model, "paper")
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_fairseq_variant_equals_fairseq_module():
    from fairseq.modules import SinusoidalPositionalEmbedding

    d_model, pad = 16, 1
    theirs = SinusoidalPositionalEmbedding(d_model, pad, init_size=40)
    ours = PositionalEncoding(30, d_model, pad, variant="fairseq")
    tokens = torch.tensor([[pad, pad, 5, 6, 7], [4, 5, 6, 7, 8]])
    torch.testing.assert_close(ours(tokens), theirs(tokens), rtol=0, atol=0)
    assert not torch.allclose(sinusoid_table(30, d_model, "paper"), sinusoid_table(30, d_model, "fairseq"))


def test_positions_skip_padding_and_padding_is_zero():
    pe = PositionalEncoding(20, 8, padding_idx=1)
    tokens = torch.tensor([[1, 1, 9, 9, 2], [9, 9, 9, 9, 2]])  # left-padded sentence 0
    out = pe(tokens)
    table = sinusoid_table(20, 8)
    assert torch.all(out[0, :2] == 0)
    torch.testing.assert_close(out[0, 2:], table[:3])
    torch.testing.assert_close(out[1], table[:5])
    # incremental decoding: only the newest position
    torch.testing.assert_close(pe(tokens[1:], incremental=True), table[4:5].unsqueeze(0))


def test_sinusoids_extrapolate_but_learned_positions_refuse():
    tokens = torch.full((1, 12), 5)
    sinus = PositionalEncoding(8, 8, padding_idx=1)
    torch.testing.assert_close(sinus(tokens)[0], sinusoid_table(12, 8))
    learned = PositionalEncoding(8, 8, padding_idx=1, learned=True)
    with pytest.raises(ValueError, match="max-source-positions"):
        learned(tokens)


def test_the_sinusoid_table_grows_when_a_sentence_needs_it():
    """A model given 100,000 positions (parallel_text.sh's generation, so that any test line is translated)
    holds 1,024 rows until a longer sentence comes; the rows it grows are the sinusoids, in the table's dtype."""
    pe = PositionalEncoding(100_000, 16, 1, variant="fairseq")
    assert pe.table.size(0) == 1024 + pe.offset
    pe = pe.to(torch.bfloat16)
    tokens = torch.full((1, 1500), 5)
    out = pe(tokens)
    assert pe.table.size(0) == 1500 + pe.offset and pe.table.dtype == torch.bfloat16 and out.dtype == torch.bfloat16
    expected = sinusoid_table(1500 + pe.offset, 16, "fairseq")[pe.offset :].to(torch.bfloat16)
    assert torch.equal(out[0], expected)
    assert torch.equal(pe.sinusoids(10), expected[:10])  # what the CTranslate2 export reads
