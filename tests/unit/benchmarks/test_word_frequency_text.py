"""benchmarks/word_frequency_text.py at a small size: archives the recipe's preparation reads."""

import numpy as np

from benchmarks import word_frequency_text as text
from preprocess import wmt14

WORDS = {
    "en": {"the": 0.05, "house": 0.01, "river": 0.004, "green": 0.002, "Paris": 0.001},
    "de": {"das": 0.05, "haus": 0.01, "fluss": 0.004, "grün": 0.002, "paris": 0.001},
}


def test_archives_in_the_wmt14_layout_are_prepared_by_the_recipes_module(tmp_path):
    lexicons = {lang: text.Lexicon(words) for lang, words in WORDS.items()}
    text.write_archives(str(tmp_path / "archives"), "en-de", 3000, lexicons=lexicons)
    report = wmt14.prepare(
        "en-de", str(tmp_path / "out"), from_dir=str(tmp_path / "archives"), ignore_pinned_md5=True, log=lambda *_: None
    )
    read = {name: counts["read"] for name, counts in report["train"].items()}
    assert sum(read.values()) == 3000 and read["commoncrawl"] > read["europarl-v7"] > read["news-commentary-v9"] > 0
    assert report["valid"]["pairs"] == report["test"]["pairs"] == text.TEST_PAIRS
    assert 0.9 < report["train_total"]["kept"] / 3000 < 1.0  # the length-ratio filter drops a few percent
    lines = (tmp_path / "out" / "train.en").read_text().splitlines()
    words = [len(line.split()) for line in lines]
    assert 19 < np.mean(words) < 27 and lines[0][0].isupper() and lines[0][-1] in ".?"
