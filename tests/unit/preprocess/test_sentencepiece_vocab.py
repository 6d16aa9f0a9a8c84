"""The joint vocabulary: one model for both sides, lossless encoding, line counts kept."""

import json
import re

import pytest
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


def test_batches_on_threads_encode_as_line_by_line(tmp_path):
    """encode() takes batches of lines on sentencepiece's threads: the same pieces, in order, as one line
    at a time, whatever the batch (one that does not divide the line count, one larger than the file)."""
    generate(str(tmp_path), train=500, valid=5, test=5, seed=1)
    text = str(tmp_path / "train.src")
    model = train([text, str(tmp_path / "train.tgt")], str(tmp_path / "spm"), vocab_size=300)
    processor = spm.SentencePieceProcessor(model_file=model)
    expected = [
        " ".join(processor.encode(line, out_type=str)) for line in open(text, encoding="utf-8").read().splitlines()
    ]
    for threads, batch in ((1, 10_000), (2, 7), (3, 499)):
        out = str(tmp_path / f"out.{threads}")
        assert encode(model, [text], [out], threads=threads, batch=batch) == [500]
        assert open(out, encoding="utf-8").read().splitlines() == expected


def test_a_vocabulary_too_large_for_the_text_is_named(tmp_path, capsys):
    from preprocess.sentencepiece_vocab import main

    text = tmp_path / "train.txt"
    text.write_text("a few words\nand a few more\n")
    prefix = tmp_path / "spm" / "spm"
    assert (
        main(
            [
                "train",
                "--inputs",
                str(text),
                "--model-prefix",
                str(prefix),
                "--vocab-size",
                "400",
                "--vocab-size-name",
                "TOY_VOCAB_SIZE",
            ]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert "TOY_VOCAB_SIZE=400 is more than the training text" in error and str(text) in error
    assert not list((tmp_path / "spm").iterdir())  # nothing half-written


def test_a_sample_too_large_for_the_memory_stops_before_training_naming_the_setting(tmp_path, monkeypatch, capsys):
    """The memory check runs before sentencepiece loads anything: it names the recipe's variable and a
    sample that fits (memory_needed of that sample is within what is available)."""
    from preprocess import sentencepiece_vocab as sv

    text = tmp_path / "train.en"
    text.write_text("".join(f"sentence number {i} with a few words in it\n" for i in range(20_000)))
    lines, size = sv.text_size([str(text)])
    available = sv.memory_needed("unigram", 10_000, size / lines)  # room for about half of it
    with pytest.raises(sv.NotEnoughMemoryError) as e:
        sv.check_memory([str(text)], "unigram", 10_000_000, "SPM_SAMPLE", available=available)
    fits = int(re.search(r"set SPM_SAMPLE to ([\d,]+) or fewer", str(e.value)).group(1).replace(",", ""))
    assert 0 < fits <= 10_000 and sv.memory_needed("unigram", fits, size / lines) <= available
    assert f"training on 20,000 sentences of {text}" in str(e.value)
    sv.check_memory([str(text)], "unigram", fits, "SPM_SAMPLE", available=available)  # a sample that fits passes
    monkeypatch.setattr(sv, "available_memory", lambda: available)
    code = sv.main(
        [
            "train",
            "--inputs",
            str(text),
            "--model-prefix",
            str(tmp_path / "spm"),
            "--vocab-size",
            "100",
            "--model-type",
            "unigram",
            "--input-sentence-size-name",
            "SPM_SAMPLE",
        ]
    )
    assert code == 2 and "set SPM_SAMPLE to" in capsys.readouterr().err and not (tmp_path / "spm.model").exists()


def test_the_size_of_a_large_text_is_estimated_from_stretches_spread_over_it(tmp_path):
    """The memory check reads stretches spread over a large file, whose line lengths change along it (as
    concatenated corpora's do): their line count scaled to the file's size is within 2%."""
    from preprocess.sentencepiece_vocab import text_size

    text = tmp_path / "train.en"
    text.write_text("".join(f"sentence {i} {'word ' * (i % 7 + (i >= 10_000) * 10)}\n" for i in range(20_000)))
    exact = text_size([str(text)])
    assert exact == (20_000, text.stat().st_size)
    lines, size = text_size([str(text)], sample=30_000)
    assert size == exact[1] and abs(lines - 20_000) < 0.02 * 20_000


def test_the_pieces_a_parents_dictionary_lacks_are_counted_per_input(tmp_path, capsys):
    """INIT= encodes with the parent's model: the pieces its fairseq dictionary lacks (fairseq's <unk>) counted, per
    input, with the commonest, in --unknown-report; the encoded text is the same as without the count."""
    from preprocess.sentencepiece_vocab import main

    generate(str(tmp_path), train=500, valid=5, test=5, seed=1)
    model = train([str(tmp_path / "train.src"), str(tmp_path / "train.tgt")], str(tmp_path / "spm"), vocab_size=300)
    processor = spm.SentencePieceProcessor(model_file=model)
    pieces = [processor.id_to_piece(i) for i in range(3, 300)]
    lacking = set(pieces[::2])  # every other piece left out of the dictionary
    (tmp_path / "dict.txt").write_text("".join(f"{p} 1\n" for p in pieces if p not in lacking))
    text = tmp_path / "train.src"
    args = ["encode", "--model", model, "--inputs", str(text), "--outputs", str(tmp_path / "plain"), "--threads", "1"]
    assert main(args) == 0
    assert (
        main(
            [
                *args[:6],
                str(tmp_path / "counted"),
                "--threads",
                "1",
                "--dictionary",
                str(tmp_path / "dict.txt"),
                "--unknown-report",
                str(tmp_path / "unknown.json"),
            ]
        )
        == 0
    )
    encoded = (tmp_path / "counted").read_text().split()
    assert encoded == (tmp_path / "plain").read_text().split()
    report = json.loads((tmp_path / "unknown.json").read_text())
    known = set(pieces) - lacking
    expected = sum(p not in known for p in encoded)  # those left out, and any the model itself does not hold
    assert report["inputs"]["train.src"] == {
        "pieces": len(encoded),
        "unknown": expected,
        "share": expected / len(encoded),
    }
    assert report["commonest"][0][1] == max(encoded.count(p) for p in set(encoded) - known)
    assert f"train.src: {expected:,} of {len(encoded):,} pieces" in capsys.readouterr().out


def test_the_lines_longer_than_a_parents_positions_are_counted_and_named(tmp_path, capsys):
    """--positions: each input's lines whose pieces and fairseq's </s> pass the parent's positions, counted and the
    first ten named by number in the report and in one printed line; a line of as many pieces as positions is among
    them (its </s>)."""
    from preprocess.sentencepiece_vocab import main

    generate(str(tmp_path), train=500, valid=5, test=5, seed=1)
    model = train([str(tmp_path / "train.src"), str(tmp_path / "train.tgt")], str(tmp_path / "spm"), vocab_size=300)
    processor = spm.SentencePieceProcessor(model_file=model)
    (tmp_path / "dict.txt").write_text("".join(f"{processor.id_to_piece(i)} 1\n" for i in range(3, 300)))
    lines = (tmp_path / "train.src").read_text().splitlines()[:40]
    lengths = [len(processor.encode(line, out_type=str)) for line in lines]
    positions = sorted(lengths)[len(lengths) // 2]  # a median line's pieces fill them, and its </s> does not fit
    longer = [i + 1 for i, n in enumerate(lengths) if n + 1 > positions]
    assert 0 < len(longer) < len(lines) and positions in lengths
    (tmp_path / "dev.src").write_text("\n".join(lines) + "\n")
    args = ["encode", "--model", model, "--inputs", str(tmp_path / "dev.src"), "--outputs", str(tmp_path / "dev.sp")]
    args += ["--threads", "1", "--dictionary", str(tmp_path / "dict.txt"), "--unknown-report", str(tmp_path / "r.json")]
    assert main([*args, "--positions", str(positions)]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["positions"] == positions
    assert report["inputs"]["dev.src"]["too_long"] == len(longer)
    assert report["inputs"]["dev.src"]["too_long_lines"] == longer[:10]
    shown = ", ".join(map(str, longer[:10])) + (", ..." if len(longer) > 10 else "")
    said = f"dev.src: {len(longer):,} lines longer than the parent's {positions} positions (lines {shown})"
    assert said in capsys.readouterr().out
