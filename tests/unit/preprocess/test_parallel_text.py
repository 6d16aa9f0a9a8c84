"""preprocess/parallel_text.py: one's own parallel text, each hostile input with its message, every change and
drop counted with its first lines, dev and test held out without overlap, the settings by size."""

import gzip
import json

import pytest

from preprocess import budget_rule as rule
from preprocess import parallel_text as pt

ENGLISH = ["The file could not be opened.", "Save the document before you close it.", "Open a new window.",
           "The printer is not ready.", "Delete the selected files?", "Check your network connection.",
           "The password is wrong.", "Select a folder to import.", "Your changes were saved.", "Quit the program."]
GERMAN = ["Die Datei konnte nicht geöffnet werden.", "Speichern Sie das Dokument, bevor Sie es schließen.",
          "Ein neues Fenster öffnen.", "Der Drucker ist nicht bereit.", "Die ausgewählten Dateien löschen?",
          "Prüfen Sie Ihre Netzwerkverbindung.", "Das Passwort ist falsch.", "Wählen Sie einen Ordner zum Importieren.",
          "Ihre Änderungen wurden gespeichert.", "Das Programm beenden."]  # fmt: skip


def corpus(directory, pairs, name="train", gz=False):
    """PREFIX.en and PREFIX.de in directory (bytes lines, written as given): PREFIX."""
    for lang, side in (("en", [p[0] for p in pairs]), ("de", [p[1] for p in pairs])):
        data = b"".join((s if isinstance(s, bytes) else s.encode()) + b"\n" for s in side)
        path = directory / f"{name}.{lang}{'.gz' if gz else ''}"
        path.write_bytes(gzip.compress(data) if gz else data)
    return str(directory / name)


def many(n, start=0):
    """n distinct sentence pairs."""
    return [(f"{ENGLISH[i % 10]} Number {i}.", f"{GERMAN[i % 10]} Nummer {i}.") for i in range(start, start + n)]


def prepare(tmp_path, train, **kw):
    kw.setdefault("rules", pt.Rules("en", "de", langid=False))
    return pt.prepare(train if isinstance(train, list) else [train], "en", "de", str(tmp_path / "out"), log=lambda *_: None, **kw)


@pytest.mark.parametrize("inserted, says", [
    ("\u2028", "has 1 line with a U+2028 LINE SEPARATOR (the first: line 3)"),
    ("\r", "has 1 line with a carriage return (the first: line 3)"),
    ("\x00", "has 1 line with a NUL byte (the first: line 3)"),
])  # fmt: skip
def test_files_whose_line_counts_differ_are_refused_saying_why(tmp_path, inserted, says):
    """A tool that ended a line at the character split one sentence in two on one side only."""
    pairs = many(6)
    german = [p[1] for p in pairs]
    german[2] = german[2].replace(" ", inserted, 1)
    prefix = corpus(tmp_path, [(p[0], g) for p, g in zip(pairs, german)])
    (tmp_path / "train.de").write_bytes((tmp_path / "train.de").read_bytes() + b"an extra line\n")
    with pytest.raises(pt.CorpusError) as error:
        prepare(tmp_path, prefix)
    message = str(error.value)
    assert f"{prefix}.en has 6 lines and {prefix}.de has 7" in message and f"{prefix}.de {says}" in message


def test_a_lost_line_is_refused_even_unexplained(tmp_path):
    prefix = corpus(tmp_path, many(6))
    (tmp_path / "train.de").write_text("\n".join(GERMAN[:5]) + "\n")
    with pytest.raises(pt.CorpusError, match="has 6 lines and .* has 5: .*Nothing in either file explains it"):
        prepare(tmp_path, prefix)


def test_a_tsv_line_without_one_tab_is_refused(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("a b\tc d\none\ttwo\tthree\n")
    with pytest.raises(pt.CorpusError, match=r"pairs.tsv: line 2 has 3 columns"):
        prepare(tmp_path, str(tsv))


def test_invalid_utf8_is_refused_with_its_lines_or_dropped_and_counted(tmp_path):
    pairs = many(300)
    pairs[4] = (b"caf\xe9 latin-1 here", pairs[4][1])
    prefix = corpus(tmp_path, pairs)
    with pytest.raises(pt.CorpusError, match=rf"1 line not valid UTF-8 \({prefix}:5\).*ON_BAD_BYTES=drop"):
        prepare(tmp_path, prefix)
    report = prepare(tmp_path, prefix, rules=pt.Rules("en", "de", on_bad_bytes="drop", langid=False))
    assert report["changes_and_drops"]["invalid UTF-8"] == {"count": 1, "first": [f"{prefix}:5"]}


def test_every_change_and_drop_is_counted_with_its_first_lines(tmp_path):
    pairs = many(300)
    pairs[0] = ("\ufeff" + pairs[0][0], pairs[0][1])  # a byte-order mark
    pairs[1] = (pairs[1][0] + "\r", pairs[1][1] + "\r")  # Windows line ends
    pairs[2] = ("A\x07bell and\ttab", "Eine\x07Glocke")  # control characters
    pairs[3] = ("Cafe\u0301 decomposed here.", "Cafe\u0301 zerlegt hier.")  # NFD
    pairs[10] = ("", pairs[10][1])
    pairs[11] = (" ".join(["word"] * 300), " ".join(["Wort"] * 300))
    pairs[12] = ("one two three four five six seven eight nine ten", "eins")
    pairs[13] = ("Same text on both sides.", "Same text on both sides.")
    pairs[14] = pairs[20]  # a duplicate of a later pair: the earlier one is kept
    prefix = corpus(tmp_path, pairs)
    drops = prepare(tmp_path, prefix)["changes_and_drops"]
    assert drops["byte-order mark removed"]["first"] == [f"{prefix}:1"]
    assert drops["carriage return at the end removed"]["count"] == 2  # each side of line 2
    assert drops["control characters replaced by spaces"]["first"][0] == f"{prefix}:3"
    assert drops["Unicode normalised (NFC)"]["first"][0] == f"{prefix}:4"
    assert drops["an empty side"]["first"] == [f"{prefix}:11"]
    assert drops["more than 250 words on a side"]["first"] == [f"{prefix}:12"]
    assert drops["length ratio above 3"]["first"] == [f"{prefix}:13"]
    assert drops["source equal to target"]["first"] == [f"{prefix}:14"]
    assert drops["a duplicate of an earlier pair"]["first"] == [f"{prefix}:21"]
    train = (tmp_path / "out" / "train.en").read_text().splitlines() + (tmp_path / "out" / "valid.en").read_text().splitlines() + \
        (tmp_path / "out" / "test.en").read_text().splitlines()  # fmt: skip
    assert "A bell and tab" in train and "Café decomposed here." in train and pairs[0][0][1:] in train
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert sum(report["pairs"].values()) == 300 - 5
    report_md = (tmp_path / "out" / "report.md").read_text()
    assert "| source equal to target | 1 |" in report_md and "scripts: en LATIN, de LATIN;" in report_md


def test_sides_in_another_language_or_script_are_dropped(tmp_path):
    pairs = many(300)
    pairs[5] = ("Die Datei konnte nicht geöffnet werden, weil sie gesperrt ist.", GERMAN[0])  # German on the English side
    pairs[6] = (ENGLISH[1], "Сохраните документ, прежде чем закрыть его.")  # Russian on the German side
    prefix = corpus(tmp_path, pairs)
    drops = prepare(tmp_path, prefix, rules=pt.Rules("en", "de"))["changes_and_drops"]
    assert drops["a side in another language (en side: de)"]["first"] == [f"{prefix}:6"]
    assert drops["a side mostly not in its script (de: latin)"]["first"] == [f"{prefix}:7"]


def test_dev_and_test_are_held_out_by_seed_with_no_source_in_training(tmp_path):
    pairs = many(3000)
    pairs += [(pairs[i][0], pairs[i][1] + " Anders.") for i in range(0, 3000, 7)]  # other translations of a source
    prefix = corpus(tmp_path, pairs, gz=True)  # and read from .gz
    report = prepare(tmp_path, prefix)
    assert report["pairs"]["valid"] == report["pairs"]["test"] == 200  # 1% at least 200, at most 10%
    out = tmp_path / "out"
    split = {name: set((out / f"{name}.en").read_text().splitlines()) for name in ("train", "valid", "test")}
    assert not split["train"] & split["valid"] and not split["train"] & split["test"] and not split["valid"] & split["test"]
    first = split["test"]
    prepare(tmp_path, prefix)
    assert set((out / "test.en").read_text().splitlines()) == first  # the same seed, the same split
    prepare(tmp_path, prefix, seed=2)
    assert set((out / "test.en").read_text().splitlines()) != first


def test_given_dev_and_test_sets_are_used_and_kept_out_of_training(tmp_path):
    train = corpus(tmp_path, many(500), "train")
    valid = corpus(tmp_path, many(20, start=490), "valid")  # 10 of them are training pairs too
    tsv = tmp_path / "test.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in many(30, start=1000)))
    report = prepare(tmp_path, [train, str(tmp_path / "train")], valid=[valid], test=[str(tsv)])
    assert report["pairs"] == {"train": 490, "valid": 20, "test": 30}
    assert report["changes_and_drops"]["source in the dev or test set"]["count"] == 10
    assert report["changes_and_drops"]["a duplicate of an earlier pair"]["count"] == 500  # the corpus given twice


def test_nothing_half_written_stays_after_a_failure(tmp_path):
    prefix = corpus(tmp_path, many(10))
    with pytest.raises(pt.CorpusError, match="too few to hold out"):
        prepare(tmp_path, prefix, valid_size=8, test_size=8)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


def speeds(full: float, short: float, halved: float = 1.0):
    """A candidate's seconds per update: the size class's model, or one of d_model 256 at 4,096 tokens an update,
    ``halved`` times that at 2,048."""
    def seconds(candidate, vocab_size):
        if "--d-model 256" not in candidate.model_flags:
            return full
        return short * (halved if candidate.tokens_per_update == 2048 else 1.0)

    return seconds


def test_a_time_for_gpus_where_there_is_none_is_refused(tmp_path, capsys, monkeypatch):
    from transformer_plugin_cli.tools import speed_probe

    monkeypatch.setattr(speed_probe, "cuda_here", lambda: False)
    prefix = corpus(tmp_path, many(100))
    assert pt.main(["settings", "--train", prefix, "--src", "en", "--tgt", "de", "--time", "8h", "--gpus", "8"]) == 2
    assert "error: TIME=8h: this machine has no CUDA device to measure the GPUs' speed on" in capsys.readouterr().err


def test_time_and_max_update_together_are_refused(tmp_path):
    prefix = corpus(tmp_path, many(100))
    with pytest.raises(pt.CorpusError, match="TIME=8h and MAX_UPDATE=1200: give one budget"):
        pt.settings([prefix], "en", "de", 1200, "8h", speeds(4.0, 1.5))
    with pytest.raises(pt.CorpusError, match="TIME=8 hours: a duration such as 90m"):
        pt.settings([prefix], "en", "de", None, "8 hours", speeds(4.0, 1.5))


def test_a_validations_cost_is_counted_from_the_dev_sets_size(tmp_path):
    """The dev set's target tokens (what each validation costs a TIME) are estimated before any work: a given dev
    set's target words, or the pairs held out times a training target line's words; in pieces, PIECES_PER_WORD a
    word (a character in scripts without spaces)."""
    (tmp_path / "given").mkdir()
    prefix = corpus(tmp_path, many(3000))  # German lines of 4 to 9 words
    dev = corpus(tmp_path / "given", [("One two three.", "eins zwei drei vier")] * 50, name="dev")
    assert rule.PIECES_PER_WORD == 2.0
    assert pt.settings([prefix], "en", "de", valid=[dev]).valid_tokens == 50 * 4 * 2
    words = sum(len(g.split()) for _, g in many(3000)) / 3000
    held = pt.settings([prefix], "en", "de")
    assert pt.held_out_size(3000, None) == 200 and held.valid_tokens == int(200 * words * 2)
    cjk = corpus(tmp_path / "given", [("Open the file.", "打开文件")] * 50, name="zh")
    assert rule.dev_tokens([], [pt.find_corpus(cjk, "en", "de")], 3000, "CJK") == 50 * 4 * 2
    assert pt.settings([prefix], "en", "de", 1200).valid_tokens == held.valid_tokens  # MAX_UPDATE's time, too


def test_a_vocabulary_per_side_where_the_scripts_differ(tmp_path):
    prefix = corpus(tmp_path, [(e, "Документ номер %d." % i) for i, e in enumerate(ENGLISH * 30)])
    tsv = tmp_path / "p.tsv"
    tsv.write_text("".join(f"{e}\tDatei {i}\n" for i, e in enumerate(ENGLISH * 30)))
    assert pt.settings([prefix], "en", "de").joint is False and pt.settings([str(tsv)], "en", "de").joint is True
    assert pt.settings([prefix, str(tsv)], "en", "de").pairs == 600


def test_given_dev_and_test_sets_count_what_they_drop_and_change(tmp_path):
    """Their empty and duplicate pairs used to be dropped uncounted, and collapsed white space counted nowhere."""
    train = corpus(tmp_path, many(500), "train")
    pairs = many(20, start=1000)
    pairs[3] = ("", pairs[3][1])
    pairs[4] = pairs[5]
    pairs[6] = ("  Two  spaces here. ", pairs[6][1])
    valid = corpus(tmp_path, pairs, "valid")
    report = prepare(tmp_path, train, valid=[valid])
    drops = report["changes_and_drops"]
    assert drops["an empty side (valid set)"]["first"] == [f"{valid}:4"]
    assert drops["a duplicate of an earlier pair (valid set)"]["first"] == [f"{valid}:6"]
    assert drops["white space collapsed (runs, tabs, or at either end)"]["first"] == [f"{valid}:7"]
    assert report["pairs"]["valid"] == 18
