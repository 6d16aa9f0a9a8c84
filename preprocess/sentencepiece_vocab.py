"""A shared (joint) subword vocabulary with sentencepiece, as the paper's shared BPE vocabulary.

``train``: learn one model on the source and target training text together (Section 5.1: "a shared
source-target vocabulary"); ``--model-type bpe`` for byte-pair encoding (En-De, ~37,000 tokens),
``unigram`` for a word-piece style vocabulary (En-Fr, 32,000).

``encode``: write each input file as space-separated pieces, line by line (fairseq-preprocess reads
these); the line count is checked, and outputs are written to a temporary name and renamed.

fairseq-generate ``--post-process sentencepiece`` turns pieces back into text.

    python -m preprocess.sentencepiece_vocab train --inputs train.en train.de --model-prefix spm --vocab-size 37000
    python -m preprocess.sentencepiece_vocab encode --model spm.model --inputs train.en --outputs train.sp.en
"""

import argparse
import os
import re
import sys
from typing import List

from transformer_plugin_cli.files import atomic_path, exits_on_a_full_disk


class VocabularyTooLargeError(ValueError):
    """The training text has fewer distinct pieces than the vocabulary size asked for."""


def train(inputs: List[str], model_prefix: str, vocab_size: int, model_type: str = "bpe",
          character_coverage: float = 1.0, input_sentence_size: int = 10_000_000, threads: int = 2,
          vocab_size_name: str = "--vocab-size") -> str:  # fmt: skip
    """Learn the joint model; returns the .model path. ``vocab_size_name``: what the user set the
    vocabulary size with (a recipe's variable), named when the text is too small for it."""
    import sentencepiece as spm

    for path in inputs:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"training text {path} does not exist")
    os.makedirs(os.path.dirname(os.path.abspath(model_prefix)), exist_ok=True)
    tmp_prefix = model_prefix + ".tmp"
    try:
        _train(spm, inputs, tmp_prefix, vocab_size, model_type, character_coverage, input_sentence_size, threads)
    except RuntimeError as e:
        most = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)", str(e))
        if not most:
            raise
        raise VocabularyTooLargeError(
            f"{vocab_size_name}={vocab_size} is more than the training text ({', '.join(inputs)}) allows:"
            f" at most {most.group(1)} {model_type} pieces; set {vocab_size_name} lower"
        ) from None
    for ext in (".model", ".vocab"):
        os.replace(tmp_prefix + ext, model_prefix + ext)
    return model_prefix + ".model"


def _train(spm, inputs, tmp_prefix, vocab_size, model_type, character_coverage, input_sentence_size, threads):
    spm.SentencePieceTrainer.train(
        input=",".join(inputs),
        model_prefix=tmp_prefix,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=threads,
        # fairseq's dictionary adds its own <s>, <pad>, </s>, <unk>: keep sentencepiece's out of the text
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        minloglevel=1,
    )


def encode(model: str, inputs: List[str], outputs: List[str]) -> List[int]:
    """Encode each input into its output; returns the line counts."""
    import sentencepiece as spm

    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    processor = spm.SentencePieceProcessor(model_file=model)
    counts = []
    for src, dst in zip(inputs, outputs):
        n = 0
        with open(src, encoding="utf-8") as fin, atomic_path(dst) as tmp, open(tmp, "w", encoding="utf-8") as fout:
            for line in fin:
                fout.write(" ".join(processor.encode(line.rstrip("\n"), out_type=str)) + "\n")
                n += 1
        counts.append(n)
    return counts


@exits_on_a_full_disk
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="learn a joint vocabulary")
    t.add_argument("--inputs", nargs="+", required=True)
    t.add_argument("--model-prefix", required=True)
    t.add_argument("--vocab-size", type=int, required=True)
    t.add_argument("--model-type", default="bpe", choices=["bpe", "unigram"])
    t.add_argument("--character-coverage", type=float, default=1.0)
    t.add_argument("--input-sentence-size", type=int, default=10_000_000, help="sentences sampled for training")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--vocab-size-name", default="--vocab-size",
                   help="the setting to name when the text is too small for the size (a recipe's variable)")
    e = sub.add_parser("encode", help="split text into pieces")
    e.add_argument("--model", required=True)
    e.add_argument("--inputs", nargs="+", required=True)
    e.add_argument("--outputs", nargs="+", required=True)
    args = parser.parse_args(argv)
    if args.command == "train":
        try:
            path = train(args.inputs, args.model_prefix, args.vocab_size, args.model_type, args.character_coverage,
                         args.input_sentence_size, args.threads, args.vocab_size_name)  # fmt: skip
        except (VocabularyTooLargeError, FileNotFoundError) as e:
            print(f"sentencepiece_vocab: error: {e}", file=sys.stderr)
            return 2
        print(f"sentencepiece {args.model_type} model with {args.vocab_size} pieces: {path}")
    else:
        for src, dst, n in zip(args.inputs, args.outputs, encode(args.model, args.inputs, args.outputs)):
            print(f"encoded {n} lines: {src} -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
