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
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

POS_PLACEHOLDER = "XX"


@dataclass(eq=False, repr=False)
class Tree:
    """A constituent. Every walk over trees here is iterative (:func:`events`, :func:`bottom_up`): an
    undertrained model can nest brackets hundreds deep, past Python's recursion limit."""

    label: str
    children: List[Union["Tree", str]] = field(default_factory=list)  # a str child is a word

    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def words(self) -> List[str]:
        return [item for kind, item in events(self) if kind == "word"]

    def preterminals(self) -> List["Tree"]:
        return [item for kind, item in events(self) if kind == "open" and item.is_preterminal()]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Tree):
            return NotImplemented
        return _shape(self) == _shape(other)

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return f"Tree({str(self)!r})"

    def __str__(self) -> str:
        out: List[str] = []
        for kind, item in events(self):
            if kind == "close":
                out[-1] += ")"
            else:
                out.append(f"({item.label}" if kind == "open" else item)
        return " ".join(out)


def events(tree: Tree) -> Iterator[Tuple[str, Union[Tree, str]]]:
    """``tree`` depth-first as ("open", node), ("word", word) and ("close", node), without recursion."""
    stack: List[Tuple[Union[Tree, str], bool]] = [(tree, False)]
    while stack:
        item, closing = stack.pop()
        if isinstance(item, str):
            yield "word", item
        elif closing:
            yield "close", item
        else:
            yield "open", item
            stack.append((item, True))
            stack.extend((child, False) for child in reversed(item.children))


def _shape(tree: Tree) -> List[Tuple[str, str]]:
    return [(kind, item if kind == "word" else item.label) for kind, item in events(tree)]


def bottom_up(tree: Tree) -> List[Tree]:
    """The constituents of ``tree``, each after all of its descendants (without recursion)."""
    order, stack = [], [tree]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(child for child in node.children if isinstance(child, Tree))
    return order[::-1]


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
    while tree.label in ("", "ROOT", "TOP") and len(tree.children) == 1 and isinstance(tree.children[0], Tree):
        tree = tree.children[0]
    cleaned: Dict[int, Optional[Tree]] = {}
    for node in bottom_up(tree):
        if node.label == "-NONE-":
            cleaned[id(node)] = None
        elif node.is_preterminal():
            cleaned[id(node)] = Tree(node.label, list(node.children))
        else:
            children = [cleaned[id(c)] for c in node.children if isinstance(c, Tree) and cleaned[id(c)] is not None]
            cleaned[id(node)] = Tree(strip_function_tags(node.label), children) if children else None
    return cleaned[id(tree)]


def linearise(tree: Tree) -> List[str]:
    """Target tokens of ``tree``: ``(LABEL`` ... ``)LABEL``, ``XX`` for each word."""
    tokens: List[str] = []
    inside: List[Tree] = []  # the open constituents
    for kind, item in events(tree):
        if kind == "open":
            tokens.append(POS_PLACEHOLDER if item.is_preterminal() else f"({item.label}")
            inside.append(item)
        elif kind == "close":
            inside.pop()
            if not item.is_preterminal():
                tokens.append(f"){item.label}")
        elif not inside[-1].is_preterminal():  # a bare word directly under a phrase
            tokens.append(POS_PLACEHOLDER)
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

    kept: Dict[int, Optional[Tree]] = {}
    for node in bottom_up(top):
        if id(node) in slots:
            kept[id(node)] = node if node.children else None
        elif node is not top:
            node.children = [kept[id(c)] for c in node.children if kept[id(c)] is not None]
            if not node.children:
                count["empty_constituent"] += 1
            kept[id(node)] = node if node.children else None
    constituents = [kept[id(c)] for c in top.children if kept[id(c)] is not None]
    if len(constituents) == 1 and id(constituents[0]) not in slots:
        tree = constituents[0]
        tree.children.extend(missing)
    else:
        count["added_root"] += 1
        tree = Tree(root_label, constituents + missing)
    repairs.sentences = int(any(count.values()))
    return tree, repairs
