"""Parallel corpora as the recipes take them, read without changing them: fairseq's two files (``PREFIX.SRC`` and
``PREFIX.TGT``, or ``.gz``) or one tab-separated file (``source<TAB>target`` a line, ``.tsv`` or ``.tsv.gz``), their
line counts checked (and why two differ, named), their pairs as bytes, the main script of each side, and the size of
a dev or test set held out of them. preprocess/parallel_text.py cleans and splits them; recipes/planner/budget/
counts them for the settings."""

import functools
import gzip
import os
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

SCRIPT_SAMPLE = 20_000  # pairs read for each side's main script
UNSPACED = {"CJK", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"}  # a length in characters, not words
# what other readers take for the end of a line (Python's str.splitlines, some editors and tools)
LINE_BREAKERS = {
    "\r": "a carriage return",
    "\u2028": "a U+2028 LINE SEPARATOR",
    "\u2029": "a U+2029 PARAGRAPH SEPARATOR",
    "\x85": "a U+0085 NEL",
    "\x0b": "a vertical tab",
    "\x0c": "a form feed",
    "\x00": "a NUL byte",
}


class CorpusError(ValueError):
    """Text that cannot be used as it is; the message names the file and the lines."""


@dataclass
class Corpus:
    """One corpus as given: a TSV file, or two files."""

    spec: str
    tsv: Optional[str] = None
    source: Optional[str] = None
    target: Optional[str] = None

    @property
    def name(self) -> str:
        return self.tsv or f"{self.source} + {self.target}"

    @property
    def files(self) -> List[str]:
        return [self.tsv] if self.tsv else [self.source, self.target]


def find_corpus(spec: str, src: str, tgt: str) -> Corpus:
    """``spec`` as a TSV file (``.tsv``, ``.tsv.gz``, or any existing file) or a prefix of two files."""
    if spec.endswith((".tsv", ".tsv.gz")) or os.path.isfile(spec):
        if not os.path.isfile(spec):
            raise CorpusError(f"{spec}: no such file")
        return Corpus(spec, tsv=spec)
    sides = []
    for lang in (src, tgt):
        found = [p for p in (f"{spec}.{lang}", f"{spec}.{lang}.gz") if os.path.isfile(p)]
        if not found:
            raise CorpusError(
                f"{spec}: neither {spec}.{lang} nor {spec}.{lang}.gz exists (give PREFIX of PREFIX.{src} "
                f"and PREFIX.{tgt}, or a .tsv file)"
            )
        sides.append(found[0])
    return Corpus(spec, source=sides[0], target=sides[1])


def open_bytes(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def lines_of(path: str) -> Iterator[bytes]:
    """The lines of a file as bytes, split at b"\\n" only, without it."""
    with open_bytes(path) as f:
        for line in f:
            yield line[:-1] if line.endswith(b"\n") else line


def count_lines(path: str) -> int:
    """The lines of a file (a last one without b"\\n" counted), read once a process while the file keeps its size and
    time of change: the recipe's settings ask for a corpus's lines twice with TIME and a kept pick (its key, then the
    rule), and a corpus of 36M lines takes seconds to read."""
    found = os.stat(path)
    return _count_lines(os.path.realpath(path), found.st_size, found.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _count_lines(path: str, size: int, mtime_ns: int) -> int:
    n, last = 0, b"\n"
    with open_bytes(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def line_breakers(path: str) -> Dict[str, Tuple[int, int]]:
    """{what: (lines holding it, the first)} for each character other readers end a line at."""
    found: Dict[str, List[int]] = {}
    for number, raw in enumerate(lines_of(path), 1):
        text = raw.decode("utf-8", errors="replace")
        for char, what in LINE_BREAKERS.items():
            if char in (text[:-1] if char == "\r" else text):  # a \r at the end is \r\n's, not a break
                found.setdefault(what, [0, number])[0] += 1
    return {what: (n, first) for what, (n, first) in found.items()}


def check_line_counts(corpus: Corpus) -> None:
    a, b = count_lines(corpus.source), count_lines(corpus.target)
    if a == b:
        return
    why = []
    for path in (corpus.source, corpus.target):
        for what, (n, first) in line_breakers(path).items():
            why.append(f"{path} has {n} line{'s' * (n > 1)} with {what} (the first: line {first})")
    raise CorpusError(
        f"{corpus.source} has {a} lines and {corpus.target} has {b}: each line must be the translation of "
        f"the same line of the other. "
        + (
            "Perhaps: " + "; ".join(why) + ", where another tool ended a line"
            if why
            else "Nothing in either file explains it: a line was lost or added"
        )
    )


def raw_pairs(corpus: Corpus) -> Iterator[Tuple[int, bytes, bytes]]:
    """(line number, source bytes, target bytes) of a corpus, checked for its shape."""
    if corpus.tsv:
        for number, raw in enumerate(lines_of(corpus.tsv), 1):
            columns = raw.split(b"\t")
            if len(columns) != 2:
                raise CorpusError(
                    f"{corpus.tsv}: line {number} has {len(columns)} columns; a TSV corpus has source<TAB>"
                    "target on each line (a tab inside a sentence must go)"
                )
            yield number, columns[0], columns[1]
        return
    check_line_counts(corpus)
    for number, (s, t) in enumerate(zip(lines_of(corpus.source), lines_of(corpus.target)), 1):
        yield number, s, t


def script_of(char: str) -> Optional[str]:
    """A letter's script, from its Unicode name (LATIN, CYRILLIC, CJK, ...); None for anything else."""
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "").split(" ")[0]
    return "CJK" if name in ("HIRAGANA", "KATAKANA") else name or None  # Japanese writes kanji and kana together


def main_script(texts: Sequence[str]) -> Optional[str]:
    counts = Counter(s for text in texts for s in map(script_of, text) if s)
    return counts.most_common(1)[0][0] if counts else None


def share_in(text: str, script: str) -> float:
    scripts = [s for s in map(script_of, text) if s]
    return sum(s == script for s in scripts) / len(scripts) if scripts else 1.0


def units(text: str, script: Optional[str]) -> int:
    """A side's length: words, or characters for scripts written without spaces."""
    return len(text.replace(" ", "")) if script in UNSPACED else len(text.split())


def sides_scripts(corpora: Sequence[Corpus]) -> Tuple[Optional[str], Optional[str]]:
    """The main script of each side, from the first SCRIPT_SAMPLE pairs."""
    sources, targets = [], []
    for corpus in corpora:
        for _, s, t in raw_pairs_unchecked(corpus):
            sources.append(s.decode("utf-8", errors="replace"))
            targets.append(t.decode("utf-8", errors="replace"))
            if len(sources) >= SCRIPT_SAMPLE:
                return main_script(sources), main_script(targets)
    return main_script(sources), main_script(targets)


def raw_pairs_unchecked(corpus: Corpus) -> Iterator[Tuple[int, bytes, bytes]]:
    if corpus.tsv:
        for number, raw in enumerate(lines_of(corpus.tsv), 1):
            s, _, t = raw.partition(b"\t")
            yield number, s, t
    else:
        yield from ((n, s, t) for n, (s, t) in enumerate(zip(lines_of(corpus.source), lines_of(corpus.target)), 1))


def held_out_size(pairs: int, given: Optional[int]) -> int:
    if given is not None:
        return given
    return max(1, min(max(200, min(2000, pairs // 100)), pairs // 10))
