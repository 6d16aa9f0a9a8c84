"""Write a synthetic parallel corpus, deterministically, for the demo and the tests.

The two languages are made up, but translating between them needs what real translation needs:

- word order: the source is SVO with adjectives before nouns and modifiers after the verb
  ("The red cat sees a dog in the house quickly."); the target is verb-final with adjectives after
  nouns ("Do kato rubi ena hundo hausi ine bistu schnelli sehit."), and subordinate clauses move
  their own verb to the end;
- agreement: target determiners and adjectives agree with the gender (3 classes, invisible in the
  source) and number of their noun; target verbs agree with the number of their subject and mark
  tense with suffixes;
- a vocabulary of a few thousand word types on each side, built from syllables, so that subword
  (BPE) segmentation matters.

Writes ``{train,valid,test}.{src,tgt}`` into the output directory, one sentence per line, UTF-8;
the same seed always gives the same files, and no valid or test source sentence occurs in train.

    python -m preprocess.synthetic_pair --out-dir data/synthetic --train 30000 --valid 1000 --test 1000
"""

import argparse
import os
import random
from dataclasses import dataclass
from typing import Dict, List, Tuple

from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import write_lines

SOURCE_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
TARGET_SYLLABLES = [c + v for c in ["sch", "h", "j", "w", "r", "b", "t", "k", "l", "m", "n", "d"] for v in "aeiouy"]

# target determiners by (definite, gender, plural)
TARGET_DETERMINERS = {
    (True, 0, False): "do",
    (True, 1, False): "da",
    (True, 2, False): "di",
    (True, 0, True): "dos",
    (True, 1, True): "das",
    (True, 2, True): "dis",
    (False, 0, False): "eno",
    (False, 1, False): "ena",
    (False, 2, False): "eni",
    (False, 0, True): "enos",
    (False, 1, True): "enas",
    (False, 2, True): "enis",
}
TARGET_NOUN_PLURAL = {0: "en", 1: "i", 2: "or"}
TARGET_ADJECTIVE_ENDING = {0: "o", 1: "a", 2: "e"}
PREPOSITIONS = ["in", "on", "with", "under", "behind", "near", "for", "without"]
SUBORDINATORS = [("that", "dass"), ("because", "weil"), ("while", "wahrend"), ("although", "obwohl")]


@dataclass
class Lexicon:
    nouns: List[Tuple[str, str, int]]  # (source lemma, target lemma, target gender)
    verbs: List[Tuple[str, str]]
    adjectives: List[Tuple[str, str]]
    adverbs: List[Tuple[str, str]]
    prepositions: Dict[str, str]


def _words(rng: random.Random, syllables: List[str], count: int, taken: set, min_syl=2, max_syl=3) -> List[str]:
    out = []
    while len(out) < count:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(min_syl, max_syl)))
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


def make_lexicon(rng: random.Random, nouns=1200, verbs=400, adjectives=300, adverbs=60) -> Lexicon:
    src_taken = set(PREPOSITIONS) | {"the", "a", "some"} | {s for s, _ in SUBORDINATORS}
    tgt_taken = set(TARGET_DETERMINERS.values()) | {t for _, t in SUBORDINATORS}

    def pairs(n, **kw):
        return list(
            zip(_words(rng, SOURCE_SYLLABLES, n, src_taken, **kw), _words(rng, TARGET_SYLLABLES, n, tgt_taken, **kw))
        )

    return Lexicon(
        nouns=[(s, t, rng.randrange(3)) for s, t in pairs(nouns)],
        verbs=pairs(verbs),
        adjectives=pairs(adjectives, max_syl=2),
        adverbs=pairs(adverbs),
        prepositions=dict(zip(PREPOSITIONS, _words(rng, TARGET_SYLLABLES, len(PREPOSITIONS), tgt_taken, 1, 2))),
    )


class Grammar:
    """Samples one sentence pair at a time from the lexicon."""

    def __init__(self, lexicon: Lexicon, rng: random.Random):
        self.lex, self.rng = lexicon, rng

    def noun_phrase(self) -> Tuple[List[str], List[str], bool]:
        """Returns (source words, target words, plural)."""
        rng = self.rng
        src_noun, tgt_noun, gender = rng.choice(self.lex.nouns)
        plural = rng.random() < 0.35
        definite = rng.random() < 0.6
        adjectives = [rng.choice(self.lex.adjectives) for _ in range(rng.choice([0, 0, 1, 1, 2]))]
        src_det = "the" if definite else ("some" if plural else "a")
        src = [src_det] + [a for a, _ in adjectives] + [src_noun + ("s" if plural else "")]
        tgt_adjs = [t + TARGET_ADJECTIVE_ENDING[gender] + ("n" if plural else "") for _, t in adjectives]
        tgt = [
            TARGET_DETERMINERS[(definite, gender, plural)],
            tgt_noun + (TARGET_NOUN_PLURAL[gender] if plural else ""),
        ]
        return src, tgt + tgt_adjs, plural

    def clause(self, depth: int = 0) -> Tuple[List[str], List[str]]:
        """Source: S V O [PP] [Adv] [sub-clause]; target: S O [PP] [Adv] V [, sub-clause]."""
        rng = self.rng
        subj_src, subj_tgt, plural = self.noun_phrase()
        obj_src, obj_tgt, _ = self.noun_phrase()
        verb_src, verb_tgt = rng.choice(self.lex.verbs)
        past = rng.random() < 0.4
        verb_src = verb_src + ("ed" if past else ("" if plural else "s"))
        verb_tgt = (
            verb_tgt
            + {(False, False): "t", (False, True): "n", (True, False): "te", (True, True): "ten"}[(past, plural)]
        )
        src, tgt = subj_src + [verb_src] + obj_src, subj_tgt + obj_tgt
        if rng.random() < 0.4:
            prep = rng.choice(PREPOSITIONS)
            pp_src, pp_tgt, _ = self.noun_phrase()
            src, tgt = src + [prep] + pp_src, tgt + pp_tgt + [self.lex.prepositions[prep]]  # postposition
        if rng.random() < 0.3:
            adv_src, adv_tgt = rng.choice(self.lex.adverbs)
            src, tgt = src + [adv_src], tgt + [adv_tgt]
        tgt = tgt + [verb_tgt]
        if depth == 0 and rng.random() < 0.3:
            sub_src, sub_tgt = rng.choice(SUBORDINATORS)
            clause_src, clause_tgt = self.clause(depth + 1)
            src, tgt = src + [sub_src] + clause_src, tgt + [",", sub_tgt] + clause_tgt
        return src, tgt

    def sentence_pair(self) -> Tuple[str, str]:
        src, tgt = self.clause()
        return _surface(src), _surface(tgt)


def _surface(words: List[str]) -> str:
    text = " ".join(words).replace(" ,", ",") + "."
    return text[0].upper() + text[1:]


def generate(out_dir: str, train: int, valid: int, test: int, seed: int = 1) -> Dict[str, int]:
    """Write the corpus; returns the number of pairs per split."""
    if min(train, valid, test) < 1:
        raise ValueError("every split needs at least one sentence pair")
    rng = random.Random(seed)
    grammar = Grammar(make_lexicon(rng), rng)
    held_out: Dict[str, List[Tuple[str, str]]] = {"valid": [], "test": []}
    seen = set()
    for split, n in (("valid", valid), ("test", test)):
        while len(held_out[split]) < n:
            pair = grammar.sentence_pair()
            if pair[0] not in seen:
                seen.add(pair[0])
                held_out[split].append(pair)
    train_pairs = []
    while len(train_pairs) < train:
        pair = grammar.sentence_pair()
        if pair[0] not in seen:  # a held-out source never occurs in train (train may repeat itself)
            train_pairs.append(pair)
    os.makedirs(out_dir, exist_ok=True)
    counts = {}
    for split, pairs in (("train", train_pairs), ("valid", held_out["valid"]), ("test", held_out["test"])):
        for side, index in (("src", 0), ("tgt", 1)):
            write_lines(os.path.join(out_dir, f"{split}.{side}"), (pair[index] for pair in pairs))
        counts[split] = len(pairs)
    return counts


@console_script
def main(argv=None):
    parser = argparse.ArgumentParser(description="Write a deterministic synthetic parallel corpus.")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--train", type=int, default=30000, help="training pairs")
    parser.add_argument("--valid", type=int, default=1000, help="validation pairs")
    parser.add_argument("--test", type=int, default=1000, help="test pairs")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    counts = generate(args.out_dir, args.train, args.valid, args.test, args.seed)
    print(" ".join(f"{split}={n}" for split, n in counts.items()), "pairs written to", args.out_dir)


if __name__ == "__main__":
    main()
