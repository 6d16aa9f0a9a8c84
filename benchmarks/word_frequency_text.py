"""Text drawn from real word frequencies, in WMT14's archives: what ``benchmarks/data.py`` feeds the recipes' data
stages at growing sizes, as WMT14 cannot be downloaded here.

The words come from ``wordfreq``'s "large" lists (English 321k, German 635k, French 311k words, from Wikipedia, news,
books, subtitles, the web; ``pip install wordfreq==3.1.1``, its data in the wheel), each word drawn independently
with its frequency. Sentence lengths are log-normal with a mean of 23 words (median 19), as in WMT14's
training text; the target side's length follows the source's (x 0.95 for German, x 1.12 for French, with
a spread of 15%), so that the recipe's length-ratio filter drops a few percent. Sentences start with a
capital and end with a full stop (5%: a question mark); a share of the word types is always capitalised
past the 300 most frequent (10% English, 35% German, 8% French: names, and German nouns); 6% of words are followed by a
comma and 2% are numbers. What this text lacks: names, URLs and markup beyond the lists' words (real corpora have more
distinct words, so sentencepiece's BPE, which counts distinct words, needs somewhat more than here), and
syntax (which no data stage looks at). The corpora's shares follow WMT14's (En-De: Europarl v7 1.92M,
Common Crawl 2.40M, News Commentary v9 0.20M pairs; En-Fr adds UN 12.9M and Giga-FrEn 22.5M).
"""

import gzip
import os
import re
import tarfile
import tempfile
from typing import Dict, Iterator, List, Optional, Tuple

from preprocess.wmt14 import PAIRS, sgml

# pairs of each WMT14 training corpus (before cleaning), as the corpora's own READMEs and line counts give them
SHARES = {
    "en-de": {"europarl-v7": 1_920_209, "commoncrawl": 2_399_123, "news-commentary-v9": 201_288},
    "en-fr": {
        "europarl-v7": 2_007_723,
        "commoncrawl": 3_244_152,
        "un": 12_886_831,
        "news-commentary-v9": 183_251,
        "giga-fren": 22_520_400,
    },
}
CAPITALISED = {"en": 0.1, "de": 0.35, "fr": 0.08}  # share of word types written with a capital (names; German nouns)
LENGTH_FACTOR = {"en": 1.0, "de": 0.95, "fr": 1.12}  # target words per source word
MEAN_WORDS, SIGMA = 23.0, 0.6  # log-normal sentence lengths: mean 23 words, median 19
TEST_PAIRS = 3000  # newstest2013 has 3000 sentences, newstest2014 3003 (En-Fr) / 2737 (En-De, filtered)
WORD = re.compile(r"^[^\W\d_][\w'’-]*$")


class Lexicon:
    """A language's words and their cumulative frequencies (wordfreq's, or any {word: frequency})."""

    def __init__(self, frequencies: Dict[str, float], capitalised: float = 0.0):
        import zlib

        import numpy as np

        words = [w for w in frequencies if WORD.match(w)]
        # wordfreq's lists are lower case, most frequent first: a share of the word types past the 300 most
        # frequent (function words) is written with a capital, always the same ones (German nouns, names),
        # chosen by a hash of the word
        cut = int(capitalised * 2**32)
        words = [w[:1].upper() + w[1:] if i >= 300 and zlib.crc32(w.encode()) < cut else w for i, w in enumerate(words)]
        frequencies = {w.lower() if w[:1].isupper() else w: f for w, f in frequencies.items()}
        weights = np.array([frequencies[w[:1].lower() + w[1:]] for w in words], dtype=np.float64)
        self.words = np.array(words, dtype=object)
        self.cumulative = np.cumsum(weights / weights.sum())

    @classmethod
    def of(cls, lang: str) -> "Lexicon":
        try:
            import wordfreq
        except ImportError:
            raise SystemExit(
                "the benchmarks' text needs wordfreq: pip install wordfreq==3.1.1 (make bench-data installs it)"
            )
        return cls(wordfreq.get_frequency_dict(lang, wordlist="large"), CAPITALISED.get(lang, 0.1))

    def draw(self, rng, n: int):
        return self.words[self.cumulative.searchsorted(rng.random(n), side="right").clip(max=len(self.words) - 1)]


def sentence(rng, words) -> str:
    out = []
    for i, w in enumerate(words):
        r = rng.random()
        if r < 0.02:
            w = str(int(rng.integers(1, 10_000)))
        out.append(w + ("," if 0.02 <= r < 0.08 and i < len(words) - 1 else ""))
    out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out) + ("?" if rng.random() < 0.05 else ".")


def sentence_pairs(
    n: int, src: Lexicon, tgt: Lexicon, tgt_lang: str, rng, batch: int = 20_000
) -> Iterator[Tuple[str, str]]:
    """``n`` pairs of sentences drawn from the two lexicons (the module's docstring says how)."""
    import numpy as np

    mu = np.log(MEAN_WORDS) - SIGMA**2 / 2
    done = 0
    while done < n:
        k = min(batch, n - done)
        src_len = np.clip(np.rint(rng.lognormal(mu, SIGMA, k)), 1, 200).astype(int)
        tgt_len = np.clip(np.rint(src_len * LENGTH_FACTOR[tgt_lang] * rng.lognormal(0, 0.15, k)), 1, 200).astype(int)
        src_words, tgt_words = src.draw(rng, int(src_len.sum())), tgt.draw(rng, int(tgt_len.sum()))
        s = t = 0
        for a, b in zip(src_len, tgt_len):
            yield sentence(rng, src_words[s : s + a]), sentence(rng, tgt_words[t : t + b])
            s, t = s + a, t + b
        done += k


def write_archives(
    out: str, pair: str, pairs: int, seed: int = 1, lexicons: Optional[Dict[str, Lexicon]] = None
) -> List[str]:
    """Archives with WMT14's names and inner layouts for ``pair``, ``pairs`` training pairs in all, shared
    among the corpora as in WMT14, and newstest2013/2014 of 3000 pairs; written member by member (memory
    does not grow with ``pairs``). Returns the archives' names."""
    import numpy as np

    rng = np.random.default_rng(seed)
    src, tgt = pair.split("-")
    lexicons = lexicons or {lang: Lexicon.of(lang) for lang in (src, tgt)}
    spec, shares = PAIRS[pair], SHARES[pair]
    total = sum(shares.values())
    counts = {c.name: pairs * shares[c.name] // total for c in spec["train"]}
    counts[spec["train"][0].name] += pairs - sum(counts.values())
    os.makedirs(out, exist_ok=True)
    members: Dict[str, List[Tuple[str, str]]] = {}
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        for corpus in spec["train"]:
            paths = {lang: os.path.join(tmp, f"{corpus.name}.{lang}") for lang in (src, tgt)}
            opener = (
                (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=1))
                if corpus.member.endswith(".gz")
                else (lambda p: open(p, "w", encoding="utf-8"))
            )
            with opener(paths[src]) as fs, opener(paths[tgt]) as ft:
                for a, b in sentence_pairs(counts[corpus.name], lexicons[src], lexicons[tgt], tgt, rng):
                    fs.write(a + "\n")
                    ft.write(b + "\n")
            for lang in (src, tgt):
                members.setdefault(corpus.archive, []).append((paths[lang], corpus.member.format(lang=lang)))
        dev = list(sentence_pairs(TEST_PAIRS, lexicons[src], lexicons[tgt], tgt, rng))
        test = list(sentence_pairs(TEST_PAIRS, lexicons[src], lexicons[tgt], tgt, rng))
        for corpus, kind, lang, lines in (
            (spec["valid"], "src", src, dev),
            (spec["valid"], "src", tgt, dev),
            (spec["test_src"], "src", src, test),
            (spec["test_ref"], "ref", tgt, test),
        ):
            path = os.path.join(tmp, f"{corpus.name}.{kind}.{lang}.sgm")
            with open(path, "w", encoding="utf-8") as f:
                f.write(sgml([p[0 if lang == src else 1] for p in lines], kind, corpus.name, lang))
            members.setdefault(corpus.archive, []).append((path, corpus.member.format(lang=lang)))
        for name, files in members.items():
            gz = dict(mode="w:gz", compresslevel=1) if name.endswith(".tgz") else dict(mode="w")
            with tarfile.open(os.path.join(out, name + ".tmp"), **gz) as tar:
                for path, member in sorted(files, key=lambda f: f[1]):
                    tar.add(path, arcname=member)
            os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
    return sorted(members)
