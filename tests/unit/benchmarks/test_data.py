"""The data benchmarks' own parts, at a small size: archives the recipe's preparation reads, a data-bin
fairseq's reader reads, and the memory of a process tree."""

import os
import subprocess
import sys

import numpy as np

from benchmarks import data, train_start
from preprocess import wmt14

WORDS = {"en": {"the": 0.05, "house": 0.01, "river": 0.004, "green": 0.002, "Paris": 0.001},
         "de": {"das": 0.05, "haus": 0.01, "fluss": 0.004, "grün": 0.002, "paris": 0.001}}  # fmt: skip


def test_archives_in_the_wmt14_layout_are_prepared_by_the_recipes_module(tmp_path):
    lexicons = {lang: data.Lexicon(words) for lang, words in WORDS.items()}
    data.write_archives(str(tmp_path / "archives"), "en-de", 3000, lexicons=lexicons)
    report = wmt14.prepare("en-de", str(tmp_path / "out"), from_dir=str(tmp_path / "archives"), ignore_pinned_md5=True,
                           log=lambda *_: None)  # fmt: skip
    read = {name: counts["read"] for name, counts in report["train"].items()}
    assert sum(read.values()) == 3000 and read["commoncrawl"] > read["europarl-v7"] > read["news-commentary-v9"] > 0
    assert report["valid"]["pairs"] == report["test"]["pairs"] == data.TEST_PAIRS
    assert 0.9 < report["train_total"]["kept"] / 3000 < 1.0  # the length-ratio filter drops a few percent
    lines = (tmp_path / "out" / "train.en").read_text().splitlines()
    words = [len(line.split()) for line in lines]
    assert 19 < np.mean(words) < 27 and lines[0][0].isupper() and lines[0][-1] in ".?"


def test_the_data_bin_is_read_by_fairseqs_own_reader(tmp_path):
    from fairseq.data import data_utils

    train_start.write_data_bin(str(tmp_path / "bin"), 5000, vocab=1000)
    dataset = data_utils.load_indexed_dataset(str(tmp_path / "bin" / "train.en-fr.en"), None, dataset_impl="mmap")
    assert len(dataset) == 5000 and 25 < dataset.sizes.mean() < 35
    assert [len(dataset[i]) for i in (0, 4999)] == [dataset.sizes[0], dataset.sizes[4999]]
    assert int(max(dataset[i].max() for i in range(0, 5000, 97))) < 1000 and int(dataset[3].min()) >= 4


def test_the_memory_of_a_process_tree_counts_its_children(tmp_path):
    script = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"
    child = subprocess.Popen([sys.executable, "-c", script])
    memory = data.TreeMemory(os.getpid(), interval=0.1)
    memory.start()
    child.wait()
    memory.stopped.set()
    memory.join()
    assert memory.take() > 200 * 2**20 and memory.take(anon=True) > 200 * 2**20  # the bytearray is anonymous memory


def test_the_plot_draws_every_stage_and_both_sentencepiece_models(tmp_path, monkeypatch):
    drawn = []
    import matplotlib.axes

    real_plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda ax, *a, **k: drawn.append(k.get("label")) or real_plot(ax, *a, **k))
    stages = [{"id": i, "title": i, "seconds": 1.0, "peak_bytes": 1e8} for i in ("1", "2a", "2b", "3")]
    results = [{"settings": {"pairs": n}, "stages": stages} for n in (100_000, 300_000)]
    spm = [{"model_type": t, "sentences": n, "peak_rss_bytes": 1e9} for t in ("bpe", "unigram") for n in (250_000, 500_000)]
    spm.append({"model_type": "bpe", "sample": 250_000, "shared_with_largest": 0.9})  # a comparison row: not a point
    data.plot(results, spm, 134.0, str(tmp_path / "figure" / "data.png"))
    assert (tmp_path / "figure" / "data.png").read_bytes()[:4] == b"\x89PNG"
    assert set(data.STAGE_NAMES.values()) <= set(drawn)
    assert {"bpe: measured", "unigram: measured", "bpe: the recipes' check", "unigram: the recipes' check"} <= set(drawn)
