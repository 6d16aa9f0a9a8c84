"""--compile-layers on and --compile-loss on in fairseq-train over an epoch of real text (modules/compiled_layers.py):
the batches' shapes compile a handful of graphs, not one a shape; the checkpoint resumes eagerly and translates."""

import re

import pytest

from helpers import PLUGIN, real_english_german, run_tool

pytestmark = pytest.mark.e2e

MAX_GRAPHS = 8  # measured 4-6: each kind of layer with and without a padding mask, a batch of one sentence
MAX_LOSS_GRAPHS = 2  # measured 1: the loss's logits (tokens, V), one graph for every batch


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    pairs = real_english_german(2700)
    for split, part in [("train", pairs[:2500]), ("valid", pairs[2500:])]:
        for side, index in [("en", 0), ("de", 1)]:
            (root / f"{split}.{side}").write_text("".join(" ".join(p[index].split()[:40]) + "\n" for p in part))
    run_tool(
        "fairseq-preprocess",
        *("--source-lang", "en", "--target-lang", "de", "--joined-dictionary", "--workers", "1"),
        *("--trainpref", str(root / "train"), "--validpref", str(root / "valid"), "--destdir", str(root / "bin")),
        *("--thresholdsrc", "2"),
    )
    return root / "bin"


def train(data, save_dir, *flags):
    return run_tool(
        "fairseq-train",
        str(data),
        *("--user-dir", PLUGIN, "--arch", "vaswani_tiny", "--share-all-embeddings", "--seed", "1"),
        *("--optimizer", "adam", "--lr", "0.001", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100"),
        *("--criterion", "vaswani_label_smoothed_cross_entropy", "--max-tokens", "1000"),
        *("--save-dir", str(save_dir), "--no-epoch-checkpoints", "--log-interval", "10", "--num-workers", "0"),
        *flags,
    )


def compilations(log):
    """(layer, batch size, length) of each compilation the log names"""
    return re.findall(r"torch.compile: compiled (\w+Layer)\.sublayers for input \((\d+), (\d+), \d+\)", log)


def loss_compilations(log):
    """(tokens, V) of each compilation of the loss the log names"""
    return re.findall(r"torch.compile: compiled smoothed_loss_from_logits for input \((\d+), (\d+)\)", log)


def test_an_epoch_of_real_text_compiles_a_handful_of_graphs_and_resumes_eagerly(data, tmp_path):
    compiling = ("--compile-layers", "on", "--compile-loss", "on", "--required-seq-len-multiple", "8")
    log = train(data, tmp_path, *compiling, "--max-epoch", "1")
    updates = int(re.findall(r"num_updates (\d+)", log)[-1])
    compiled = compilations(log)
    assert {layer for layer, _, _ in compiled} == {"EncoderLayer", "DecoderLayer"}
    assert len(compiled) <= MAX_GRAPHS, f"{len(compiled)} compilations in {updates} updates: {compiled}"
    assert updates > 5 * len(compiled)  # batches of many shapes, few graphs
    losses = loss_compilations(log)
    assert 1 <= len(losses) <= MAX_LOSS_GRAPHS, losses

    resumed = train(data, tmp_path, "--compile-layers", "off", "--compile-loss", "off", "--max-epoch", "2")
    assert "Loaded checkpoint" in resumed and not compilations(resumed) and not loss_compilations(resumed)
    assert int(re.findall(r"num_updates (\d+)", resumed)[-1]) > updates
    out = run_tool(
        "fairseq-generate",
        str(data),
        *("--user-dir", PLUGIN, "--path", str(tmp_path / "checkpoint_last.pt"), "--gen-subset", "valid"),
        *("--beam", "4", "--batch-size", "64", "--max-len-b", "20"),
    )
    assert len(re.findall(r"^H-\d+", out, flags=re.M)) == 200
