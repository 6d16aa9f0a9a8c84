"""A corpus's target tokens, counted before any work (before its vocabulary exists): the dev set's, which a
validation costs, and the training set's, which an epoch is."""

import itertools
from typing import List, Optional, Sequence

from preprocess.corpora import Corpus, held_out_size, raw_pairs_unchecked, units

# sentencepiece pieces a word (or a character, in scripts written without spaces), to count a dev set's target
# tokens before its vocabulary exists: 1.94 measured on the German side of the 77k EN-DE pairs with 8,000 pieces
# (19,306 pieces, 9,956 words); more pieces with a smaller vocabulary, fewer with a larger one.
PIECES_PER_WORD = 2.0


DEV_SAMPLE_LINES = 10_000


def target_words(corpora: Sequence[Corpus], script: Optional[str], lines: Optional[int] = None) -> List[int]:
    """The words (or characters, in scripts without spaces) of each target line, the first ``lines`` of each corpus."""
    return [
        units(t.decode("utf-8", errors="replace"), script)
        for c in corpora
        for _, _, t in itertools.islice(raw_pairs_unchecked(c), lines)
    ]


def words_a_line(corpora: Sequence[Corpus], script: Optional[str]) -> float:
    """The mean words of a training target line, in the first DEV_SAMPLE_LINES of each corpus."""
    sample = target_words(corpora, script, DEV_SAMPLE_LINES)
    return sum(sample) / max(1, len(sample))


def dev_tokens(
    corpora: Sequence[Corpus], valid: Sequence[Corpus], pairs: int, script: Optional[str], words: Optional[float] = None
) -> int:
    """The dev set's target tokens, estimated before any work (a validation's cost): the words of the given dev
    sets' target side, or the pairs held out for it times the mean words of a training target line (``words``, else
    words_a_line), times PIECES_PER_WORD."""
    if valid:
        total = sum(target_words(valid, script))
    else:
        total = held_out_size(pairs, None) * (words_a_line(corpora, script) if words is None else words)
    return int(total * PIECES_PER_WORD)
