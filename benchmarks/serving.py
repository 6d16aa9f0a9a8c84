"""Serving speed and quality: fairseq-generate with the plugin against CTranslate2 fp32 and int8.

The same checkpoint, the same test sentences (sentencepiece pieces of the binarized test split),
the same beam and length penalty, the same number of threads, one after another on this machine.
Sentences per second count translation only (fairseq's own "Translated N sentences in T s";
CTranslate2's translate_batch timed around the call), not loading. BLEU is detokenized sacreBLEU
against the raw references.

    python -m benchmarks.serving --checkpoint runs/demo/checkpoints/average.pt --data-bin runs/demo/data-bin \\
        --spm runs/demo/data/spm.model --reference runs/demo/data/test.tgt --out runs/demo/serving.md

``make bench-serving`` runs this on the demo's model (``make demo`` first).

``--fixed-length N`` measures speed alone, on any checkpoint, trained or not: every hypothesis is
made exactly N tokens long and then ended (fairseq's ``--min-len N --max-len-a 0 --max-len-b N``;
CTranslate2's ``min_decoding_length=N, max_decoding_length=N + 1``), so both run N + 1 decoder steps
per sentence whatever the model has learned. BLEU is then not reported.
"""

import argparse
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import BIN, PLUGIN, print_table, sh  # noqa: E402
from transformer_plugin_cli.fairseq_output import sentence_lines, translation_speed  # noqa: E402
from transformer_plugin_cli.paper import decoding_flags  # noqa: E402


def fairseq_generate(a, workdir, decode):
    """(pieces of each source by id, detokenized hypotheses in id order, sentences per second)."""
    length = decoding_flags(a.beam, a.lenpen)
    if a.fixed_length:
        length += ["--min-len", str(a.fixed_length), "--max-len-a", "0", "--max-len-b", str(a.fixed_length)]
    output, _, _ = sh(
        [
            f"{BIN}/fairseq-generate",
            a.data_bin,
            "--user-dir",
            PLUGIN,
            "--path",
            a.checkpoint,
            "--gen-subset",
            "test",
            *length,
            "--batch-size",
            str(a.batch_size),
        ],
        os.path.join(workdir, "generate.out"),
    )
    sources = {i: fields[0].split() for i, fields in sentence_lines(output, "S").items()}
    hypotheses = {i: decode(fields[-1].split()) for i, fields in sentence_lines(output, "H").items()}  # score, pieces
    speed = translation_speed(output).sentences_per_second
    return sources, [hypotheses[i] for i in sorted(hypotheses)], speed


def ctranslate2_translate(model_dir, pieces, compute_type, a, decode):
    import ctranslate2

    translator = ctranslate2.Translator(
        model_dir,
        device="cpu",
        compute_type=compute_type,
        intra_threads=max(1, a.threads // a.inter_threads),
        inter_threads=a.inter_threads,
    )
    if a.fixed_length:
        length = dict(min_decoding_length=a.fixed_length, max_decoding_length=a.fixed_length + 1)
    else:
        length = dict(max_decoding_length=max(map(len, pieces)) + 51)
    start = time.perf_counter()
    results = translator.translate_batch(
        pieces, beam_size=a.beam, length_penalty=a.lenpen, max_batch_size=a.batch_size, **length
    )
    seconds = time.perf_counter() - start
    return [decode(r.hypotheses[0]) for r in results], len(pieces) / seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-bin", required=True)
    p.add_argument("--spm", required=True, help="the sentencepiece model (to detokenize CTranslate2's pieces)")
    p.add_argument("--reference", required=True, help="raw test references, one a line")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument(
        "--inter-threads",
        type=int,
        default=1,
        help="CTranslate2: batches translated at once, sharing --threads between them",
    )
    p.add_argument("--fixed-length", type=int, help="speed alone: make every hypothesis this many tokens long")
    p.add_argument("--out", help="write the table here (markdown)")
    a = p.parse_args(argv)
    import sentencepiece as spm

    from transformer_plugin_cli.tools.evaluate import score
    from transformer_plugin_cli.serving.export_ctranslate2 import main as export

    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    references = [line.rstrip("\n") for line in open(a.reference, encoding="utf-8")]
    decode = spm.SentencePieceProcessor(model_file=a.spm).decode
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        sources, hypotheses, speed = fairseq_generate(a, workdir, decode)
        rows.append(("fairseq-generate, this plugin (fp32)", hypotheses, speed))
        pieces = [sources[i] for i in sorted(sources)]
        for quantization in ("float32", "int8"):
            model_dir = os.path.join(workdir, quantization)
            if (
                export(
                    [
                        "--model-path",
                        a.checkpoint,
                        "--data-dir",
                        a.data_bin,
                        "--output-dir",
                        model_dir,
                        "--quantization",
                        quantization,
                    ]
                )
                != 0
            ):
                return 1
            hypotheses, speed = ctranslate2_translate(model_dir, pieces, quantization, a, decode)
            rows.append((f"CTranslate2 {quantization}", hypotheses, speed))
    base = rows[0][2]
    lines = [
        f"{len(references)} test sentences, beam {a.beam}, lenpen {a.lenpen}, batches of {a.batch_size}, "
        f"{a.threads} threads (CTranslate2: {a.inter_threads} batches at once); "
        + (f"every hypothesis {a.fixed_length} tokens" if a.fixed_length else "sacreBLEU detokenized"),
        "",
        "| | sentences/s | speed-up | sacreBLEU | chrF |",
        "|---|---|---|---|---|",
    ]
    for name, hypotheses, speed in rows:
        if a.fixed_length:
            quality = "| - | - |"
        else:
            scores = score(hypotheses, references)
            quality = f"| {scores['sacrebleu']:.2f} | {scores['chrf']:.2f} |"
        lines.append(f"| {name} | {speed:.1f} | {speed / base:.2f}x {quality}")
    text = "\n".join(lines)
    print_table(text, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
