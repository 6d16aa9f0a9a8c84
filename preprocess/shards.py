"""The training text in N shards, for a corpus too large for one binarization (``SHARDS=N`` in the recipes).

fairseq reads colon-joined data directories (``data-bin/shard0:data-bin/shard1``) one per epoch in turn, with
valid and test from the first and the dictionaries of the first, so every shard must be binarized with one
dictionary (fairseq #2589, #4436). This module writes the shards' text; the recipes then build the dictionary
once from all of it (``fairseq-preprocess --dict-only``) and binarize each shard with ``--srcdict``/``--tgtdict``.

Pair ``i`` goes to shard ``i mod N`` (round robin), so that every shard holds the same mixture of the corpora
that were concatenated into the training text (WMT14's Europarl, Common Crawl, News Commentary, ...), and
one epoch over a shard is not one corpus. The sides are read in step and must have the same number of
lines; each shard is written under a temporary name and renamed. Memory does not grow with the corpus.

    python -m preprocess.shards split --prefix spm/train.sp --langs en de --shards 4 --out spm/shards
    # spm/shards/train.sp.shard{0,1,2,3}.{en,de}
"""

import argparse
import contextlib
import os
import sys
from typing import List, Sequence

from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import atomic_path


class ShardError(ValueError):
    pass


def shard_prefix(out: str, prefix: str, shard: int) -> str:
    return os.path.join(out, f"{os.path.basename(prefix)}.shard{shard}")


def split(prefix: str, langs: Sequence[str], shards: int, out: str) -> List[int]:
    """Write ``PREFIX.LANG`` for each language in ``shards`` round-robin shards under ``out``; returns the
    pairs of each shard."""
    if shards < 1:
        raise ShardError(f"--shards {shards}: at least 1")
    inputs = [f"{prefix}.{lang}" for lang in langs]
    for path in inputs:
        if not os.path.isfile(path):
            raise ShardError(f"{path} does not exist")
    os.makedirs(out, exist_ok=True)
    counts = [0] * shards
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(open(path, "rb")) for path in inputs]
        writers = [
            [
                stack.enter_context(
                    open(stack.enter_context(atomic_path(f"{shard_prefix(out, prefix, s)}.{lang}")), "wb")
                )
                for lang in langs
            ]
            for s in range(shards)
        ]
        line = 0
        while True:
            rows = [reader.readline() for reader in readers]
            if not all(rows):
                break
            for writer, row in zip(writers[line % shards], rows):
                writer.write(row if row.endswith(b"\n") else row + b"\n")
            counts[line % shards] += 1
            line += 1
        if any(rows):
            longer, shorter = (inputs[i] for i in (rows.index(next(r for r in rows if r)), rows.index(b"")))
            raise ShardError(
                f"{shorter} has {line} lines and {longer} more: the sides of a corpus must be line-aligned"
            )
        if line < shards:
            raise ShardError(f"{inputs[0]} has {line} lines: too few for {shards} shards (SHARDS)")
    return counts


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vaswani-shard-text", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("split", help="PREFIX.LANG for each language, in N round-robin shards")
    p.add_argument("--prefix", required=True)
    p.add_argument("--langs", nargs="+", required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        counts = split(args.prefix, args.langs, args.shards, args.out)
    except ShardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{sum(counts):,} pairs in {len(counts)} shards under {args.out}: " + ", ".join(f"{c:,}" for c in counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
