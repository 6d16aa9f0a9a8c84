"""vaswani-import-marian: MarianMT models built with transformers in the shape of OPUS-MT's (swish, tied embeddings,
<pad> last and the start of decoding, a non-zero final_logits_bias, LayerNorms and the padding row randomised so
that a wrong mapping shows), imported and held to transformers' own log-probabilities; what cannot be held is
refused by name."""

import json
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformer_plugin_cli.serving import import_marian  # noqa: E402

from helpers import MARIAN_V as V, marian_directory as marian_dir, marian_sentencepiece  # noqa: E402


def load(out):
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(out / "checkpoint.pt")], arg_overrides={"data": str(out)}
    )
    return models[0].eval(), task


def test_an_opus_mt_shaped_model_is_held_exactly(tmp_path):
    theirs = marian_dir(tmp_path / "hf")
    path, flags = import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "out"))
    assert " ".join(flags) == (
        "--arch vaswani_base --encoder-layers 2 --decoder-layers 2 --d-model 32 --d-ff 64 --attention-heads 4"
        " --dropout 0.1 --attention-dropout 0.0 --activation-dropout 0.0 --activation-fn swish --output-bias"
        " --max-source-positions 64 --max-target-positions 64 --decoder-start pad --share-all-embeddings"
    )
    assert sorted(os.listdir(tmp_path / "out")) == [
        "checkpoint.pt",
        "dict.de.txt",
        "dict.en.txt",
        "source.spm",
        "target.spm",
    ]
    ours, task = load(tmp_path / "out")
    assert path == str(tmp_path / "out" / "checkpoint.pt")
    pieces = marian_sentencepiece()[1]
    assert task.source_dictionary.symbols[4:] == pieces and len(task.source_dictionary) == V + 1  # and fairseq's <s>
    rows = [-1, V - 1, 0, 1] + list(range(2, V - 1))
    assert import_marian.check_equivalent(ours, theirs, rows, rows, tolerance=1e-5) <= 1e-5


def test_separate_vocabularies_are_held_exactly(tmp_path):
    theirs = marian_dir(tmp_path / "hf", separate=True, seed=1)
    import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "out"))
    ours, task = load(tmp_path / "out")
    pieces = marian_sentencepiece()[1]
    assert task.target_dictionary.symbols[4:] == pieces[::-1] and task.source_dictionary.symbols[4:] == pieces
    assert ours.encoder.embed.embed_tokens is not ours.decoder.embed.embed_tokens
    rows = [-1, V - 1, 0, 1] + list(range(2, V - 1))
    assert import_marian.check_equivalent(ours, theirs, rows, rows, tolerance=1e-5) <= 1e-5


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(activation_function="gelu"), "activation_function 'gelu': relu or swish only"),
        (dict(scale_embedding=False), "scale_embedding false"),
        (dict(decoder_ffn_dim=32), "encoder_ffn_dim 64 and decoder_ffn_dim 32: one value for both sides"),
        (dict(normalize_before=True), "normalize_before true: MarianMT"),
    ],
)
def test_what_cannot_be_held_is_refused_naming_the_setting(tmp_path, change, message):
    marian_dir(tmp_path / "hf", **change)
    with pytest.raises(import_marian.MarianImportError, match=message):
        import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_missing_file_or_a_wrong_vocabulary_is_named(tmp_path, capsys):
    marian_dir(tmp_path / "hf")
    os.remove(tmp_path / "hf" / "target.spm")
    assert import_marian.main([str(tmp_path / "hf"), str(tmp_path / "out")]) == 2
    assert f"{tmp_path / 'hf' / 'target.spm'}: no such file" in capsys.readouterr().err
    (tmp_path / "hf" / "target.spm").write_bytes(b"x")
    (tmp_path / "hf" / "vocab.json").write_text(json.dumps({"</s>": 0, "<unk>": 1, "<pad>": V - 1}))
    with pytest.raises(import_marian.MarianImportError, match=r"vocab\.json: 3 pieces for 40 embedding rows"):
        import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "out"))


def test_a_model_of_this_project_exported_and_imported_again_has_identical_tensors(tmp_path):
    """The paper's model (relu, no output bias, decoding from </s>) through the HF export's mapping and back: every
    tensor as it was; the import adds the output bias, MarianMT's final_logits_bias, which the export wrote as 0."""
    from helpers import build_vaswani, make_dictionary, vaswani_args
    from transformer_plugin_cli.serving import marian

    torch.manual_seed(3)
    dictionary = make_dictionary(30)
    model = build_vaswani(dictionary, dropout=0.0, max_source_positions=64, max_target_positions=64).eval()

    cfg = vaswani_args(
        "vaswani_tiny", share_all_embeddings=True, dropout=0.0, max_source_positions=64, max_target_positions=64
    )
    hf = transformers.MarianMTModel(marian.marian_config(cfg, dictionary, dictionary)).eval()
    with torch.no_grad():
        hf.load_state_dict(marian.marian_state_dict(model, marian.paper_to_marian(cfg.d_model)), strict=False)
    hf.save_pretrained(tmp_path / "hf")
    with open(tmp_path / "hf" / "vocab.json", "w") as f:
        json.dump({s: i for i, s in enumerate(dictionary.symbols)}, f)  # as the export writes it
    for name in ("source.spm", "target.spm"):
        (tmp_path / "hf" / name).write_bytes(b"a sentencepiece model, not read by the import")
    import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "out"), "en", "de")
    again, task = load(tmp_path / "out")
    assert task.source_dictionary.symbols == dictionary.symbols
    before, after = model.state_dict(), again.state_dict()
    assert set(after) - set(before) == {"decoder.output_bias"} and not after["decoder.output_bias"].any()
    for name, tensor in before.items():
        assert torch.equal(after[name], tensor), name


@pytest.mark.parametrize("beam", [1, 4])
def test_fairseqs_beam_search_on_the_import_gives_transformers_generate(tmp_path, beam):
    """Greedy and beam 4 over 100 ragged sentences: fairseq's SequenceGenerator on the imported model and MarianMT's
    generate() with the same bound (fairseq's --max-len-b 12 is max_new_tokens 13, </s> forced at the end) give the
    same hypotheses, token for token."""
    from argparse import Namespace

    from transformer_plugin_cli.serving.export_transformers import generation_config

    theirs = marian_dir(tmp_path / "hf", seed=2)
    import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "out"))
    ours, task = load(tmp_path / "out")
    rows = [-1, V - 1, 0, 1] + list(range(2, V - 1))
    to_fairseq = {m: f for f, m in enumerate(rows) if m >= 0}
    g = torch.Generator().manual_seed(4)
    lengths = torch.randint(2, 15, (100,), generator=g)
    words = [torch.randint(2, V - 1, (int(n),), generator=g).tolist() + [0] for n in lengths]  # pieces, then </s>
    width = max(map(len, words))
    their_src = torch.tensor([w + [V - 1] * (width - len(w)) for w in words])
    our_src = torch.tensor([[1] * (width - len(w)) + [to_fairseq[t] for t in w] for w in words])
    config = generation_config(theirs.config, beam, 1.0, 13)
    with torch.no_grad():
        generated = theirs.generate(
            input_ids=their_src, attention_mask=their_src.ne(V - 1).long(), generation_config=config
        )
        generator = task.build_generator([ours], Namespace(beam=beam, max_len_a=0, max_len_b=12, min_len=1, lenpen=1.0))
        hypotheses = generator.generate([ours], {"net_input": {"src_tokens": our_src, "src_lengths": lengths + 1}})
    for i in range(100):
        expected = [to_fairseq[int(t)] for t in generated[i, 1:] if int(t) != V - 1]  # after the start, no padding
        assert hypotheses[i][0]["tokens"].tolist() == expected, i
