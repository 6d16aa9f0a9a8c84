"""WSJ constituency parsing data (Section 6.3) from a Penn Treebank directory that the user supplies.

``prepare`` reads the ``.mrg`` files of the LDC release (``.../wsj/SS/wsj_SSNN.mrg``; the data is
licensed, nothing is downloaded). It uses the standard split: sections 02-21 train, 22 dev, 23 test.
Every tree is cleaned (``-NONE-`` elements and the constituents they leave empty, function tags and
indices, the root wrapper; see :func:`transformer_plugin_cli.parsing.trees.clean`) and linearised as in
Vinyals & Kaiser et al. (2014). It writes, in ``--out``:

- ``{train,valid,test}.words``: the source, the words of each sentence;
- ``{train,valid,test}.trees``: the target, the linearised tree;
- ``{valid,test}.gold``: the cleaned gold trees, one per line, for :mod:`transformer_plugin_cli.parsing.evalb`;
- ``report.json``: the files and trees read per section, and the trees left out, with the reason.

``--extra-trees FILE ...`` adds already-parsed sentences (one bracketed tree per line, for example
BerkeleyParser output on news text) to the training set only. This is the paper's semi-supervised
setting, with a 32K vocabulary.

    python -m preprocess.ptb prepare --treebank /data/LDC99T42/treebank_3/parsed/mrg --out data/wsj
    python -m preprocess.ptb toy-treebank --out /tmp/toy_ptb    # a small treebank in the LDC layout
"""

import argparse
import os
import random
import re
import sys
from typing import Dict, List, Optional, Sequence

from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import publish, write_text
from transformer_plugin_cli.parsing.trees import Tree, TreeError, clean, linearise, read_trees

SPLITS = {"train": [f"{s:02d}" for s in range(2, 22)], "valid": ["22"], "test": ["23"]}


class TreebankError(Exception):
    pass


def find_sections(treebank: str) -> Dict[str, List[str]]:
    """Section number -> its .mrg files, from any directory holding ``SS/wsj_SSNN.mrg`` below it."""
    sections: Dict[str, List[str]] = {}
    for root, _, files in os.walk(treebank):
        section = os.path.basename(root)
        for name in files:
            if re.fullmatch(r"wsj_\d{4}\.mrg", name, flags=re.IGNORECASE) and re.fullmatch(r"\d\d", section):
                sections.setdefault(section, []).append(os.path.join(root, name))
    return {s: sorted(files) for s, files in sorted(sections.items())}


def prepare(treebank: str, out: str, extra_trees: Sequence[str] = (), log=print) -> Dict:
    """Every split, the extra trees and report.json into ``out``. All or nothing: every input is read
    and checked first, and the files appear under their final names only when all of them were made."""
    if not os.path.isdir(treebank):
        raise TreebankError(f"{treebank} is not a directory (give the Penn Treebank's parsed/mrg directory)")
    sections = find_sections(treebank)
    missing = [s for split in SPLITS.values() for s in split if s not in sections]
    if missing:
        raise TreebankError(
            f"{treebank}: no wsj_*.mrg files for sections {', '.join(missing)} "
            "(expected .../wsj/SS/wsj_SSNN.mrg as in the LDC release)"
        )
    absent = [path for path in extra_trees if not os.path.isfile(path)]
    if absent:
        raise TreebankError(f"extra trees file(s) do not exist: {', '.join(absent)}")
    report = {"treebank": os.path.abspath(treebank), "splits": {}, "extra": {}}
    outputs: Dict[str, List[str]] = {}
    for split, numbers in SPLITS.items():
        words, targets, gold, left_out = [], [], [], []
        files = [f for s in numbers for f in sections[s]]
        for path in files:
            for i, tree in enumerate(_read_mrg(path)):
                cleaned = clean(tree)
                if cleaned is None:
                    left_out.append(f"{path} tree {i + 1}: nothing left after removing -NONE-")
                    continue
                words.append(" ".join(cleaned.words()))
                targets.append(" ".join(linearise(cleaned)))
                gold.append(str(cleaned))
        outputs[f"{split}.words"], outputs[f"{split}.trees"] = words, targets
        if split != "train":
            outputs[f"{split}.gold"] = gold
        report["splits"][split] = {
            "sections": numbers,
            "files": len(files),
            "sentences": len(words),
            "left_out": left_out,
        }
        log(
            f"{split}: sections {numbers[0]}-{numbers[-1]}, {len(files)} files, {len(words)} sentences"
            f"{f', {len(left_out)} left out (see report.json)' if left_out else ''}"
        )
    for path in extra_trees:
        words, targets, bad = _read_extra(path)
        outputs["train.words"] += words
        outputs["train.trees"] += targets
        report["extra"][path] = {"sentences": len(words), "left_out_unparsable_or_empty": bad}
        log(f"train: + {len(words)} already-parsed sentences from {path} (semi-supervised)")
    os.makedirs(out, exist_ok=True)
    publish(out, outputs, report)
    return report


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise TreebankError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e


def _read_mrg(path: str) -> List[Tree]:
    try:
        return list(read_trees(_read_text(path), path))
    except TreeError as e:
        raise TreebankError(str(e)) from e


def _read_extra(path: str):
    """Words and linearised trees of the one-tree-per-line file ``path``, and the count of lines left out."""
    words, targets, bad = [], [], 0
    for number, line in enumerate(_read_text(path).splitlines(), 1):
        try:
            trees = list(read_trees(line, f"{path}:{number}")) if line.strip() else []
        except TreeError:
            trees = []
        cleaned = clean(trees[0]) if len(trees) == 1 else None
        if cleaned is None:
            bad += 1
            continue
        words.append(" ".join(cleaned.words()))
        targets.append(" ".join(linearise(cleaned)))
    return words, targets, bad


# ---- a small treebank in the LDC layout, for the toy recipe and the tests ------------------------

_NOUNS = [
    "company",
    "market",
    "price",
    "investor",
    "bank",
    "share",
    "analyst",
    "year",
    "plan",
    "board",
    "stock",
    "bond",
    "trader",
    "rate",
    "deal",
]
_VERBS = ["rose", "fell", "said", "expects", "sold", "bought", "reported", "approved", "cut", "raised"]
_ADJS = ["big", "new", "small", "federal", "strong", "weak", "major", "foreign"]
_DETS = ["the", "a", "this", "some"]
_PREPS = ["in", "on", "for", "with", "from"]
_PARTICLES = ["up", "off", "out", "down"]


class _ToyGrammar:
    """Trees with what real WSJ trees have: function tags and indices, -NONE- traces, punctuation,
    PRT and ADVP, nested clauses."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def np(self, depth: int, tag: str = "NP") -> str:
        r = self.rng
        words = [f"(DT {r.choice(_DETS)})"]
        if r.random() < 0.4:
            words.append(f"(JJ {r.choice(_ADJS)})")
        words.append(f"(NN {r.choice(_NOUNS)})")
        inner = f"({tag} {' '.join(words)})"
        if depth < 2 and r.random() < 0.3:
            return f"({tag} (NP {' '.join(words)}) (PP (IN {r.choice(_PREPS)}) {self.np(depth + 1)}))"
        return inner

    def vp(self, depth: int) -> str:
        r = self.rng
        verb = f"(VBD {r.choice(_VERBS)})"
        choice = r.random()
        if choice < 0.25:
            rest = f"(PRT (RP {r.choice(_PARTICLES)})) {self.np(depth + 1)}"
        elif choice < 0.45 and depth < 2:
            rest = f"(SBAR (-NONE- 0) {self.clause(depth + 1)})"
        elif choice < 0.6:
            rest = f"{self.np(depth + 1)} (ADVP-TMP (RB {r.choice(['yesterday', 'again', 'later'])}))"
        else:
            rest = self.np(depth + 1)
        return f"(VP {verb} {rest})"

    def clause(self, depth: int = 0) -> str:
        r = self.rng
        if r.random() < 0.2:
            return (
                f"(S (NP-SBJ-1 {self.np(depth)[4:-1]}) (VP (VBD was) (VP (VBN {r.choice(_VERBS)}) (NP (-NONE- *-1)))))"
            )
        return f"(S (NP-SBJ {self.np(depth)[4:-1]}) {self.vp(depth)})"

    def sentence(self) -> str:
        body = self.clause()
        if self.rng.random() < 0.3:
            body = f"(S {body} (, ,) (NP-SBJ (NNS analysts)) (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-2)))))"
        return f"( {body[:-1]} (. .)) )"


def _pretty(tree: str) -> str:
    """One node per line below the top, indented, as in the LDC .mrg files."""
    out, depth = [], 0
    for token in re.findall(r"\(|\)|[^\s()]+", tree):
        if token == "(":
            out.append("\n" + "  " * depth + "(" if depth else "(")
            depth += 1
        elif token == ")":
            out.append(")")
            depth -= 1
        else:
            out.append(token if out and out[-1].endswith("(") else " " + token)
    return "".join(out) + "\n"


def write_toy_treebank(out: str, sentences_per_file: int = 20, files_per_section: int = 2, seed: int = 1) -> List[str]:
    """``out/wsj/SS/wsj_SSNN.mrg`` for sections 00-24, from a small grammar."""
    rng = random.Random(seed)
    grammar = _ToyGrammar(rng)
    written = []
    for section in range(25):
        folder = os.path.join(out, "wsj", f"{section:02d}")
        os.makedirs(folder, exist_ok=True)
        for n in range(files_per_section):
            path = os.path.join(folder, f"wsj_{section:02d}{n:02d}.mrg")
            write_text(path, "".join(_pretty(grammar.sentence()) for _ in range(sentences_per_file)))
            written.append(path)
    return written


@console_script
def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="read, clean, split and linearise the WSJ trees")
    p.add_argument("--treebank", required=True, help="directory with wsj/SS/wsj_SSNN.mrg (e.g. treebank_3/parsed/mrg)")
    p.add_argument("--out", required=True)
    p.add_argument("--extra-trees", nargs="*", default=[], help="already-parsed trees for training (semi-supervised)")
    t = sub.add_parser("toy-treebank", help="write a small treebank in the LDC layout (from a grammar)")
    t.add_argument("--out", required=True)
    t.add_argument("--sentences-per-file", type=int, default=20)
    t.add_argument("--files-per-section", type=int, default=2)
    t.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            prepare(args.treebank, args.out, args.extra_trees)
        else:
            files = write_toy_treebank(args.out, args.sentences_per_file, args.files_per_section, args.seed)
            print(f"{len(files)} .mrg files under {os.path.join(args.out, 'wsj')}")
    except TreebankError as e:
        print(f"ptb: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
