"""vaswani-import-marian as a user runs it: a MarianMT directory imported, text binarized with its dictionaries
(fairseq-preprocess --srcdict/--tgtdict), decoded by fairseq-generate as transformers' generate() decodes it,
fine-tuned by fairseq-train --finetune-from-model with the flags the import prints, averaged, and exported to
MarianMT again by vaswani-export-hf with the model's own sentencepiece models."""

import json
import re

import pytest
import torch

transformers = pytest.importorskip("transformers")

from helpers import MARIAN_V as V, PLUGIN, marian_directory, run_tool  # noqa: E402


def write_text(folder, name, sentences, pieces):
    (folder / name).write_text("".join(" ".join(pieces[t] for t in s) + "\n" for s in sentences))


@pytest.mark.e2e
def test_import_decode_fine_tune_and_average_through_the_clis(tmp_path):
    theirs = marian_directory(tmp_path / "hf", seed=5)
    out = run_tool("vaswani-import-marian", str(tmp_path / "hf"), str(tmp_path / "imported"))
    flags = re.search(r"--finetune-from-model \S+: --user-dir \S+ (.*)", out).group(1).split()
    g = torch.Generator().manual_seed(6)
    sentences = [
        torch.randint(2, V - 1, (int(n),), generator=g).tolist() for n in torch.randint(2, 12, (40,), generator=g)
    ]
    pieces = {i: p for p, i in json.loads((tmp_path / "hf" / "vocab.json").read_text()).items()}
    text = tmp_path / "text"
    text.mkdir()
    for split, part in (("train", sentences[:24]), ("valid", sentences[24:32]), ("test", sentences[32:])):
        write_text(text, f"{split}.en", part, pieces)
        write_text(text, f"{split}.de", part[::-1], pieces)
    run_tool(
        "fairseq-preprocess",
        "--source-lang",
        "en",
        "--target-lang",
        "de",
        "--trainpref",
        str(text / "train"),
        "--validpref",
        str(text / "valid"),
        "--testpref",
        str(text / "test"),
        "--srcdict",
        str(tmp_path / "imported" / "dict.en.txt"),
        "--tgtdict",
        str(tmp_path / "imported" / "dict.de.txt"),
        "--destdir",
        str(tmp_path / "bin"),
        "--workers",
        "1",
    )

    # fairseq-generate on the import decodes the test set as MarianMT's generate() does
    from transformer_plugin_cli.serving.export_transformers import generation_config

    generated = run_tool(
        "fairseq-generate",
        str(tmp_path / "bin"),
        "--user-dir",
        PLUGIN,
        "--path",
        str(tmp_path / "imported" / "checkpoint.pt"),
        "--beam",
        "4",
        "--lenpen",
        "1",
        "--max-len-a",
        "0",
        "--max-len-b",
        "12",
        "--batch-size",
        "3",
    )
    ours = {int(m.group(1)): m.group(2).split() for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", generated, re.M)}
    test = sentences[32:]
    width = max(map(len, test)) + 1
    source = torch.tensor([s + [0] + [V - 1] * (width - len(s) - 1) for s in test])
    with torch.no_grad():
        output = theirs.generate(
            input_ids=source,
            attention_mask=source.ne(V - 1).long(),
            generation_config=generation_config(theirs.config, 4, 1.0, 13),
        )
    for i in range(len(test)):
        expected = [pieces[int(t)] for t in output[i, 1:] if int(t) not in (0, V - 1)]
        assert ours[i] == expected, i

    # fine-tuned from it, with the flags the import printed, then averaged with it
    run_tool(
        "fairseq-train",
        str(tmp_path / "bin"),
        "--user-dir",
        PLUGIN,
        *flags,
        "--finetune-from-model",
        str(tmp_path / "imported" / "checkpoint.pt"),
        "--criterion",
        "vaswani_label_smoothed_cross_entropy",
        "--optimizer",
        "adam",
        "--lr",
        "1e-4",
        "--max-tokens",
        "200",
        "--max-update",
        "3",
        "--save-dir",
        str(tmp_path / "tuned"),
        "--no-epoch-checkpoints",
        "--disable-validation",
    )
    run_tool(
        "vaswani-average-checkpoints",
        "--inputs",
        str(tmp_path / "imported" / "checkpoint.pt"),
        str(tmp_path / "tuned" / "checkpoint_last.pt"),
        "--output",
        str(tmp_path / "average.pt"),
    )
    again = run_tool(
        "fairseq-generate",
        str(tmp_path / "bin"),
        "--user-dir",
        PLUGIN,
        "--path",
        str(tmp_path / "average.pt"),
        "--beam",
        "4",
        "--max-len-a",
        "0",
        "--max-len-b",
        "12",
        "--batch-size",
        "3",
    )
    assert len(re.findall(r"^H-\d+\t", again, re.M)) == len(test)
    imported = tmp_path / "imported"
    run_tool(
        "vaswani-export-hf",
        "--model-path",
        str(tmp_path / "average.pt"),
        "--data-dir",
        str(tmp_path / "bin"),
        "--spm",
        str(imported / "source.spm"),
        "--target-spm",
        str(imported / "target.spm"),
        "--output-dir",
        str(tmp_path / "hf2"),
    )
    exported = transformers.MarianMTModel.from_pretrained(tmp_path / "hf2")
    assert (exported.config.activation_function, exported.config.decoder_start_token_id) == (
        "swish",
        1,
    )  # fairseq's <pad>
    card = (tmp_path / "hf2" / "README.md").read_text()
    assert (
        "swish (as published MarianMT models have it), embeddings scaled by sqrt(d_model); a learned output bias"
        in card
    )
