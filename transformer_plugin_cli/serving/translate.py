"""Translate plain text with a model exported by ``export_ctranslate2``: sentencepiece in, beam search, sentencepiece
out.

    vaswani-export-ct2 --model-path checkpoints/average.pt \\
        --data-dir data-bin/wmt14_en_de --output-dir ct2_model --quantization int8
    vaswani-translate --model ct2_model --spm data/spm.model < newstest2014.en > out.de
    vaswani-translate --model ct2_model --spm data/spm.model --input a.en b.en --output out.de

One line in, one line out, in order; an empty line gives an empty line. The defaults are the paper's
decoding settings (Section 6.1, ``transformer_plugin_cli/paper.py``): beam 4, length penalty 0.6 (fairseq's
``--lenpen``, which CTranslate2's ``length_penalty`` matches), at most 50 tokens more than the source. Lines are
read ``--chunk-size`` at a time and translated in batches of ``--batch-size`` sentences, which
CTranslate2 sorts by length. fairseq is not imported.
"""

import argparse
import os
import sys
from typing import Iterable, Iterator, List

from ..console import console_script
from ..files import atomic_path
from ..paper import DECODING


def chunks(lines: Iterable[str], size: int) -> Iterator[List[str]]:
    chunk = []
    for line in lines:
        chunk.append(line.rstrip("\n"))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_lines(paths: List[str]) -> Iterator[str]:
    if not paths or paths == ["-"]:
        yield from sys.stdin
        return
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from f


class Translator:
    """A CTranslate2 model and its sentencepiece model: ``translate(lines)`` gives detokenized lines."""

    def __init__(
        self,
        model_dir: str,
        spm_model: str,
        device: str = "cpu",
        compute_type: str = "default",
        threads: int = 0,
        beam: int = DECODING.beam,
        lenpen: float = DECODING.lenpen,
        max_len_b: int = DECODING.max_len_b,
        batch_size: int = 64,
        inter_threads: int = 1,
    ):
        import ctranslate2
        import sentencepiece

        for path, what in ((model_dir, "--model"), (spm_model, "--spm")):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{what} {path}: no such file or directory")
        if not os.path.isfile(os.path.join(model_dir, "model.bin")):
            raise ValueError(
                f"--model {model_dir}: not a CTranslate2 model (no model.bin); make one with vaswani-export-ct2"
            )
        self.spm = sentencepiece.SentencePieceProcessor(model_file=spm_model)
        self.translator = ctranslate2.Translator(
            model_dir, device=device, compute_type=compute_type, intra_threads=threads, inter_threads=inter_threads
        )
        self.beam, self.lenpen, self.max_len_b, self.batch_size = beam, lenpen, max_len_b, batch_size

    def translate(self, lines: List[str]) -> List[str]:
        pieces = self.spm.encode(lines, out_type=str)
        todo = [i for i, p in enumerate(pieces) if p]
        out = [""] * len(lines)
        if not todo:
            return out
        results = self.translator.translate_batch(
            [pieces[i] for i in todo],
            beam_size=self.beam,
            length_penalty=self.lenpen,
            max_batch_size=self.batch_size,
            max_decoding_length=max(len(pieces[i]) for i in todo) + self.max_len_b + 1,
        )
        for i, result in zip(todo, results):
            out[i] = self.spm.decode(result.hypotheses[0])
        return out


def translate_stream(translator: Translator, lines: Iterable[str], out, chunk_size: int) -> None:
    for chunk in chunks(lines, chunk_size):
        out.write("".join(line + "\n" for line in translator.translate(chunk)))
        out.flush()


@console_script
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="directory written by vaswani-export-ct2")
    p.add_argument("--spm", required=True, help="the sentencepiece model the training data was encoded with")
    p.add_argument("--input", nargs="*", default=[], help="files to translate, in order (default: stdin)")
    p.add_argument("--output", help="write here (default: stdout)")
    p.add_argument("--beam", type=int, default=DECODING.beam)
    p.add_argument("--lenpen", type=float, default=DECODING.lenpen, help="length penalty alpha (fairseq's --lenpen)")
    p.add_argument(
        "--max-len-b", type=int, default=DECODING.max_len_b, help="at most this many tokens more than the source"
    )
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    p.add_argument("--chunk-size", type=int, default=10000, help="lines read and translated at a time")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--compute-type", default="default", help="CTranslate2's: default (as exported), int8, float32, ...")
    p.add_argument("--threads", type=int, default=0, help="threads per translation (0: CTranslate2's default)")
    p.add_argument(
        "--inter-threads",
        type=int,
        default=1,
        help="batches translated at once, each with --threads threads (CTranslate2's inter_threads)",
    )
    a = p.parse_args(argv)
    try:
        translator = Translator(
            a.model,
            a.spm,
            a.device,
            a.compute_type,
            a.threads,
            a.beam,
            a.lenpen,
            a.max_len_b,
            a.batch_size,
            a.inter_threads,
        )
        if not a.output:
            translate_stream(translator, read_lines(a.input), sys.stdout, a.chunk_size)
            return 0
        with (
            atomic_path(a.output) as partial,
            open(partial, "w", encoding="utf-8") as out,
        ):  # --output appears only complete
            translate_stream(translator, read_lines(a.input), out, a.chunk_size)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"translate: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
