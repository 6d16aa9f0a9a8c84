"""INIT='s parent (recipes.planner.parent), read and checked before any work: the recipe's settings
from a MarianMT directory and from one vaswani-import-marian wrote; every input that does not fit refused, naming
the file. (Through the recipe: tests/integration/test_parallel_text_init.py.)"""

import json
import os
import shutil

import pytest

pytest.importorskip("transformers")

from transformer_plugin_cli.serving import import_marian
from recipes.planner.parent import ParentError, main, read_parent

from helpers import marian_directory


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """(a MarianMT directory in OPUS-MT's shape, the same imported)."""
    root = tmp_path_factory.mktemp("parent")
    marian_directory(root / "hf", seed=3)
    import_marian.import_marian(str(root / "hf"), str(root / "imported"))
    return root / "hf", root / "imported"


def test_a_marian_directory_gives_its_model_its_pieces_and_an_import_into_work(parent, tmp_path):
    found = read_parent(str(parent[0]), "en", "de", str(tmp_path / "work")).assignments("en", "de")
    assert found["PARENT_KIND"] == "marian" and found["PARENT_DIR"] == str(tmp_path / "work" / "parent")
    assert found["PARENT_SRC_DICT"] == str(tmp_path / "work" / "parent" / "dict.en.txt")
    assert (found["PARENT_SRC_SPM"], found["PARENT_TGT_SPM"]) == (
        str(parent[0] / "source.spm"),
        str(parent[0] / "target.spm"),
    )
    assert found["PARENT_MODEL_FLAGS"] == (
        "--encoder-layers 2 --decoder-layers 2 --d-model 32 --d-ff 64 --attention-heads 4 "
        "--attention-dropout 0.0 --activation-dropout 0.0 --activation-fn swish --output-bias "
        "--max-source-positions 64 --max-target-positions 64 --decoder-start pad"
    )
    assert (found["PARENT_DROPOUT"], found["PARENT_SHARE"], found["PARENT_VOCAB_SIZE"]) == (
        "0.1",
        "--share-all-embeddings",
        "40",
    )


def test_an_imported_directory_gives_the_model_its_checkpoint_holds(parent, tmp_path):
    """Its flags are the checkpoint's every model setting, so that the architecture's defaults play no part; the
    fine-tuned model is the parent's (the same flags the import prints, and the dataclass's own settings)."""
    imported = read_parent(str(parent[1]), "en", "de", str(tmp_path)).assignments("en", "de")
    marian = read_parent(str(parent[0]), "en", "de", str(tmp_path)).assignments("en", "de")
    assert imported["PARENT_KIND"] == "fairseq" and imported["PARENT_CHECKPOINT"] == str(parent[1] / "checkpoint.pt")
    assert set(marian["PARENT_MODEL_FLAGS"].split(" --")) <= set(imported["PARENT_MODEL_FLAGS"].split(" --"))
    assert "--positional-encoding sinusoidal --sinusoid-variant paper" in imported["PARENT_MODEL_FLAGS"]
    assert imported["PARENT_VOCAB_SIZE"] == "41"  # fairseq's <s> beside MarianMT's 40


def test_the_command_prints_the_parent_as_json_or_one_error(parent, tmp_path, capsys):
    assert main(["settings", "--init", str(parent[0]), "--src", "en", "--tgt", "de", "--work", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["PARENT_SUMMARY"] == (
        "N=2+2, d_model 32, d_ff 64, h 4, P_drop 0.1, swish, output bias, shared embeddings, "
        "decoding from <pad>, 40 target pieces"
    )
    assert (
        main(["settings", "--init", str(tmp_path / "nowhere"), "--src", "en", "--tgt", "de", "--work", str(tmp_path)])
        == 2
    )
    assert capsys.readouterr().err == f"INIT: INIT={tmp_path / 'nowhere'}: no such directory\n"


def copy_without(source, destination, name):
    shutil.copytree(source, destination)
    os.remove(destination / name)
    return destination


def edited(source, destination, name, edit):
    shutil.copytree(source, destination)
    (destination / name).write_text(edit((destination / name).read_text()))
    return destination


def replaced(source, destination, name, content: bytes):
    shutil.copytree(source, destination)
    (destination / name).write_bytes(content)
    return destination


def reversed_lines(text):
    return "".join(text.splitlines(keepends=True)[::-1])


REFUSED = {
    "no directory": (lambda p, t: t / "nowhere", "en-de", "INIT={dir}: no such directory"),
    "neither kind": (
        lambda p, t: (t / "empty").mkdir() or t / "empty",
        "en-de",
        "INIT={dir}: neither a MarianMT, NLLB-200 or M2M100 model (config.json, its weights, its tokenizer's files) "
        "nor a directory vaswani-import-marian or vaswani-import-m2m100 wrote (checkpoint.pt, dict.SRC.txt, "
        "dict.TGT.txt)",
    ),
    "no source sentencepiece model": (
        lambda p, t: copy_without(p[0], t / "hf", "source.spm"),
        "en-de",
        "{dir}/source.spm: no such file (the parent's sentencepiece model",
    ),
    "no target sentencepiece model, imported": (
        lambda p, t: copy_without(p[1], t / "imported", "target.spm"),
        "en-de",
        "{dir}/target.spm: no such file",
    ),
    "no weights": (
        lambda p, t: copy_without(p[0], t / "hf", "model.safetensors"),
        "en-de",
        "{dir}: no model.safetensors or pytorch_model.bin",
    ),
    "no vocabulary": (
        lambda p, t: copy_without(p[0], t / "hf", "vocab.json"),
        "en-de",
        "{dir}/vocab.json: no such file",
    ),
    "another model": (
        lambda p, t: edited(
            p[0], t / "hf", "config.json", lambda c: json.dumps({**json.loads(c), "model_type": "bart"})
        ),
        "en-de",
        "{dir}/config.json: model_type 'bart', not 'marian'",
    ),
    "pre-norm": (
        lambda p, t: edited(
            p[0], t / "hf", "config.json", lambda c: json.dumps({**json.loads(c), "normalize_before": True})
        ),
        "en-de",
        "{dir}/config.json: normalize_before true",
    ),
    "another pair": (
        lambda p, t: p[0],
        "de-en",
        "{dir}/tokenizer_config.json: the parent translates en-de, not de-en (SRC, TGT)",
    ),
    "another pair, imported": (
        lambda p, t: p[1],
        "de-en",
        "{dir}/checkpoint.pt: the parent translates en-de, not de-en (SRC, TGT)",
    ),
    "no dictionary": (
        lambda p, t: copy_without(p[1], t / "imported", "dict.de.txt"),
        "en-de",
        "{dir}/dict.de.txt: no such file (the parent's dictionary for de; {dir} has dict.en.txt)",
    ),
    "a dictionary of another size": (
        lambda p, t: edited(p[1], t / "imported", "dict.de.txt", lambda d: d.split("\n", 1)[1]),
        "en-de",
        "{dir}/dict.de.txt: 40 entries, but {dir}/checkpoint.pt has 41 embedding rows for de: "
        "not the dictionary this checkpoint was trained with",
    ),
    "another dictionary of that size": (
        lambda p, t: edited(p[1], t / "imported", "dict.de.txt", reversed_lines),
        "en-de",
        "{dir}/dict.de.txt: not the dictionary {dir}/checkpoint.pt was imported with",
    ),
    "not a checkpoint": (
        lambda p, t: replaced(p[1], t / "imported", "checkpoint.pt", b"text"),
        "en-de",
        "{dir}/checkpoint.pt: not a fairseq checkpoint this project wrote",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_does_not_fit_is_refused_naming_the_file(case, parent, tmp_path):
    make, pair, message = REFUSED[case]
    init = make(parent, tmp_path)
    with pytest.raises(ParentError) as refused:
        read_parent(str(init), *pair.split("-"), str(tmp_path / "work"))
    assert message.format(dir=init) in str(refused.value)


MULTILINGUAL = (">>deu<<", ">>fra<<", ">>nld<<")


@pytest.mark.parametrize(
    "languages,src,tgt,token",
    [
        (("eng", "deu"), "en", "de", ""),  # ISO 639-3 in the parent, 639-1 in SRC and TGT
        (("en", "de"), "eng", "deu", ""),  # and the reverse
        (("eng", "mul"), "en", "de", ">>deu<<"),  # a multilingual parent: the token its vocabulary has for TGT
        (("en", "gem"), "en", "nl", ">>nld<<"),  # an ISO 639-5 family
        (("eng", "ROMANCE"), "en", "fra", ">>fra<<"),
    ],
)
def test_a_parents_codes_and_groups_are_taken_for_src_and_tgt(tmp_path, languages, src, tgt, token):
    marian_directory(tmp_path / "hf", language_tokens=MULTILINGUAL, languages=languages)
    found = read_parent(str(tmp_path / "hf"), src, tgt, str(tmp_path / "work")).assignments(src, tgt)
    assert found["PARENT_TGT_TOKEN"] == token


@pytest.mark.parametrize(
    "languages,tgt,tgt_token,message",
    [
        (("eng", "mul"), "it", "", "of the language tokens of {dir}/vocab.json (>>deu<<, >>fra<<, >>nld<<) none names"),
        (("eng", "mul"), "de", ">>ita<<", "{dir}/vocab.json: no piece >>ita<< (TGT_TOKEN)"),
        (("eng", "deu"), "fr", "", "{dir}/tokenizer_config.json: the parent translates eng-deu, not en-fr"),
    ],
)
def test_a_multilingual_parent_without_a_token_for_tgt_is_refused_naming_its_tokens(
    tmp_path, languages, tgt, tgt_token, message
):
    marian_directory(tmp_path / "hf", language_tokens=MULTILINGUAL, languages=languages)
    with pytest.raises(ParentError) as refused:
        read_parent(str(tmp_path / "hf"), "en", tgt, str(tmp_path / "work"), tgt_token)
    assert message.format(dir=tmp_path / "hf") in str(refused.value)


def test_tgt_token_is_put_before_each_source_sentence_as_mariantokenizer_puts_it(tmp_path):
    """The recipe encodes a multilingual parent's source text with the token before each line's pieces
    (sentencepiece_vocab encode --prefix), each a symbol of the imported dictionary: the pieces and the ids
    MarianTokenizer gives the same text with ">>fra<< " before it, and the import's dictionary holds the token as one
    id."""
    import transformers

    from preprocess.sentencepiece_vocab import encode

    marian_directory(tmp_path / "hf", language_tokens=MULTILINGUAL, languages=("eng", "mul"))
    import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "imported"), "en", "fr")
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(tmp_path / "hf"))
    lines = ["abc def gh", "ha bag", "fed cab ba"]
    (tmp_path / "text.en").write_text("\n".join(lines) + "\n")
    encode(
        str(tmp_path / "hf" / "source.spm"), [str(tmp_path / "text.en")], [str(tmp_path / "text.sp")], prefix=">>fra<<"
    )
    ours = [line.split() for line in (tmp_path / "text.sp").read_text().splitlines()]
    for line, pieces in zip(lines, ours):
        ids = tokenizer(">>fra<< " + line)["input_ids"]
        assert tokenizer.convert_ids_to_tokens(ids) == [*pieces, "</s>"], line
    symbols = [row.rsplit(" ", 1)[0] for row in (tmp_path / "imported" / "dict.en.txt").read_text().splitlines()]
    assert ">>fra<<" in symbols


def test_a_multilingual_parent_imported_as_a_pair_still_gets_its_token_for_tgt(tmp_path):
    """vaswani-import-marian's directory of an eng-mul parent imported as en-de (as the recipe's stage 2p imports it)
    is still the multilingual parent: INIT= finds >>deu<< for TGT=de from the MarianMT pair the import kept, as for the
    MarianMT directory itself (before: it was taken as an en-de parent, and no token was put)."""
    marian_directory(tmp_path / "hf", language_tokens=MULTILINGUAL, languages=("eng", "mul"))
    import_marian.import_marian(str(tmp_path / "hf"), str(tmp_path / "imported"), "en", "de")
    found = read_parent(str(tmp_path / "imported"), "en", "de", str(tmp_path / "work"))
    assert found.assignments("en", "de")["PARENT_TGT_TOKEN"] == ">>deu<<"
