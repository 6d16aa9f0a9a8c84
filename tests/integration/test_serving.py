"""Serving a trained model the ways users do, on a small model trained on sentencepiece text:
fairseq-interactive with ``--bpe sentencepiece``, ``VaswaniTransformerModel.from_pretrained(...).translate()``,
and ``python -m transformer_plugin_cli.serving.translate`` on its CTranslate2 export. All three take and give plain
text. The model (``served``, tests/integration/conftest.py) is shared with test_export_transformers.py."""

import subprocess
import sys

import pytest

from helpers import PLUGIN, run_in_process
from transformer_plugin_cli.fairseq_output import sentence_lines
from transformer_plugin_cli.paper import decoding_flags


@pytest.fixture(scope="module")
def ct2(served):
    """The served checkpoint's CTranslate2 export."""
    from transformer_plugin_cli.serving.export_ctranslate2 import main as export

    root, _, _ = served
    assert (
        export(
            [
                "--model-path",
                str(root / "ckpt" / "checkpoint_last.pt"),
                "--data-dir",
                str(root / "bin"),
                "--output-dir",
                str(root / "ct2"),
            ]
        )
        == 0
    )
    return root / "ct2"


@pytest.fixture(scope="module")
def interactive(served):
    """Detokenized hypotheses of fairseq-interactive for the test sentences, in input order."""
    root, spm, lines = served
    out = run_in_process(
        "fairseq-interactive",
        str(root / "bin"),
        "--user-dir",
        PLUGIN,
        "--path",
        str(root / "ckpt" / "checkpoint_last.pt"),
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        "--bpe",
        "sentencepiece",
        "--sentencepiece-model",
        spm,
        *decoding_flags(),
        "--buffer-size",
        "8",
        "--batch-size",
        "8",
        stdin="".join(line + "\n" for line in lines),
    )
    found = {i: fields[1] for i, fields in sentence_lines(out, "D").items()}
    assert sorted(found) == list(range(len(lines))), out[-2000:]
    return [found[i] for i in range(len(lines))]


def test_fairseq_interactive_with_sentencepiece_translates_plain_text(served, interactive):
    """Plain text in, plain text out, and the translations fairseq-generate makes of the same
    sentences binarized; the model has learned to copy most of them."""
    root, spm, lines = served
    hypotheses = interactive
    out = run_in_process(
        "fairseq-generate",
        str(root / "bin"),
        "--user-dir",
        PLUGIN,
        "--gen-subset",
        "test",
        "--path",
        str(root / "ckpt" / "checkpoint_last.pt"),
        *decoding_flags(),
        "--post-process",
        "sentencepiece",
        "--batch-size",
        "8",
    )
    generated = {i: fields[1] for i, fields in sentence_lines(out, "D").items()}
    assert hypotheses == [generated[i] for i in range(len(lines))]
    assert sum(h == line for h, line in zip(hypotheses, lines)) >= len(lines) // 2, list(zip(lines, hypotheses))


def test_from_pretrained_translate_equals_fairseq_interactive(served, interactive):
    from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel

    root, spm, lines = served
    hub = VaswaniTransformerModel.from_pretrained(
        str(root / "ckpt"),
        checkpoint_file="checkpoint_last.pt",
        data_name_or_path=str(root / "bin"),
        source_lang="src",
        target_lang="tgt",
        bpe="sentencepiece",
        sentencepiece_model=spm,
    )
    assert isinstance(hub.models[0], VaswaniTransformerModel)
    translated = hub.translate(lines, beam=4, lenpen=0.6, max_len_a=1, max_len_b=50)
    assert translated == interactive
    assert sum(t == line for t, line in zip(translated, lines)) >= len(lines) // 2  # the copies it learned
    best = hub.generate([hub.encode(lines[0])], beam=4, print_alignment="hard")[0][0]  # asked for at generation
    assert len(best["alignment"]) == len(best["tokens"]) - 1  # a source position per target token but </s>


def test_translate_command_gives_fairseqs_translations_in_order(served, ct2, interactive, tmp_path):
    """The CTranslate2 export through the translate command: one line out per line in, empty lines
    kept, in order across chunks and batches (also translated two batches at once), and the same
    translations as fairseq-interactive."""
    root, spm, lines = served
    given = lines[:5] + [""] + lines[5:]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in given))
    command = [
        sys.executable,
        "-m",
        "transformer_plugin_cli.serving.translate",
        "--model",
        str(ct2),
        "--spm",
        spm,
        "--chunk-size",
        "4",
        "--batch-size",
        "3",
    ]
    piped = subprocess.run(command, input="".join(line + "\n" for line in given), capture_output=True, text=True)
    assert piped.returncode == 0, piped.stderr
    out = tmp_path / "out.txt"
    in_parallel = ["--inter-threads", "2", "--threads", "1"]  # two batches at once: the same lines, in order
    assert (
        subprocess.run([*command, *in_parallel, "--input", str(tmp_path / "in.txt"), "--output", str(out)]).returncode
        == 0
    )
    assert out.read_text() == piped.stdout and not (tmp_path / "out.txt.partial").exists()
    translated = piped.stdout.splitlines()
    assert len(translated) == len(given) and translated[5] == ""
    assert translated[:5] + translated[6:] == interactive


def test_translate_command_names_what_is_wrong(served, ct2, tmp_path):
    root, spm, _ = served

    def translate(*args):
        return subprocess.run(
            [sys.executable, "-m", "transformer_plugin_cli.serving.translate", *args],
            input="a\n",
            capture_output=True,
            text=True,
        )

    missing = translate("--model", str(tmp_path / "nowhere"), "--spm", spm)
    assert missing.returncode == 1 and f"--model {tmp_path / 'nowhere'}: no such file" in missing.stderr
    not_ct2 = translate("--model", str(root / "ckpt"), "--spm", spm)
    assert not_ct2.returncode == 1 and "not a CTranslate2 model" in not_ct2.stderr
    unreadable = translate(
        "--model",
        str(ct2),
        "--spm",
        spm,
        "--input",
        str(tmp_path / "absent.txt"),
        "--output",
        str(tmp_path / "out.txt"),
    )
    assert unreadable.returncode == 1 and "absent.txt" in unreadable.stderr
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "out.txt.partial").exists()
