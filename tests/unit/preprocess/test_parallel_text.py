"""preprocess/parallel_text.py: one's own parallel text, each hostile input with its message, every change and
drop counted with its first lines, dev and test held out without overlap."""

import json

import pytest

from helpers import ENGLISH, GERMAN, corpus, many

from preprocess import parallel_text as pt


def prepare(tmp_path, train, **kw):
    kw.setdefault("options", pt.Options("en", "de", langid=False))
    return pt.prepare(
        train if isinstance(train, list) else [train], "en", "de", str(tmp_path / "out"), log=lambda *_: None, **kw
    )


@pytest.mark.parametrize(
    "inserted, says",
    [
        ("\u2028", "has 1 line with a U+2028 LINE SEPARATOR (the first: line 3)"),
        ("\r", "has 1 line with a carriage return (the first: line 3)"),
        ("\x00", "has 1 line with a NUL byte (the first: line 3)"),
    ],
)
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
    report = prepare(tmp_path, prefix, options=pt.Options("en", "de", on_bad_bytes="drop", langid=False))
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
    train = (
        (tmp_path / "out" / "train.en").read_text().splitlines()
        + (tmp_path / "out" / "valid.en").read_text().splitlines()
        + (tmp_path / "out" / "test.en").read_text().splitlines()
    )
    assert "A bell and tab" in train and "Café decomposed here." in train and pairs[0][0][1:] in train
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert sum(report["pairs"].values()) == 300 - 5
    report_md = (tmp_path / "out" / "report.md").read_text()
    assert "| source equal to target | 1 |" in report_md and "scripts: en LATIN, de LATIN;" in report_md


def test_sides_in_another_language_or_script_are_dropped(tmp_path):
    pairs = many(300)
    pairs[5] = (
        "Die Datei konnte nicht geöffnet werden, weil sie gesperrt ist.",
        GERMAN[0],
    )  # German on the English side
    pairs[6] = (ENGLISH[1], "Сохраните документ, прежде чем закрыть его.")  # Russian on the German side
    prefix = corpus(tmp_path, pairs)
    drops = prepare(tmp_path, prefix, options=pt.Options("en", "de"))["changes_and_drops"]
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
    assert (
        not split["train"] & split["valid"]
        and not split["train"] & split["test"]
        and not split["valid"] & split["test"]
    )
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


def test_a_general_corpus_is_replayed_at_its_ratio_never_with_a_dev_or_test_source(tmp_path, capsys):
    """replay (INIT with REPLAY=): the in-domain pairs, then ratio times as many of the general corpus, drawn by the
    seed (the same draw every time, another with another seed), none whose source is a dev or test source; a corpus
    of sides of different lengths is refused naming both files."""

    def write(prefix, pairs):
        (tmp_path / f"{prefix}.en").write_text("".join(s + "\n" for s, _ in pairs))
        (tmp_path / f"{prefix}.de").write_text("".join(t + "\n" for _, t in pairs))
        return str(tmp_path / prefix)

    train = write("train", [(f"in {i}", f"drin {i}") for i in range(10)])
    general = write("general", [(f"general {i}", f"allgemein {i}") for i in range(100)])
    held = write("valid", [("general 3", "allgemein 3"), ("general 7", "allgemein 7")])
    out = str(tmp_path / "mixed" / "train")
    assert (
        pt.main(
            [
                "replay",
                "--corpus",
                general,
                "--src",
                "en",
                "--tgt",
                "de",
                "--train",
                train,
                "--held",
                held,
                "--ratio",
                "2",
                "--out",
                out,
            ]
        )
        == 0
    )
    assert "10 in-domain pairs and 20 of" in capsys.readouterr().out
    sources = (tmp_path / "mixed" / "train.en").read_text().splitlines()
    targets = (tmp_path / "mixed" / "train.de").read_text().splitlines()
    assert sources[:10] == [f"in {i}" for i in range(10)] and len(sources) == len(targets) == 30
    assert all(t == "allgemein " + s.split()[1] for s, t in zip(sources[10:], targets[10:]))  # pairs kept together
    assert not {"general 3", "general 7"} & set(sources)
    again = pt.replay(general, "en", "de", train, [held], 2, 1, str(tmp_path / "again"))
    assert (tmp_path / "again.en").read_text().splitlines() == sources and again["replayed"] == 20
    pt.replay(general, "en", "de", train, [held], 2, 2, str(tmp_path / "other"))
    assert (tmp_path / "other.en").read_text().splitlines() != sources
    assert pt.replay(general, "en", "de", train, [], 50, 1, str(tmp_path / "all"))["replayed"] == 100  # all of it
    (tmp_path / "general.de").write_text("one line\n")
    with pytest.raises(pt.CorpusError, match=r"general\.en and .*general\.de have different numbers of lines"):
        pt.replay(general, "en", "de", train, [], 1, 1, str(tmp_path / "bad"))


def test_the_parent_translates_text_of_its_own_domains_instead(tmp_path, capsys):
    """distill-sources with --pool (REPLAY_SOURCES): REPLAY_RATIO lines an in-domain pair drawn from the pool's
    distinct non-empty lines, none a dev or test source, in their order; all of them where there are fewer; a ratio
    above 1 taken; a pool with nothing to draw refused, naming it."""
    (tmp_path / "train.en").write_text("".join(f"in {i}\n" for i in range(4)))
    (tmp_path / "valid.en").write_text("general 3\n")
    (tmp_path / "general.en").write_text("".join(f"general {i}\n" for i in range(12)) + "general 5\n\n")
    train, pool, out = str(tmp_path / "train"), str(tmp_path / "general"), str(tmp_path / "d" / "sources.en")
    args = ["distill-sources", "--train", train, "--src", "en", "--out", out, "--pool", pool]
    assert pt.main(args + ["--ratio", "2", "--held", str(tmp_path / "valid")]) == 0
    assert (
        f"8 of {pool}.en's 11 lines (REPLAY_RATIO=2 for 4 in-domain pairs), for the parent" in capsys.readouterr().out
    )
    drawn = (tmp_path / "d" / "sources.en").read_text().splitlines()
    assert len(drawn) == len(set(drawn)) == 8 and "general 3" not in drawn and all(drawn)
    assert drawn == sorted(drawn, key=lambda s: int(s.split()[1]))
    assert pt.distill_sources(train, "en", 5, 1, out, pool)["drawn"] == 12  # all the pool's distinct lines
    (tmp_path / "empty.en").write_text("\n\n")
    with pytest.raises(pt.CorpusError, match=r"REPLAY_SOURCES=.*empty: .*empty\.en has no line to translate"):
        pt.distill_sources(train, "en", 1, 1, out, str(tmp_path / "empty"))


def test_the_parents_translations_of_a_share_of_the_sources_join_the_training_text(tmp_path, capsys):
    """distill-sources and distilled (INIT with REPLAY=parent): a share of the training sources drawn by the seed,
    in their order; then the in-domain pairs and each drawn source beside the parent's translation of it (the D- line
    of its sentence id in fairseq-interactive's output, in any order), a source without one or with an empty one
    left out and counted; a share above 1 and another file's output are refused."""
    (tmp_path / "train.en").write_text("".join(f"in {i}\n" for i in range(10)))
    (tmp_path / "train.de").write_text("".join(f"drin {i}\n" for i in range(10)))
    train, sources = str(tmp_path / "train"), str(tmp_path / "d" / "sources.en")
    assert pt.main(["distill-sources", "--train", train, "--src", "en", "--ratio", "0.6", "--out", sources]) == 0
    assert "6 of the 10 training sources, for the parent" in capsys.readouterr().out
    drawn = (tmp_path / "d" / "sources.en").read_text().splitlines()
    assert len(drawn) == 6 and drawn == sorted(drawn, key=lambda s: int(s.split()[1]))  # in their order
    assert pt.distill_sources(train, "en", 0.6, 2, str(tmp_path / "other.en"))["drawn"] == 6
    assert (tmp_path / "other.en").read_text().splitlines() != drawn
    with pytest.raises(pt.CorpusError, match=r"REPLAY_RATIO=1\.5 with REPLAY=parent: .* at most 1"):
        pt.distill_sources(train, "en", 1.5, 1, str(tmp_path / "x.en"))

    output = tmp_path / "parent.out"  # as fairseq-interactive prints it: sentence 4 skipped (too long), 5 empty
    lines = []
    for n in (2, 0, 5, 1, 3):
        hypothesis = "" if n == 5 else f"vom Elternteil {drawn[n].split()[1]}"
        lines += [f"S-{n}\t{drawn[n]}", f"W-{n}\t0.010\tseconds", f"H-{n}\t-0.5\t{hypothesis}"]
        lines += [f"D-{n}\t-0.5\t{hypothesis}", f"P-{n}\t-0.1 -0.2"]
    output.write_text("\n".join(lines) + "\n2026-12-04 | INFO | fairseq_cli.interactive | Total time: 1.0 seconds\n")
    out = str(tmp_path / "distilled" / "train")
    args = ["distilled", "--train", train, "--src", "en", "--tgt", "de", "--sources", sources]
    assert pt.main(args + ["--translations", str(output), "--out", out]) == 0
    said = capsys.readouterr().out
    assert "10 in-domain pairs and 4 of the parent's translations (1 untranslated, 1 empty: left out)" in said
    src = (tmp_path / "distilled" / "train.en").read_text().splitlines()
    tgt = (tmp_path / "distilled" / "train.de").read_text().splitlines()
    assert src[:10] == [f"in {i}" for i in range(10)] and tgt[:10] == [f"drin {i}" for i in range(10)]
    assert src[10:] == [drawn[n] for n in (0, 1, 2, 3)]
    assert tgt[10:] == [f"vom Elternteil {drawn[n].split()[1]}" for n in (0, 1, 2, 3)]  # each beside its own

    output.write_text("D-9\t-0.5\tzu viele\n")
    assert pt.main(args + ["--translations", str(output), "--out", out]) == 2
    assert f"{output} translates sentence 9, and {sources} has 6 lines: not its output" in capsys.readouterr().err
    assert pt.main(args + ["--translations", str(tmp_path / "none.out"), "--out", out]) == 2
    assert "none.out: no such file (the parent's translations" in capsys.readouterr().err
