"""Constituency trees for parsing as translation (Section 6.3): reading Penn Treebank brackets, the
usual clean-up, Vinyals & Kaiser et al. (2014) linearisation, and turning model output back into trees.

Linearisation ("Grammar as a Foreign Language", Section 2): the source is the sentence's words; the
target is the tree depth-first, an opening bracket with its label for each constituent, ``XX`` for
every word (POS tags normalised away) and a closing bracket with the label repeated:

    (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))  ->  (S (NP XX XX )NP (VP XX )VP XX )S

:func:`delinearise` reads any token sequence back into a tree over the input words. Malformed
output is repaired deterministically and every repair is counted (:class:`Repairs`).
"""

import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Union

POS_PLACEHOLDER = "XX"


@dataclass
class Tree:
    label: str
    children: List[Union["Tree", str]] = field(default_factory=list)  # a str child is a word

    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def words(self) -> List[str]:
        out = []
        for child in self.children:
            out.extend([child] if isinstance(child, str) else child.words())
        return out

    def preterminals(self) -> List["Tree"]:
        if self.is_preterminal():
            return [self]
        return [p for child in self.children if isinstance(child, Tree) for p in child.preterminals()]

    def __str__(self) -> str:
        inner = " ".join(str(c) for c in self.children)
        return f"({self.label} {inner})" if inner else f"({self.label})"


class TreeError(ValueError):
    pass


_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def read_trees(text: str, source: str = "<text>") -> Iterator[Tree]:
    """Every bracketed tree in ``text`` (one or many, spread over lines as in .mrg files)."""
    stack: List[Tree] = []
    expect_label = False
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token == "(":
            node = Tree("")
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
            expect_label = True
            continue
        if token == ")":
            if not stack:
                line = text.count("\n", 0, m.start()) + 1
                raise TreeError(f"{source}:{line}: ')' without an open bracket")
            node = stack.pop()
            if not stack:
                yield node
        elif expect_label:
            stack[-1].label = token
        elif stack:
            stack[-1].children.append(token)
        else:
            line = text.count("\n", 0, m.start()) + 1
            raise TreeError(f"{source}:{line}: text {token!r} outside a tree")
        expect_label = False
    if stack:
        raise TreeError(f"{source}: the last tree is not closed ({len(stack)} brackets open)")


def parse_tree(line: str) -> Tree:
    trees = list(read_trees(line))
    if len(trees) != 1:
        raise TreeError(f"expected one tree, found {len(trees)}: {line[:80]!r}")
    return trees[0]


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``, ``ADVP|PRT`` -> ``ADVP``; ``-NONE-``, ``-LRB-`` stay."""
    if label.startswith("-") and label.endswith("-"):
        return label
    return re.split(r"[-=|]", label, maxsplit=1)[0] or label


def clean(tree: Tree) -> Optional[Tree]:
    """The usual preparation of WSJ trees: the unlabelled root wrapper removed, ``-NONE-`` elements and
    the constituents left empty by them removed, function tags and indices stripped. None if nothing is left."""

    def walk(node: Tree) -> Optional[Tree]:
        if node.label == "-NONE-":
            return None
        if node.is_preterminal():
            return Tree(node.label, list(node.children))
        children = [c for c in (walk(c) for c in node.children if isinstance(c, Tree)) if c is not None]
        return Tree(strip_function_tags(node.label), children) if children else None

    while tree.label in ("", "ROOT", "TOP") and len(tree.children) == 1 and isinstance(tree.children[0], Tree):
        tree = tree.children[0]
    return walk(tree)


def linearise(tree: Tree) -> List[str]:
    """Target tokens of ``tree``: ``(LABEL`` ... ``)LABEL``, ``XX`` for each word."""
    if tree.is_preterminal():
        return [POS_PLACEHOLDER]
    tokens = [f"({tree.label}"]
    for child in tree.children:
        tokens.extend(linearise(child) if isinstance(child, Tree) else [POS_PLACEHOLDER])
    tokens.append(f"){tree.label}")
    return tokens


REPAIR_KINDS = (
    "unmatched_close",  # a closing bracket with nothing open: dropped
    "mismatched_close",  # a closing label that differs from the open one: closes the open one
    "unclosed",  # brackets still open at the end: closed
    "unknown_token",  # a token that is neither a bracket nor XX (e.g. <unk>): dropped
    "missing_words",  # fewer XX than input words: the rest attached to the root
    "extra_words",  # more XX than input words: the extra ones dropped
    "empty_constituent",  # a constituent left without words: removed
    "added_root",  # several (or no) top-level constituents: one root added over them
)


@dataclass
class Repairs:
    counts: Dict[str, int] = field(default_factory=lambda: {k: 0 for k in REPAIR_KINDS})
    sentences: int = 0  # sentences with at least one repair

    def add(self, other: "Repairs") -> None:
        for k, v in other.counts.items():
            self.counts[k] += v
        self.sentences += other.sentences


def delinearise(tokens: Sequence[str], words: Sequence[str], root_label: str = "S"):
    """A tree over ``words`` from linearised ``tokens``, repairing whatever is malformed; returns
    ``(tree, repairs)``. Deterministic: the same input always gives the same tree."""
    repairs = Repairs()
    count = repairs.counts
    top = Tree("")  # holds the top-level constituents
    stack = [top]
    leaves: List[Tree] = []  # the XX slots, in order
    for token in tokens:
        if token.startswith("(") and len(token) > 1:
            node = Tree(token[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif token.startswith(")"):
            if len(stack) == 1:
                count["unmatched_close"] += 1
                continue
            if len(token) > 1 and token[1:] != stack[-1].label:
                count["mismatched_close"] += 1
            stack.pop()
        elif token == POS_PLACEHOLDER:
            leaf = Tree(POS_PLACEHOLDER, [])
            stack[-1].children.append(leaf)
            leaves.append(leaf)
        else:
            count["unknown_token"] += 1
    count["unclosed"] += len(stack) - 1

    # the words: one per XX slot, in order; missing ones go under the root, extra slots go
    for leaf, word in zip(leaves, words):
        leaf.children = [word]
    count["extra_words"] += max(0, len(leaves) - len(words))
    missing = [Tree(POS_PLACEHOLDER, [w]) for w in words[len(leaves) :]]
    count["missing_words"] += len(missing)

    slots = {id(leaf) for leaf in leaves}

    def prune(node: Tree) -> Optional[Tree]:
        if id(node) in slots:
            return node if node.children else None
        kept = [c for c in (prune(c) for c in node.children) if c is not None]
        if not kept:
            count["empty_constituent"] += 1
            return None
        node.children = kept
        return node

    constituents = [c for c in (prune(c) for c in top.children) if c is not None]
    if len(constituents) == 1 and id(constituents[0]) not in slots:
        tree = constituents[0]
        tree.children.extend(missing)
    else:
        count["added_root"] += 1
        tree = Tree(root_label, constituents + missing)
    repairs.sentences = int(any(count.values()))
    return tree, repairs
