"""The data benchmarks' own parts, at a small size: a data-bin fairseq's reader reads, and the figure."""

from benchmarks import data, train_start


def test_the_data_bin_is_read_by_fairseqs_own_reader(tmp_path):
    from fairseq.data import data_utils

    train_start.write_data_bin(str(tmp_path / "bin"), 5000, vocab=1000)
    dataset = data_utils.load_indexed_dataset(str(tmp_path / "bin" / "train.en-fr.en"), None, dataset_impl="mmap")
    assert len(dataset) == 5000 and 25 < dataset.sizes.mean() < 35
    assert [len(dataset[i]) for i in (0, 4999)] == [dataset.sizes[0], dataset.sizes[4999]]
    assert int(max(dataset[i].max() for i in range(0, 5000, 97))) < 1000 and int(dataset[3].min()) >= 4


def test_the_plot_draws_every_stage_and_both_sentencepiece_models(tmp_path, monkeypatch):
    drawn = []
    import matplotlib.axes

    real_plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(
        matplotlib.axes.Axes, "plot", lambda ax, *a, **k: drawn.append(k.get("label")) or real_plot(ax, *a, **k)
    )
    stages = [{"id": i, "title": i, "seconds": 1.0, "peak_bytes": 1e8} for i in ("1", "2a", "2b", "3")]
    results = [{"settings": {"pairs": n}, "stages": stages} for n in (100_000, 300_000)]
    spm = [
        {"model_type": t, "sentences": n, "peak_rss_bytes": 1e9} for t in ("bpe", "unigram") for n in (250_000, 500_000)
    ]
    spm.append({"model_type": "bpe", "sample": 250_000, "shared_with_largest": 0.9})  # a comparison row: not a point
    data.plot(results, spm, 134.0, str(tmp_path / "figure" / "data.png"))
    assert (tmp_path / "figure" / "data.png").read_bytes()[:4] == b"\x89PNG"
    assert set(data.STAGE_NAMES.values()) <= set(drawn)
    assert {"bpe: measured", "unigram: measured", "bpe: the recipes' check", "unigram: the recipes' check"} <= set(
        drawn
    )
