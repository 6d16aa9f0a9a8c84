"""vaswani-import-m2m100 (transformer_plugin_cli/serving/import_m2m100.py): NLLB-200 and M2M100 models built with
transformers in their shapes, random weights and small widths, imported exactly: the same log-probabilities, the same
greedy translations as transformers' generate with forced_bos_token_id, the same token ids as their tokenizers."""

import json

import pytest
import torch
from helpers import M2M100_CODES, NLLB_CODES, m2m100_directory

from transformer_plugin_cli.serving import import_m2m100

SENTENCES = ["abc de fgh", "hh ab", "a b c d e f g h gab"]


@pytest.fixture(scope="module", params=["nllb", "m2m100"])
def imported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    theirs, tokenizer = m2m100_directory(root / "hf", request.param, safetensors=request.param == "nllb")
    path, flags = import_m2m100.import_m2m100(str(root / "hf"), str(root / "out"), "en", "de")
    return request.param, root, theirs, tokenizer, path, flags


def load(out_dir):
    from fairseq import checkpoint_utils

    import transformer_plugin  # noqa: F401

    [model], cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [f"{out_dir}/checkpoint.pt"], arg_overrides={"data": str(out_dir)}
    )
    return model.eval(), task


def our_ids(out_dir, task, sentence, code):
    """The recipe's way: the sentencepiece model's pieces, the code before them, ids by the fairseq dictionary."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=f"{out_dir}/source.spm")
    pieces = [code] + processor.encode(sentence, out_type=str)
    return [task.source_dictionary.index(p) for p in pieces] + [task.source_dictionary.eos()]


def test_the_model_its_flags_and_its_languages_are_the_families(imported):
    family, root, theirs, tokenizer, path, flags = imported
    for flag in ("--normalize-before", "--share-all-embeddings", "relu", "fairseq"):
        assert flag in flags
    languages = json.loads((root / "out" / "languages.json").read_text())
    codes = NLLB_CODES if family == "nllb" else M2M100_CODES
    assert languages["family"] == family and set(codes) <= set(languages["codes"])
    assert (languages["source"]["code"], languages["target"]["code"]) == (
        ("eng_Latn", "deu_Latn") if family == "nllb" else ("__en__", "__de__")
    )
    assert (root / "out" / "source.spm").read_bytes() == (root / "hf" / "sentencepiece.bpe.model").read_bytes()
    assert (root / "out" / "tokenizer" / "tokenizer_config.json").exists()


def test_log_probabilities_and_token_ids_are_transformers(imported):
    family, root, theirs, tokenizer, path, _ = imported
    ours, task = load(root / "out")
    languages = json.loads((root / "out" / "languages.json").read_text())
    src, tgt = languages["source"]["code"], languages["target"]["code"]
    tokens = [task.source_dictionary[i] for i in range(len(task.source_dictionary))]
    assert import_m2m100.check_equivalent(ours, theirs, tokens.index(src), tokens.index(tgt), 1e-5) <= 1e-5
    tokenizer.src_lang = src if family == "nllb" else src.strip("_")  # M2M100Tokenizer takes "en", not "__en__"
    for sentence in SENTENCES:  # the tokenizer's ids are the dictionary's, the code first and </s> last
        assert tokenizer(sentence).input_ids == our_ids(root / "out", task, sentence, src)


def test_greedy_translations_are_transformers_with_the_target_code_forced(imported):
    from fairseq.sequence_generator import SequenceGenerator

    family, root, theirs, tokenizer, path, _ = imported
    ours, task = load(root / "out")
    languages = json.loads((root / "out" / "languages.json").read_text())
    src, tgt = languages["source"]["code"], languages["target"]["code"]
    tgt_id = task.target_dictionary.index(tgt)
    generator = SequenceGenerator([ours], task.target_dictionary, beam_size=1, max_len_a=0, max_len_b=20)
    for sentence in SENTENCES:
        ids = our_ids(root / "out", task, sentence, src)
        sample = {"net_input": {"src_tokens": torch.tensor([ids]), "src_lengths": torch.tensor([len(ids)])}}
        with torch.no_grad():
            fairseq_out = generator.generate([ours], sample, prefix_tokens=torch.tensor([[tgt_id]]))[0][0]["tokens"]
            hf_out = theirs.generate(
                torch.tensor([ids]),
                forced_bos_token_id=tgt_id,
                num_beams=1,
                do_sample=False,
                max_new_tokens=20,
                bad_words_ids=[[1]],  # fairseq never generates <pad>
            )[0]
        hf = hf_out.tolist()[1:]  # after the decoder's start, </s>: the code, the pieces, </s> where it ended
        fs = fairseq_out.tolist()
        assert hf[0] == fs[0] == tgt_id
        n = min(len(hf), len(fs)) - 1  # fairseq ends every hypothesis with </s> at its bound; transformers does not
        assert n >= 3 and hf[:n] == fs[:n], (sentence, hf, fs)


def test_pytorch_model_bin_and_codes_of_other_names_are_imported(tmp_path):
    codes = ("spa_Latn", "ita_Latn", "swh_Latn")
    m2m100_directory(tmp_path / "hf", "nllb", codes=codes, safetensors=False, seed=3, languages=codes[:2])
    assert (tmp_path / "hf" / "pytorch_model.bin").exists()
    import_m2m100.import_m2m100(str(tmp_path / "hf"), str(tmp_path / "out"), "es", "sw")
    languages = json.loads((tmp_path / "out" / "languages.json").read_text())
    assert (languages["source"]["code"], languages["target"]["code"]) == ("spa_Latn", "swh_Latn")


@pytest.mark.parametrize(
    "lang, given, message",
    [
        ("zh", None, r"several codes for 'zh' \(zho_Hans, zho_Hant\): name one with --source-code"),
        ("ja", None, r"no language code for 'ja' among its 5 \(eng_Latn, deu_Latn, fra_Latn, zho_Hans, zho_Hant\)"),
        ("zh", "yue_Hant", r"no language code 'yue_Hant'"),
    ],
)
def test_a_language_the_model_has_no_one_code_for_is_refused_naming_the_codes(tmp_path, lang, given, message):
    m2m100_directory(tmp_path / "hf", "nllb")
    with pytest.raises(import_m2m100.M2M100ImportError, match=message):
        import_m2m100.import_m2m100(str(tmp_path / "hf"), str(tmp_path / "out"), lang, "de", source_code=given)
    import_m2m100.import_m2m100(str(tmp_path / "hf"), str(tmp_path / "out"), "zh", "de", source_code="zho_Hant")
    assert json.loads((tmp_path / "out" / "languages.json").read_text())["source"]["code"] == "zho_Hant"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "nllb_moe"}, r"model_type 'nllb_moe', not 'm2m_100' \(NLLB's mixture of experts"),
        ({"activation_function": "gelu"}, r"activation_function 'gelu': relu only"),
        ({"scale_embedding": False}, r"scale_embedding false"),
        ({"decoder_ffn_dim": 128}, r"encoder_ffn_dim 64 and decoder_ffn_dim 128"),
        ({"vocab_size": 16}, r"the tokenizer has ids up to \d+, the model 16 embedding rows"),
    ],
)
def test_what_the_model_cannot_hold_is_refused_naming_the_file(tmp_path, change, message):
    m2m100_directory(tmp_path / "hf", "nllb")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(import_m2m100.M2M100ImportError, match=message) as e:
        import_m2m100.import_m2m100(str(tmp_path / "hf"), str(tmp_path / "out"), "en", "de")
    assert str(tmp_path / "hf") in str(e.value)
    assert not (tmp_path / "out").exists()


def test_the_command_says_what_it_imported_and_refuses_a_missing_sentencepiece_model(tmp_path, capsys):
    m2m100_directory(tmp_path / "hf", "m2m100")
    argv = [str(tmp_path / "hf"), str(tmp_path / "out"), "--source-lang", "de", "--target-lang", "en"]
    assert import_m2m100.main(argv) == 0
    assert "(m2m100: __de__ -> __en__)" in capsys.readouterr().out
    assert import_m2m100.main(argv) == 2 and "not empty (--force replaces it)" in capsys.readouterr().err
    (tmp_path / "hf" / "sentencepiece.bpe.model").unlink()
    assert import_m2m100.main([*argv, "--force"]) == 2
    assert "sentencepiece.bpe.model: no such file" in capsys.readouterr().err


def test_exported_back_it_is_the_model_it_was_with_its_tokenizer(imported, tmp_path):
    """vaswani-export-hf --m2m100-tokenizer of the imported checkpoint: M2M100ForConditionalGeneration again, every
    weight the parent's, the tokenizer its own with the pair's codes, and the target's code forced in generate()."""
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration

    from transformer_plugin_cli.serving import export_transformers

    family, root, theirs, tokenizer, path, _ = imported
    argv = ["--model-path", path, "--data-dir", str(root / "out"), "--spm", str(root / "out" / "source.spm")]
    argv += ["--output-dir", str(tmp_path / "hf"), "--m2m100-tokenizer", str(root / "out" / "tokenizer")]
    assert export_transformers.main(argv) == 0
    back = M2M100ForConditionalGeneration.from_pretrained(str(tmp_path / "hf")).eval()
    original = theirs.state_dict()
    for name, weight in back.state_dict().items():
        if name in original:
            assert torch.equal(weight, original[name]), name
    languages = json.loads((root / "out" / "languages.json").read_text())
    src, tgt = languages["source"]["code"], languages["target"]["code"]
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert reloaded.src_lang == (src if family == "nllb" else src.strip("_"))
    batch = reloaded(SENTENCES, return_tensors="pt", padding=True)
    assert batch.input_ids[0, 0].item() == reloaded.convert_tokens_to_ids(src)
    with torch.no_grad():
        ours = back.generate(**batch, num_beams=1, max_new_tokens=12)
        original_out = theirs.generate(
            **batch,
            num_beams=1,
            max_new_tokens=12,
            forced_bos_token_id=reloaded.convert_tokens_to_ids(tgt),
            bad_words_ids=[[1]],
        )
    assert torch.equal(ours, original_out) and (ours[:, 1] == reloaded.convert_tokens_to_ids(tgt)).all()
    assert "forced_bos_token_id" in (tmp_path / "hf" / "generation_config.json").read_text()


def test_nllbs_two_hundred_codes_are_named_a_dozen_and_a_count():
    codes = [f"x{i:02d}_Latn" for i in range(202)]
    with pytest.raises(import_m2m100.M2M100ImportError, match=r"among its 202 \(x00_Latn, .*x11_Latn and 190 more\)"):
        import_m2m100.code_for("ja", None, codes, "nllb")


def test_a_model_of_another_shape_is_not_exported_as_m2m100_naming_the_flag():
    from argparse import Namespace

    from transformer_plugin_cli.serving.checkpoint import UnsupportedModelError
    from transformer_plugin_cli.serving.export_m2m100 import check_supported

    shape = dict(
        normalize_before=True,
        sinusoid_variant="fairseq",
        positional_encoding="sinusoidal",
        activation_fn="relu",
        share_all_embeddings=True,
        output_bias=False,
        decoder_start="eos",
        attention_heads=4,
        d_model=32,
        d_k=8,
        d_v=8,
    )
    check_supported(Namespace(**shape))
    for change, flag in (
        ({"normalize_before": False}, "--normalize-before"),
        ({"sinusoid_variant": "paper"}, "--sinusoid-variant fairseq"),
        ({"activation_fn": "swish"}, "--activation-fn relu"),
        ({"output_bias": True}, "no --output-bias"),
    ):
        with pytest.raises(UnsupportedModelError, match=flag):
            check_supported(Namespace(**{**shape, **change}))


def test_a_directory_the_import_wrote_is_a_parent_with_its_codes(imported, tmp_path):
    """INIT= naming vaswani-import-m2m100's OUT_DIR: the checkpoint and dictionaries as they are, the codes from its
    languages.json, the sentencepiece model beside them; a language it has no code for is refused naming that file."""
    from recipes.planner.parent import ParentError, read_parent

    family, root, *_ = imported
    found = read_parent(str(root / "out"), "en", "de", str(tmp_path)).assignments("en", "de")
    codes = ("eng_Latn", "deu_Latn") if family == "nllb" else ("__en__", "__de__")
    assert (found["PARENT_SRC_CODE"], found["PARENT_TGT_CODE"]) == codes and found["PARENT_TGT_TOKEN"] == ""
    assert found["PARENT_KIND"] == "fairseq" and found["PARENT_SRC_SPM"].endswith("out/source.spm")
    with pytest.raises(ParentError, match=r"languages\.json: .*no language code 'yue_Hant'"):
        read_parent(str(root / "out"), "en", "de", str(tmp_path), src_code="yue_Hant")


@pytest.mark.parametrize("program", ["import_m2m100", "import_marian"])
def test_a_directory_without_its_config_is_refused_naming_the_file(program, tmp_path, capsys):
    """Both imports read config.json through the BART family's reader (serving/bart_family.py): its refusal is each
    program's error, not a traceback."""
    import importlib

    main = importlib.import_module(f"transformer_plugin_cli.serving.{program}").main
    args = [str(tmp_path / "none"), str(tmp_path / "out"), "--source-lang", "en", "--target-lang", "de"]
    assert main(args) == 2
    assert f"vaswani-{program.replace('_', '-')}: error: {tmp_path / 'none' / 'config.json'}: no such file" in (
        capsys.readouterr().err
    )
