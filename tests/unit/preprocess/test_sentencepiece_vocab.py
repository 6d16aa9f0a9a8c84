"""The joint vocabulary: one model for both sides, lossless encoding, line counts kept."""

import sentencepiece as spm

from preprocess.sentencepiece_vocab import encode, train
from preprocess.synthetic_pair import generate


def test_joint_bpe_round_trip(tmp_path):
    generate(str(tmp_path), train=500, valid=5, test=5, seed=1)
    model = train([str(tmp_path / "train.src"), str(tmp_path / "train.tgt")], str(tmp_path / "spm"), vocab_size=300)
    processor = spm.SentencePieceProcessor(model_file=model)
    assert processor.get_piece_size() == 300
    inputs = [str(tmp_path / "test.src"), str(tmp_path / "test.tgt")]
    outputs = [str(tmp_path / "test.sp.src"), str(tmp_path / "test.sp.tgt")]
    assert encode(model, inputs, outputs) == [5, 5]
    for raw, pieces in zip(inputs, outputs):
        originals = open(raw, encoding="utf-8").read().splitlines()
        encoded = open(pieces, encoding="utf-8").read().splitlines()
        assert [processor.decode(line.split()) for line in encoded] == originals  # lossless
        assert all(" " in line for line in encoded)  # split into pieces


def test_a_vocabulary_too_large_for_the_text_is_named(tmp_path, capsys):
    from preprocess.sentencepiece_vocab import main

    text = tmp_path / "train.txt"
    text.write_text("a few words\nand a few more\n")
    prefix = tmp_path / "spm" / "spm"
    assert main(["train", "--inputs", str(text), "--model-prefix", str(prefix), "--vocab-size", "400",
                 "--vocab-size-name", "TOY_VOCAB_SIZE"]) == 2  # fmt: skip
    error = capsys.readouterr().err
    assert "TOY_VOCAB_SIZE=400 is more than the training text" in error and str(text) in error
    assert not list((tmp_path / "spm").iterdir())  # nothing half-written
