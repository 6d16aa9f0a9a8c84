"""preprocess/corpora.py: corpora found by prefix or as a TSV, gzipped or not, read as bytes without change; line
counts checked, each side's script, the size of what is held out. (test_parallel_text.py runs them through
prepare, with its messages.)"""

import gzip

import pytest

from preprocess import corpora


def test_a_prefix_finds_two_files_gzipped_or_not_and_a_tsv_is_one(tmp_path):
    (tmp_path / "c.en").write_bytes(b"One.\nTwo.\n")
    (tmp_path / "c.de.gz").write_bytes(gzip.compress(b"Eins.\nZwei.\n"))
    found = corpora.find_corpus(str(tmp_path / "c"), "en", "de")
    assert (found.source, found.target, found.tsv) == (str(tmp_path / "c.en"), str(tmp_path / "c.de.gz"), None)
    assert list(corpora.raw_pairs_unchecked(found)) == [(1, b"One.", b"Eins."), (2, b"Two.", b"Zwei.")]
    assert corpora.count_lines(found.target) == 2
    (tmp_path / "p.tsv").write_bytes(b"One.\tEins.\r\nTwo.\tZwei.\n")
    tsv = corpora.find_corpus(str(tmp_path / "p.tsv"), "en", "de")
    assert tsv.tsv and [s for _, s, _ in corpora.raw_pairs_unchecked(tsv)] == [b"One.", b"Two."]


def test_what_is_missing_is_named(tmp_path):
    (tmp_path / "c.en").write_text("One.\n")
    with pytest.raises(corpora.CorpusError, match=r"c: neither .*c\.de nor .*c\.de\.gz exists"):
        corpora.find_corpus(str(tmp_path / "c"), "en", "de")
    with pytest.raises(corpora.CorpusError, match=r"gone\.tsv: no such file"):
        corpora.find_corpus(str(tmp_path / "gone.tsv"), "en", "de")


def test_line_counts_that_differ_are_refused_with_the_reason(tmp_path):
    (tmp_path / "c.en").write_bytes(
        b"One.\nTwo\xe2\x80\xa8half.\nThree.\n"
    )  # a U+2028 inside a line: another reader splits it
    (tmp_path / "c.de").write_bytes(b"Eins.\nZwei.\n")
    with pytest.raises(corpora.CorpusError, match="U\\+2028 LINE SEPARATOR"):
        corpora.check_line_counts(corpora.find_corpus(str(tmp_path / "c"), "en", "de"))


def test_each_sides_script_and_its_units():
    assert corpora.main_script(["Привет, мир.", "Как дела?"]) == "CYRILLIC"
    assert corpora.main_script(["Hello there.", "ok"]) == "LATIN"
    assert corpora.units("打开文件", "CJK") == 4 and corpora.units("open the file", "LATIN") == 3


@pytest.mark.parametrize("pairs, held", [(3_000, 200), (100_000, 1_000), (1_000_000, 2_000), (500, 50), (5, 1)])
def test_a_held_out_set_is_one_percent_within_200_and_2000_and_never_over_a_tenth(pairs, held):
    assert corpora.held_out_size(pairs, None) == held and corpora.held_out_size(pairs, 123) == 123


def test_a_files_lines_are_read_once_while_it_is_unchanged(tmp_path, monkeypatch):
    """The settings ask for a corpus's lines twice with TIME and a kept pick (the key, then the rule): one read; a
    file changed since (here a line added) is read again."""
    path = tmp_path / "c.en"
    path.write_bytes(b"One.\nTwo.\n")
    opened = []
    real = corpora.open_bytes
    monkeypatch.setattr(corpora, "open_bytes", lambda p: opened.append(p) or real(p))
    assert corpora.count_lines(str(path)) == 2 and corpora.count_lines(str(tmp_path / "." / "c.en")) == 2
    assert len(opened) == 1
    with open(path, "ab") as f:
        f.write(b"Three")
    assert corpora.count_lines(str(path)) == 3 and len(opened) == 2
