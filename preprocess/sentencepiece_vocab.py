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
import itertools
import json
import os
import re
import sys
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import atomic_path


class VocabularyTooLargeError(ValueError):
    """The training text has fewer distinct pieces than the vocabulary size asked for."""


class NotEnoughMemoryError(MemoryError):
    """sentencepiece would need more memory for its sample than the machine has."""


# sentencepiece's trainer loads every sentence of its sample and, for unigram, a suffix array over them: its
# peak resident memory grows with the characters it loads. Measured with benchmarks/data.py --spm on text
# drawn from real word frequencies, 250k to 2M sentences of 134 characters (docs/benchmarks.md): bytes = fixed
# + per character, a line above every measured point (BPE: 0.22 GB at 250k sentences, 1.08 GB at 2M, its growth
# slowing as fewer new words come; unigram: 0.75 GB at 250k, 2.89 GB at 1M, 2.8 GB more per million).
MEMORY_FIXED = {"bpe": 0.15e9, "unigram": 0.1e9}
MEMORY_PER_CHARACTER = {"bpe": 4.0, "unigram": 21.5}


def memory_needed(model_type: str, sentences: int, mean_characters: float) -> float:
    """About how many bytes sentencepiece's ``model_type`` trainer needs for ``sentences`` sentences of
    ``mean_characters`` characters (bytes of UTF-8 text, a close proxy) on average."""
    return MEMORY_FIXED[model_type] + MEMORY_PER_CHARACTER[model_type] * sentences * mean_characters


def available_memory() -> Optional[float]:
    """Bytes this process may still allocate: the kernel's MemAvailable, or less under a cgroup limit."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            found += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            current = int(f.read())
        if limit != "max":
            found.append(int(limit) - current)
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def text_size(paths: Sequence[str], sample: int = 1 << 26, pieces: int = 64) -> Tuple[int, int]:
    """(lines, bytes) of the files. A file larger than ``sample`` bytes has its lines counted in ``pieces``
    stretches spread evenly over it, ``sample`` bytes in all, and scaled to its size (its corpora may have
    been concatenated, each with its own line lengths): the memory check needs no exact count, and a whole
    pass would read a corpus of many GB once more before sentencepiece reads it."""
    lines = size = 0
    for path in paths:
        total = os.path.getsize(path)
        with open(path, "rb") as f:
            if total <= sample:
                lines += f.read().count(b"\n")
            else:
                stretch, counted = sample // pieces, 0
                for i in range(pieces):
                    f.seek(i * (total - stretch) // (pieces - 1))
                    counted += f.read(stretch).count(b"\n")
                lines += round(counted * total / (stretch * pieces))
        size += total
    return lines, size


def round_down(n: int) -> int:
    """``n`` rounded down to two significant digits (3,456,789 -> 3,400,000)."""
    step = 10 ** max(0, len(str(n)) - 2)
    return n // step * step


def check_memory(
    inputs: Sequence[str], model_type: str, input_sentence_size: int, name: str, available: Optional[float] = None
) -> None:
    """Stop before training when the sample would not fit: NotEnoughMemoryError naming ``name`` (the
    setting of the sample's size: a recipe's variable), with the largest sample that would."""
    available = available_memory() if available is None else available
    if available is None:
        return
    lines, size = text_size(inputs)
    sentences = min(lines, input_sentence_size)
    mean = size / max(lines, 1)
    needed = memory_needed(model_type, sentences, mean)
    if needed <= available:
        return
    fits = max(0, int((available - MEMORY_FIXED[model_type]) / (MEMORY_PER_CHARACTER[model_type] * mean)))
    raise NotEnoughMemoryError(
        f"sentencepiece's {model_type} training on {sentences:,} sentences of {', '.join(inputs)} ({mean:.0f} "
        "characters"
        f" on average) needs about {needed / 1e9:.1f} GB of memory, and {available / 1e9:.1f} GB is available here:"
        f" set {name} to {round_down(fits):,} or fewer sentences (a sample; docs/benchmarks.md has the"
        f" measurements), or train the vocabulary on a machine with more memory"
    )


def train(
    inputs: List[str],
    model_prefix: str,
    vocab_size: int,
    model_type: str = "bpe",
    character_coverage: float = 1.0,
    input_sentence_size: int = 10_000_000,
    threads: int = 2,
    vocab_size_name: str = "--vocab-size",
    sample_name: str = "--input-sentence-size",
) -> str:
    """Learn the joint model; returns the .model path. ``vocab_size_name``: what the user set the
    vocabulary size with (a recipe's variable), named when the text is too small for it; ``sample_name``
    likewise for the sample's size, named when the sample would not fit in memory."""
    import sentencepiece as spm

    for path in inputs:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"training text {path} does not exist")
    check_memory(inputs, model_type, input_sentence_size, sample_name)
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


def encode(
    model: str,
    inputs: List[str],
    outputs: List[str],
    threads: int = 1,
    batch: int = 10_000,
    known: Optional[set] = None,
    unknown: Optional[Dict[str, Tuple[int, Counter]]] = None,
    positions: int = 0,
    too_long: Optional[Dict[str, List[int]]] = None,
    prefix: str = "",
) -> List[int]:
    """Encode each input into its output, ``batch`` lines at a time on ``threads`` of sentencepiece's own
    threads (1.9x as fast with 2 as with 1; memory bounded by ``batch``); returns the line counts. With ``known``
    (a dictionary's pieces), ``unknown[input]`` is set to (its pieces, a count of each piece not known: fairseq's
    <unk>). With ``positions`` (a model's), ``too_long[input]`` is set to the numbers (from 1) of the lines whose
    pieces and the </s> fairseq adds pass them. ``prefix``: a piece put before every line's (a multilingual
    parent's ``>>xx<<``, one id in its dictionary, as MarianTokenizer puts it)."""
    import sentencepiece as spm

    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    processor = spm.SentencePieceProcessor(model_file=model)
    counts = []
    for src, dst in zip(inputs, outputs):
        n, pieces_in, missing, long_lines = 0, 0, Counter(), []
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        with open(src, encoding="utf-8") as fin, atomic_path(dst) as tmp, open(tmp, "w", encoding="utf-8") as fout:
            while True:
                lines = [line.rstrip("\n") for line in itertools.islice(fin, batch)]
                if not lines:
                    break
                pieces = processor.encode(lines, out_type=str, num_threads=threads)
                if prefix:
                    pieces = [[prefix, *p] for p in pieces]
                fout.writelines(" ".join(p) + "\n" for p in pieces)
                if positions:
                    long_lines += [n + i + 1 for i, p in enumerate(pieces) if len(p) + 1 > positions]
                n += len(lines)
                if known is not None:
                    pieces_in += sum(map(len, pieces))
                    missing.update(piece for line in pieces for piece in line if piece not in known)
        counts.append(n)
        if known is not None:
            unknown[src] = (pieces_in, missing)
        if positions:
            too_long[src] = long_lines
    return counts


def dictionary_pieces(path: str) -> set:
    """The symbols of a fairseq dictionary file (a symbol and its count a line)."""
    with open(path, encoding="utf-8") as f:
        return {line.rsplit(" ", 1)[0] for line in f if line.strip()}


def unknown_report(unknown: Dict[str, Tuple[int, Counter]], dictionary: str, positions: int = 0, too_long=None) -> dict:
    """What of each input the dictionary lacks (``encode``'s ``unknown``): its pieces, the unknown ones and their
    share; the commonest ten over all inputs. With ``positions``: each input's lines longer than them (their count
    and the first ten line numbers)."""
    per_input = {}
    for path, (pieces, missing) in unknown.items():
        lacking = sum(missing.values())
        per_input[os.path.basename(path)] = {"pieces": pieces, "unknown": lacking, "share": lacking / max(1, pieces)}
        if positions:
            long_lines = too_long[path]
            per_input[os.path.basename(path)].update(too_long=len(long_lines), too_long_lines=long_lines[:10])
    commonest = sum((missing for _, missing in unknown.values()), Counter()).most_common(10)
    found = {"dictionary": dictionary, "inputs": per_input, "commonest": commonest}
    return {**found, "positions": positions} if positions else found


def too_long_said(name: str, count: int, first: List[int], positions: int) -> str:
    """One line: an input's lines longer than a model's positions."""
    lines = ", ".join(map(str, first)) + (", ..." if count > len(first) else "")
    return f"{name}: {count:,} lines longer than the parent's {positions} positions (lines {lines})"


@console_script
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
    t.add_argument(
        "--vocab-size-name",
        default="--vocab-size",
        help="the setting to name when the text is too small for the size (a recipe's variable)",
    )
    t.add_argument(
        "--input-sentence-size-name",
        default="--input-sentence-size",
        help="the setting to name when the sample would not fit in memory (a recipe's variable)",
    )
    e = sub.add_parser("encode", help="split text into pieces")
    e.add_argument("--model", required=True)
    e.add_argument("--inputs", nargs="+", required=True)
    e.add_argument("--outputs", nargs="+", required=True)
    e.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="sentencepiece's threads")
    e.add_argument("--dictionary", help="a fairseq dictionary (a parent model's): count the pieces it lacks (<unk>)")
    e.add_argument("--unknown-report", help="with --dictionary: JSON of the unknown pieces per input")
    e.add_argument("--prefix", default="", help="a piece before every line's (a multilingual parent's >>xx<<)")
    e.add_argument(
        "--positions",
        type=int,
        default=0,
        help="with --dictionary: the model's positions; the lines longer than them are counted in the report",
    )
    args = parser.parse_args(argv)
    if args.command == "train":
        try:
            path = train(
                args.inputs,
                args.model_prefix,
                args.vocab_size,
                args.model_type,
                args.character_coverage,
                args.input_sentence_size,
                args.threads,
                args.vocab_size_name,
                args.input_sentence_size_name,
            )
        except (VocabularyTooLargeError, NotEnoughMemoryError, FileNotFoundError) as e:
            print(f"sentencepiece_vocab: error: {e}", file=sys.stderr)
            return 2
        print(f"sentencepiece {args.model_type} model with {args.vocab_size} pieces: {path}")
    else:
        if bool(args.dictionary) != bool(args.unknown_report):
            parser.error("--dictionary and --unknown-report go together")
        if args.positions and not args.dictionary:
            parser.error("--positions goes with --dictionary and --unknown-report")
        known = dictionary_pieces(args.dictionary) if args.dictionary else None
        unknown, too_long = {}, {}
        counts = encode(
            args.model,
            args.inputs,
            args.outputs,
            args.threads,
            known=known,
            unknown=unknown,
            positions=args.positions,
            too_long=too_long,
            prefix=args.prefix,
        )
        for src, dst, n in zip(args.inputs, args.outputs, counts):
            print(f"encoded {n} lines: {src} -> {dst}")
        if known is not None:
            report = unknown_report(unknown, args.dictionary, args.positions, too_long)
            with atomic_path(args.unknown_report) as tmp, open(tmp, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=1, ensure_ascii=False)
            for name, r in report["inputs"].items():
                print(
                    f"{name}: {r['unknown']:,} of {r['pieces']:,} pieces ({r['share']:.2%}) not in {args.dictionary} "
                    "(<unk>)"
                )
                if r.get("too_long"):
                    print(too_long_said(name, r["too_long"], r["too_long_lines"], args.positions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
