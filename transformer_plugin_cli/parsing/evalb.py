"""Labelled bracketing scores with EVALB's COLLINS.prm conventions (Table 4 reports this F1).

COLLINS.prm, as implemented here:

- brackets are (label, start, end) over the words; preterminals (POS tags) are not brackets;
- ``DELETE_LABEL TOP -NONE- , : `` '' .``: a root wrapper labelled TOP (or ROOT, or unlabelled) is not
  a bracket; words tagged as punctuation or ``-NONE-`` are removed before spans are counted, so that
  attaching punctuation higher or lower is never an error. The tags come from the gold tree, because
  predicted trees here carry ``XX`` instead of POS tags (the words are the same in both trees);
- ``EQ_LABEL ADVP PRT``: the two labels count as one;
- function tags and indices are ignored (``NP-SBJ-1`` is ``NP``), as EVALB does;
- matching is on multisets: a bracket occurring twice in both trees matches twice;
- ``CUTOFF_LEN 40``: figures for all sentences and for sentences of at most 40 words (``-NONE-``
  excluded, punctuation included);
- a sentence whose words differ between the trees is reported and skipped, as EVALB does.

A constituent whose words are all removed (made only of punctuation) is not a bracket, here as in
EVALB. On every tree this project's pipeline produces, the figures are EVALB's. Two differences remain,
both only with gold trees from elsewhere (the pipeline's gold trees, made by ``trees.clean``, have
neither): a root labelled ``ROOT`` is removed here like ``TOP``, where COLLINS.prm deletes only
``TOP`` (EVALB counts the ROOT bracket, which a parser's output without it never matches); and a label
with ``|`` (``ADVP|PRT``) is cut at the ``|`` here, where EVALB compares it whole.

    vaswani-evalb --gold test.gold.trees --test parsed.trees
    vaswani-evalb --gold test.gold.trees --generate-output gen.out --source test.words \\
        --trees-out parsed.trees --paper "91.3 (WSJ only)"
"""

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..console import console_script
from ..files import write_json, write_lines
from .trees import Repairs, Tree, TreeError, clean, delinearise, events, parse_tree, strip_function_tags

DELETE_LABELS = frozenset({"TOP", "ROOT", "", "-NONE-", ",", ":", "``", "''", "."})
EQUIVALENT_LABELS = {"PRT": "ADVP"}
CUTOFF_LEN = 40


def brackets(tree: Tree, deleted: Sequence[bool]) -> Counter:
    """The multiset of labelled spans of ``tree``; ``deleted[i]`` removes word i before spans are counted."""
    kept_before = [0]
    for d in deleted:
        kept_before.append(kept_before[-1] + (not d))
    spans: Counter = Counter()

    i, starts = 0, []  # i: the words so far; starts: where each open constituent began
    for kind, item in events(tree):
        if kind == "open":
            starts.append(i)
        elif kind == "word":
            i += 1
        else:
            first = starts.pop()
            label = strip_function_tags(item.label)
            start, end = kept_before[first], kept_before[i]
            if not item.is_preterminal() and label not in DELETE_LABELS and end > start:
                spans[(EQUIVALENT_LABELS.get(label, label), start, end)] += 1
    return spans


@dataclass
class SentenceScore:
    length: int
    matched: int
    gold: int
    test: int
    error: Optional[str] = None

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold if self.gold else 100.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test if self.test else 100.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score_sentence(gold: Tree, test: Tree) -> SentenceScore:
    gold_clean, test_clean = clean(gold), clean(test)
    if gold_clean is None or test_clean is None:
        return SentenceScore(0, 0, 0, 0, error="a tree with no words (only -NONE- elements)")
    gold_words = gold_clean.words() if gold_clean else []
    test_words = test_clean.words() if test_clean else []
    if gold_words != test_words:
        return SentenceScore(
            len(gold_words), 0, 0, 0, error=f"words differ: gold {gold_words[:8]} test {test_words[:8]}"
        )
    deleted = [p.label in DELETE_LABELS for p in gold_clean.preterminals()]
    g, t = brackets(gold_clean, deleted), brackets(test_clean, deleted)
    return SentenceScore(len(gold_words), sum((g & t).values()), sum(g.values()), sum(t.values()))


def corpus_figures(scores: List[SentenceScore]) -> Dict[str, float]:
    valid = [s for s in scores if s.error is None]
    matched, gold, test = (sum(getattr(s, k) for s in valid) for k in ("matched", "gold", "test"))
    recall = 100.0 * matched / gold if gold else 0.0
    precision = 100.0 * matched / test if test else 0.0
    return {
        "sentences": len(valid),
        "skipped": len(scores) - len(valid),
        "recall": round(recall, 2),
        "precision": round(precision, 2),
        "f1": round(2 * recall * precision / (recall + precision), 2) if recall + precision else 0.0,
        "complete_match": round(100.0 * sum(s.matched == s.gold == s.test for s in valid) / len(valid), 2)
        if valid
        else 0.0,
        "matched": matched,
        "gold_brackets": gold,
        "test_brackets": test,
    }


def score_corpus(gold: Sequence[Tree], test: Sequence[Tree]) -> Tuple[Dict, List[SentenceScore]]:
    if len(gold) != len(test):
        raise ValueError(f"{len(gold)} gold trees but {len(test)} test trees")
    scores = [score_sentence(g, t) for g, t in zip(gold, test)]
    result = {
        "all": corpus_figures(scores),
        f"len<={CUTOFF_LEN}": corpus_figures([s for s in scores if s.length <= CUTOFF_LEN]),
    }
    return result, scores


def read_tree_file(path: str) -> List[Tree]:
    trees = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                trees.append(parse_tree(line))
            except TreeError as e:
                raise TreeError(f"{path}:{number}: {e}") from e
    return trees


def trees_from_generate_output(generate_output: str, source: str) -> Tuple[List[Tree], Repairs]:
    """Trees from fairseq-generate's ``H-`` lines over the words in ``source``, repaired and counted."""
    from ..fairseq_output import hypotheses as read_hypotheses

    with open(source, encoding="utf-8") as f:
        sentences = [line.split() for line in f]
    with open(generate_output, encoding="utf-8") as f:
        hypotheses = read_hypotheses(f, "H", expected=len(sentences))
    total = Repairs()
    trees = []
    for tokens, words in zip(hypotheses, sentences):
        tree, repairs = delinearise(tokens.split(), words)
        total.add(repairs)
        trees.append(tree)
    return trees, total


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Labelled bracketing F1 with EVALB's COLLINS.prm conventions.")
    parser.add_argument("--gold", required=True, help="gold trees, one per line")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--test", help="parsed trees, one per line")
    what.add_argument("--generate-output", help="fairseq-generate output of a linearised-tree model")
    parser.add_argument("--source", help="the input words, one sentence per line (with --generate-output)")
    parser.add_argument("--trees-out", help="write the (repaired) parsed trees here")
    parser.add_argument("--per-sentence", help="write per-sentence figures here (tab-separated)")
    parser.add_argument("--json", help="write the corpus figures here")
    parser.add_argument("--paper", help="the paper's figure, printed beside ours")
    args = parser.parse_args(argv)
    try:
        gold = read_tree_file(args.gold)
        repairs = None
        if args.test:
            test = read_tree_file(args.test)
        else:
            if not args.source:
                parser.error("--generate-output needs --source")
            test, repairs = trees_from_generate_output(args.generate_output, args.source)
        result, scores = score_corpus(gold, test)
    except (TreeError, ValueError, OSError) as e:
        print(f"evalb: error: {e}", file=sys.stderr)
        return 1
    if repairs is not None:
        result["repairs"] = {"sentences_repaired": repairs.sentences, **repairs.counts}
    if args.trees_out:
        write_lines(args.trees_out, [str(t) for t in test])
    if args.per_sentence:
        header = "id\tlength\trecall\tprecision\tf1\tmatched\tgold\ttest\terror"
        write_lines(
            args.per_sentence,
            [header]
            + [
                f"{i}\t{s.length}\t{s.recall:.2f}\t{s.precision:.2f}\t{s.f1:.2f}\t"
                f"{s.matched}\t{s.gold}\t{s.test}\t{s.error or ''}"
                for i, s in enumerate(scores)
            ],
        )
    if args.json:
        write_json(args.json, result)
    for part in ("all", f"len<={CUTOFF_LEN}"):
        r = result[part]
        print(
            f"-- {part} -- sentences {r['sentences']} (skipped {r['skipped']}) | recall {r['recall']:.2f}"
            f" | precision {r['precision']:.2f} | F1 {r['f1']:.2f} | complete match {r['complete_match']:.2f}"
        )
    if repairs is not None:
        fixed = ", ".join(f"{k} {v}" for k, v in repairs.counts.items() if v)
        print(f"repaired {repairs.sentences} of {len(test)} model outputs{': ' + fixed if fixed else ''}")
    if args.paper:
        print(f"paper (Table 4, WSJ 23 F1): {args.paper}; ours {result['all']['f1']:.2f}")
    for i, s in enumerate(scores):
        if s.error:
            print(f"sentence {i} skipped: {s.error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
