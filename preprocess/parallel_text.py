"""Your own parallel text, checked, cleaned and split, and the settings that fit its size.

``prepare`` reads one or more training corpora, each either fairseq's two files (``PREFIX.SRC`` and
``PREFIX.TGT``, or ``.gz``) or one tab-separated file (``source<TAB>target`` a line, ``.tsv`` or ``.tsv.gz``),
and optional dev and test sets in the same forms. Nothing is dropped silently: ``report.json`` and
``report.md`` count every change and every dropped pair by reason, with the first line numbers of each.

1. **Refused, naming the file**: two files whose line counts differ (and why, where a carriage return, a
   Unicode line or paragraph separator, a NEL or a NUL byte explains it: another reader splits lines
   there); a TSV line without exactly one tab; invalid UTF-8 (with ``--on-bad-bytes drop`` such pairs are
   dropped and counted instead).
2. **Normalised, counted**: a byte-order mark, a carriage return at a line's end, control characters
   (as a space), Unicode NFC, runs of white space.
3. **Dropped, counted**: an empty side; more than ``--max-words`` words on a side; a length ratio above
   ``--max-ratio`` (words, or characters for scripts written without spaces); the source equal to the
   target; a side whose letters are mostly not in the script of its language (the side's own script,
   from the first 20,000 lines); a side that py3langid (langid.py's model, shipped with the package:
   nothing is downloaded) identifies as another language with probability 0.9 or more, judged on sides of
   40 characters or more (``--no-langid`` to skip; a language py3langid does not know is not judged);
   an exact duplicate of an earlier pair; a training pair whose source is a dev or test source.
4. **Held out** where no dev or test set is given: ``--valid-size`` and ``--test-size`` pairs (default 1%
   of the pairs each, at least 200 and at most 2,000, never more than 10%), chosen by a hash of the
   source with ``--seed``, after deduplication: no held-out source is in the training data.

Outputs in ``--out``: ``{train,valid,test}.{SRC,TGT}``, ``report.json``, ``report.md``; written under
temporary names and renamed only when all succeeded.

``settings`` prints the settings that fit a corpus as shell assignments (``AUTO_*``), from its raw line
count and the scripts of its two sides, read before any work (docs/parallel-text.md gives each rule and
its source): the subword vocabulary, joint or one per side, the model, dropout, batch and updates.

    python -m preprocess.parallel_text prepare --train corpus/train --src en --tgt de --out data
    python -m preprocess.parallel_text prepare --train a.tsv.gz b --valid dev --src en --tgt de --out data
    python -m preprocess.parallel_text settings --train corpus/train --src en --tgt de
"""

import argparse
import contextlib
import gzip
import hashlib
import itertools
import json
import os
import re
import shlex
import sys
import time
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import TMP_SUFFIX, publish, write_json
from preprocess.budget_rule import Sized, settings_for, sizes_table
from transformer_plugin_cli.tools.speed_probe import BudgetError, parse_time

FIRST = 10  # line numbers kept per reason
LANGID_MIN_CHARS = 40
LANGID_MIN_PROBABILITY = 0.9
SCRIPT_SAMPLE = 20_000
UNSPACED = {"CJK", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"}  # a length in characters, not words
# what other readers take for the end of a line (Python's str.splitlines, some editors and tools)
LINE_BREAKERS = {"\r": "a carriage return", "\u2028": "a U+2028 LINE SEPARATOR", "\u2029": "a U+2029 PARAGRAPH SEPARATOR",
                 "\x85": "a U+0085 NEL", "\x0b": "a vertical tab", "\x0c": "a form feed", "\x00": "a NUL byte"}  # fmt: skip


class CorpusError(ValueError):
    """Text that cannot be used as it is; the message names the file and the lines."""


# ---- reading ------------------------------------------------------------------------------------------


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
            raise CorpusError(f"{spec}: neither {spec}.{lang} nor {spec}.{lang}.gz exists (give PREFIX of PREFIX.{src} "
                              f"and PREFIX.{tgt}, or a .tsv file)")  # fmt: skip
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
    raise CorpusError(f"{corpus.source} has {a} lines and {corpus.target} has {b}: each line must be the translation of "
                      f"the same line of the other. " + ("Perhaps: " + "; ".join(why) + ", where another tool ended a "
                      "line" if why else "Nothing in either file explains it: a line was lost or added"))  # fmt: skip


def raw_pairs(corpus: Corpus) -> Iterator[Tuple[int, bytes, bytes]]:
    """(line number, source bytes, target bytes) of a corpus, checked for its shape."""
    if corpus.tsv:
        for number, raw in enumerate(lines_of(corpus.tsv), 1):
            columns = raw.split(b"\t")
            if len(columns) != 2:
                raise CorpusError(f"{corpus.tsv}: line {number} has {len(columns)} columns; a TSV corpus has source<TAB>"
                                  "target on each line (a tab inside a sentence must go)")  # fmt: skip
            yield number, columns[0], columns[1]
        return
    check_line_counts(corpus)
    for number, (s, t) in enumerate(zip(lines_of(corpus.source), lines_of(corpus.target)), 1):
        yield number, s, t


# ---- cleaning -----------------------------------------------------------------------------------------


@dataclass
class Report:
    """Counts by reason, with the first places of each (corpus:line)."""

    counts: Counter = field(default_factory=Counter)
    first: Dict[str, List[str]] = field(default_factory=dict)

    def note(self, reason: str, where: str) -> None:
        self.counts[reason] += 1
        places = self.first.setdefault(reason, [])
        if len(places) < FIRST:
            places.append(where)

    def as_dict(self) -> Dict:
        return {reason: {"count": n, "first": self.first.get(reason, [])} for reason, n in sorted(self.counts.items())}


def normalise(text: str, report: Report, where: str) -> str:
    """A side's text: BOM and a final carriage return dropped, control characters as spaces, NFC, single
    spaces; each change counted."""
    if text.startswith("\ufeff"):
        text = text[1:]
        report.note("byte-order mark removed", where)
    if text.endswith("\r"):
        text = text[:-1]
        report.note("carriage return at the end removed", where)
    cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)
    if cleaned != text:
        report.note("control characters replaced by spaces", where)
    nfc = unicodedata.normalize("NFC", cleaned)
    if nfc != cleaned:
        report.note("Unicode normalised (NFC)", where)
    single = " ".join(nfc.split())
    if single != nfc:
        report.note("white space collapsed (runs, tabs, or at either end)", where)
    return single


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


class LanguageId:
    """py3langid's model (langid.py's, shipped with the package), with normalised probabilities."""

    def __init__(self, languages: Sequence[str]):
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self.identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        self.known = set(self.identifier.nb_classes)
        self.judged = [lang for lang in languages if lang in self.known]

    def other(self, text: str, lang: str) -> Optional[str]:
        """The other language ``text`` is in, if py3langid is sure of one; None to keep it."""
        if lang not in self.known or len(text) < LANGID_MIN_CHARS:
            return None
        found, probability = self.identifier.classify(text)
        return found if found != lang and probability >= LANGID_MIN_PROBABILITY else None


@dataclass
class Rules:
    src: str
    tgt: str
    max_words: int = 250
    max_ratio: float = 3.0
    on_bad_bytes: str = "refuse"
    langid: bool = True


def sentence_hash(text: str, seed: int = 0) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}\0{text}".encode(), digest_size=8).digest(), "little")


def clean_pairs(corpora: Sequence[Corpus], rules: Rules, report: Report, scripts: Tuple[Optional[str], Optional[str]],
                langid: Optional[LanguageId]) -> Iterator[Tuple[str, str, str]]:  # fmt: skip
    """(where, source, target) of every pair kept by the checks that need no other pair."""
    bad_bytes = []
    for corpus in corpora:
        for number, s, t in raw_pairs(corpus):
            where = f"{corpus.spec}:{number}"
            try:
                source, target = s.decode("utf-8"), t.decode("utf-8")
            except UnicodeDecodeError:
                if rules.on_bad_bytes == "drop":
                    report.note("invalid UTF-8", where)
                else:
                    bad_bytes.append(where)
                continue
            source, target = normalise(source, report, where), normalise(target, report, where)
            reason = check(source, target, rules, scripts, langid)
            if reason:
                report.note(reason, where)
                continue
            yield where, source, target
    if bad_bytes:
        raise CorpusError(f"{len(bad_bytes)} line{'s' * (len(bad_bytes) > 1)} not valid UTF-8 ({', '.join(bad_bytes[:FIRST])}"
                          f"{', ...' if len(bad_bytes) > FIRST else ''}): convert the text to UTF-8 (iconv -f ...), or drop "
                          "those pairs (ON_BAD_BYTES=drop, --on-bad-bytes drop)")  # fmt: skip


def check(source: str, target: str, rules: Rules, scripts, langid: Optional[LanguageId]) -> Optional[str]:
    """None for a pair to keep, else why it is dropped."""
    if not source or not target:
        return "an empty side"
    ns, nt = units(source, scripts[0]), units(target, scripts[1])
    if max(ns, nt) > rules.max_words:
        return f"more than {rules.max_words} words on a side"
    if max(ns, nt) > rules.max_ratio * max(1, min(ns, nt)):
        return f"length ratio above {rules.max_ratio:g}"
    if source == target:
        return "source equal to target"
    for text, script, lang in ((source, scripts[0], rules.src), (target, scripts[1], rules.tgt)):
        if script and share_in(text, script) < 0.5:
            return f"a side mostly not in its script ({lang}: {script.lower()})"
    if langid is not None:
        for text, lang in ((source, rules.src), (target, rules.tgt)):
            other = langid.other(text, lang)
            if other:
                return f"a side in another language ({lang} side: {other})"
    return None


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


# ---- prepare ---------------------------------------------------------------------------------------------


def held_out_size(pairs: int, given: Optional[int]) -> int:
    if given is not None:
        return given
    return max(1, min(max(200, min(2000, pairs // 100)), pairs // 10))


def prepare(train: Sequence[str], src: str, tgt: str, out: str, valid: Sequence[str] = (), test: Sequence[str] = (),
            rules: Optional[Rules] = None, seed: int = 1, valid_size: Optional[int] = None,
            test_size: Optional[int] = None, log=print) -> Dict:  # fmt: skip
    """Check, clean, deduplicate and split; returns the report (also written as report.json/.md)."""
    rules = rules or Rules(src, tgt)
    corpora = [find_corpus(spec, src, tgt) for spec in train]
    given = {"valid": [find_corpus(s, src, tgt) for s in valid], "test": [find_corpus(s, src, tgt) for s in test]}
    for corpus in [*corpora, *given["valid"], *given["test"]]:
        if not corpus.tsv:
            check_line_counts(corpus)
    scripts = sides_scripts(corpora)
    langid = LanguageId([src, tgt]) if rules.langid else None
    os.makedirs(out, exist_ok=True)
    report = Report()
    held: Dict[str, List[Tuple[str, str]]] = {}
    for split in ("valid", "test"):  # given sets: normalised, deduplicated, never filtered by length
        if given[split]:
            seen, kept = set(), []
            for corpus in given[split]:
                for number, s, t in raw_pairs(corpus):
                    where = f"{corpus.spec}:{number}"
                    try:
                        pair = (normalise(s.decode("utf-8"), report, where), normalise(t.decode("utf-8"), report, where))
                    except UnicodeDecodeError:
                        raise CorpusError(f"{where}: not valid UTF-8 (a {split} set is never filtered: convert it)") from None
                    if not (pair[0] and pair[1]):
                        report.note(f"an empty side ({split} set)", where)
                    elif pair in seen:
                        report.note(f"a duplicate of an earlier pair ({split} set)", where)
                    else:
                        seen.add(pair)
                        kept.append(pair)
            held[split] = kept
    # pass 1: clean, drop duplicates, keep the pairs in a temporary file
    tmp = os.path.join(out, "pairs" + TMP_SUFFIX)
    seen_pairs = set()
    kept = 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for where, s, t in clean_pairs(corpora, rules, report, scripts, langid):
                key = sentence_hash(f"{s}\t{t}")
                if key in seen_pairs:
                    report.note("a duplicate of an earlier pair", where)
                    continue
                seen_pairs.add(key)
                f.write(f"{where}\t{s}\t{t}\n")
                kept += 1
        del seen_pairs
        sizes = {split: len(held[split]) if split in held else held_out_size(kept, size)
                 for split, size in (("valid", valid_size), ("test", test_size))}  # fmt: skip
        # the held-out sources: given, or the pairs whose source hashes lowest (by --seed)
        if set(held) != {"valid", "test"}:
            ranked = []
            with open(tmp, encoding="utf-8") as f:
                for line in f:
                    _, s, _ = line.rstrip("\n").split("\t")
                    ranked.append(sentence_hash(s, seed))
            wanted = sum(sizes[split] for split in ("valid", "test") if split not in held)
            unique = sorted(set(ranked))
            if wanted >= len(unique):
                raise CorpusError(f"only {len(unique)} distinct sources after cleaning: too few to hold out {wanted} for "
                                  "dev and test (give VALID and TEST)")  # fmt: skip
            first = {h: ("test" if "test" not in held and i < sizes["test"] else "valid") for i, h in enumerate(unique[:wanted])}
            del ranked, unique
        else:
            first = {}
        held_sources = {s for split in held for s, _ in held[split]}
        outputs = {f"{split}.{lang}": open(os.path.join(out, f"{split}.{lang}{TMP_SUFFIX}"), "w", encoding="utf-8")
                   for split in ("train", "valid", "test") for lang in (src, tgt)}  # fmt: skip
        counts = Counter()
        try:
            for split in held:
                for s, t in held[split]:
                    outputs[f"{split}.{src}"].write(s + "\n")
                    outputs[f"{split}.{tgt}"].write(t + "\n")
                    counts[split] += 1
            taken = set()
            with open(tmp, encoding="utf-8") as f:
                for line in f:
                    where, s, t = line.rstrip("\n").split("\t")
                    split = first.get(sentence_hash(s, seed)) if first else None
                    if split is not None:
                        if s in taken:  # one pair per held-out source; its other translations go nowhere
                            report.note("another translation of a held-out source", where)
                            continue
                        taken.add(s)
                    elif s in held_sources:
                        report.note("source in the dev or test set", where)
                        continue
                    split = split or "train"
                    outputs[f"{split}.{src}"].write(s + "\n")
                    outputs[f"{split}.{tgt}"].write(t + "\n")
                    counts[split] += 1
        finally:
            for handle in outputs.values():
                handle.close()
    except BaseException:
        for name in ["pairs", *(f"{split}.{lang}" for split in ("train", "valid", "test") for lang in (src, tgt))]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(out, name + TMP_SUFFIX))
        raise
    os.remove(tmp)
    result = {
        "source": src, "target": tgt, "corpora": [c.name for c in corpora],
        "valid": [c.name for c in given["valid"]] or f"held out: {counts['valid']} pairs (seed {seed})",
        "test": [c.name for c in given["test"]] or f"held out: {counts['test']} pairs (seed {seed})",
        "scripts": {src: scripts[0], tgt: scripts[1]},
        "langid": f"py3langid, {', '.join(langid.judged) or 'neither language known'}" if langid else "off",
        "pairs": dict(counts), "changes_and_drops": report.as_dict(),
        "rules": {"max_words": rules.max_words, "max_ratio": rules.max_ratio, "on_bad_bytes": rules.on_bad_bytes},
    }  # fmt: skip
    texts = [f"{split}.{lang}" for split in ("train", "valid", "test") for lang in (src, tgt)]  # written above, under .tmp
    publish(out, {"report.md": report_text(result).rstrip("\n").split("\n")}, result, written=texts)
    log(report_text(result))
    return result


def report_text(result: Dict) -> str:
    scripts = ", ".join(f"{lang} {script or '(no letters)'}" for lang, script in result["scripts"].items())
    lines = [f"# {result['source']}-{result['target']}: {', '.join(result['corpora'])}", "",
             f"kept: train {result['pairs'].get('train', 0):,}, valid {result['pairs'].get('valid', 0):,}, "
             f"test {result['pairs'].get('test', 0):,} pairs; dev: {result['valid']}; test: {result['test']}",
             f"scripts: {scripts}; language id: {result['langid']}", "",
             "| change or reason a pair was dropped | pairs | the first |", "|---|---|---|"]  # fmt: skip
    for reason, entry in result["changes_and_drops"].items():
        lines.append(f"| {reason} | {entry['count']:,} | {', '.join(entry['first'][:3])} |")
    return "\n".join(lines) + "\n"


# ---- settings by size ------------------------------------------------------------------------------------

# sentencepiece pieces a word (or a character, in scripts written without spaces), to count a dev set's target
# tokens before its vocabulary exists: 1.94 measured on the German side of the 77k EN-DE pairs with 8,000 pieces
# (19,306 pieces, 9,956 words); more pieces with a smaller vocabulary, fewer with a larger one.
PIECES_PER_WORD = 2.0
DEV_SAMPLE_LINES = 10_000


def target_words(corpora: Sequence[Corpus], script: Optional[str], lines: Optional[int] = None) -> List[int]:
    """The words (or characters, in scripts without spaces) of each target line, the first ``lines`` of each corpus."""
    return [units(t.decode("utf-8", errors="replace"), script) for c in corpora
            for _, _, t in itertools.islice(raw_pairs_unchecked(c), lines)]  # fmt: skip


def dev_tokens(corpora: Sequence[Corpus], valid: Sequence[Corpus], pairs: int, script: Optional[str]) -> int:
    """The dev set's target tokens, estimated before any work (a validation's cost): the words of the given dev
    sets' target side, or the pairs held out for it times the mean words of a training target line (in the first
    DEV_SAMPLE_LINES of each corpus), times PIECES_PER_WORD."""
    if valid:
        total = sum(target_words(valid, script))
    else:
        sample = target_words(corpora, script, DEV_SAMPLE_LINES)
        total = held_out_size(pairs, None) * sum(sample) / max(1, len(sample))
    return int(total * PIECES_PER_WORD)


def train_tokens(corpora: Sequence[Corpus], pairs: int, script: Optional[str]) -> int:
    """The training set's target tokens, estimated as dev_tokens estimates the dev set's: how many epochs a budget is."""
    sample = target_words(corpora, script, DEV_SAMPLE_LINES)
    return int(pairs * sum(sample) / max(1, len(sample)) * PIECES_PER_WORD)


def settings(train: Sequence[str], src: str, tgt: str, max_update: Optional[int] = None, time_text: str = "",
             speed: Optional[Callable] = None, valid: Sequence[str] = (), min_pairs: int = 0) -> Sized:  # fmt: skip
    """The settings for the corpora ``train`` (and the dev sets ``valid``, if given), and a budget of ``max_update``
    updates or of ``time_text`` (TIME=, turned into updates by ``speed``, a candidate's seconds per update here).
    Fewer than ``min_pairs`` lines are refused before any probe."""
    corpora = [find_corpus(spec, src, tgt) for spec in train]
    pairs = sum(count_lines(c.tsv or c.source) for c in corpora)
    if pairs < min_pairs:
        raise CorpusError(f"TRAIN has {pairs} lines: too few to train a translation model from scratch (MIN_PAIRS={min_pairs}; "
                          "OPUS-MT does not train below 10,000). Add text, or set MIN_PAIRS if you mean it")  # fmt: skip
    scripts = sides_scripts(corpora)
    valid_tokens = dev_tokens(corpora, [find_corpus(spec, src, tgt) for spec in valid], pairs, scripts[1])
    seconds = 0
    if time_text:
        if max_update is not None:
            raise CorpusError(f"TIME={time_text} and MAX_UPDATE={max_update}: give one budget (TIME is turned into updates here)")
        try:
            seconds = parse_time(time_text)
        except BudgetError as e:
            raise CorpusError(str(e)) from None
    found = settings_for(pairs, scripts, max_update, seconds, time_text, speed, valid_tokens,
                         train_tokens(corpora, pairs, scripts[1]))  # fmt: skip
    found.valid_tokens = valid_tokens
    return found


def kept_settings(path: str, key: Dict) -> Optional[Sized]:
    """What TIME picked before (``path``, written by the same command), if it was picked for ``key``: the same TIME,
    corpora and layout. A speed measured again since (a quieter machine, another node of the same kind) does not
    change a run under way; another TIME, corpus or layout decides again."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(path) as f:
            before = json.load(f)
        if before["key"] == key:
            found = Sized(**before["settings"])
            found.budget += f" (picked {before['decided']}, kept in {path})"
            return found
    return None


# ---- the command line -----------------------------------------------------------------------------------


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vaswani-prepare-parallel-text", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sizes", help="the settings of each size class")
    for name in ("prepare", "settings"):
        p = sub.add_parser(name)
        p.add_argument("--train", nargs="+", required=True, help="PREFIX (PREFIX.SRC and PREFIX.TGT) or a .tsv file, each")
        p.add_argument("--src", required=True)
        p.add_argument("--tgt", required=True)
        p.add_argument("--valid", nargs="*", default=[])
        p.add_argument("--test", nargs="*", default=[])
        if name == "settings":
            p.add_argument("--max-update", default="", help="the budget in updates (empty: a full run of the size class)")
            p.add_argument("--time", default="", help="the budget in time (90m, 8h): updates at this machine's speed")
            p.add_argument("--gpus", type=int, default=0, help="the training's layout, for the speed probe: GPUs per machine")
            p.add_argument("--cpu-workers", type=int, default=1, help="CPU processes per machine (with --gpus 0)")
            p.add_argument("--devices", type=int, default=0, help="devices in all (0: this machine's)")
            p.add_argument("--precision", default="fp32")
            p.add_argument("--min-pairs", type=int, default=0, help="fewer training lines are refused, before any probe")
            p.add_argument("--keep", default="", help="a file that keeps what TIME picked, read back while TIME, the corpus's "
                           "size and the layout are the same (the recipe's WORK/settings.json): a resumed run trains the same")
            p.add_argument("--plan", default="", help="where to write the plan as JSON (the recipe's WORK/plan.json)")
        if name == "prepare":
            p.add_argument("--out", required=True)
            p.add_argument("--max-words", type=int, default=250)
            p.add_argument("--max-ratio", type=float, default=3.0)
            p.add_argument("--on-bad-bytes", choices=["refuse", "drop"], default="refuse")
            p.add_argument("--no-langid", action="store_true")
            p.add_argument("--seed", type=int, default=1)
            p.add_argument("--valid-size", type=int)
            p.add_argument("--test-size", type=int)
    args = parser.parse_args(argv)
    if args.command == "sizes":
        print(sizes_table())
        return 0
    try:
        if args.command == "settings":
            if args.max_update and not args.max_update.isdigit():
                raise CorpusError(f"MAX_UPDATE={args.max_update}: a number of updates")
            speed = None
            if args.time:
                from transformer_plugin_cli.tools.speed_probe import ProbeError, cuda_here, layout_probe, no_cuda, seconds_per_update

                if args.gpus > 0 and not cuda_here():
                    raise CorpusError(str(no_cuda(args.time)))

                def speed(candidate, vocab_size: int) -> float:
                    probe = layout_probe(candidate.arch, candidate.model_flags, vocab_size, candidate.tokens_per_update,
                                         args.gpus, args.cpu_workers, args.devices, args.precision)  # fmt: skip
                    try:
                        return float(seconds_per_update(probe)["seconds"])
                    except ProbeError as e:
                        raise CorpusError(str(e)) from None

            max_update = int(args.max_update) if args.max_update else None
            key = {"time": args.time, "train": [os.path.abspath(t) for t in args.train], "gpus": args.gpus,
                   "cpu_workers": args.cpu_workers, "devices": args.devices, "precision": args.precision}  # fmt: skip
            found = kept_settings(args.keep, key) if args.time and args.keep else None
            decided = found is None
            if decided:
                found = settings(args.train, args.src, args.tgt, max_update, args.time, speed, args.valid, args.min_pairs)
            for path in filter(None, (args.keep, args.plan)):  # decided: only now is anything written
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            if decided and args.time and args.keep:
                write_json(args.keep, {"key": key, "settings": asdict(found), "decided": time.strftime("%Y-%m-%d %H:%M")})
            if args.plan:
                write_json(args.plan, {"settings": {k: v for k, v in asdict(found).items() if k not in ("plan", "explain")},
                                       **found.plan})  # fmt: skip
            for name, value in vars(found).items():
                if name == "plan":
                    continue
                value = int(value) if isinstance(value, bool) else value
                if "\n" in str(value):  # one line each (bash's $'...'), for readers of lines
                    print(f"AUTO_{name.upper()}=$'" + str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'")
                else:
                    print(f"AUTO_{name.upper()}={shlex.quote(str(value))}")
            # every file the corpora are read from: the recipe's first stage declares them (an edit redoes it)
            files = [f for spec in (*args.train, *args.valid, *args.test) for f in find_corpus(spec, args.src, args.tgt).files]
            print(f"AUTO_INPUT_FILES=({' '.join(shlex.quote(f) for f in files)})")
            return 0
        rules = Rules(args.src, args.tgt, args.max_words, args.max_ratio, args.on_bad_bytes, not args.no_langid)
        prepare(args.train, args.src, args.tgt, args.out, args.valid, args.test, rules, args.seed, args.valid_size,
                args.test_size)  # fmt: skip
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
