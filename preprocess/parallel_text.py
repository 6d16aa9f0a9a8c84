"""Your own parallel text, checked, cleaned and split.

``prepare`` reads one or more training corpora, each either fairseq's two files (``PREFIX.SRC`` and
``PREFIX.TGT``, or ``.gz``) or one tab-separated file (``source<TAB>target`` a line, ``.tsv`` or ``.tsv.gz``),
and optional dev and test sets in the same forms. Nothing is dropped silently: ``report.json`` and
``report.md`` count every change and every dropped pair by reason, with the first line numbers of each.

1. **Refused, naming the file**: two files whose line counts differ (and why, where a carriage return, a
   Unicode line or paragraph separator, a NEL or a NUL byte explains it: another reader splits lines
   there); a TSV line without exactly one tab; invalid UTF-8 (with ``--on-bad-bytes drop`` such pairs are
   dropped and counted instead).
2. **Normalised, counted** (2. and 3. are the ``Opus`` rules of preprocess/cleaning.py): a byte-order
   mark, a carriage return at a line's end, control characters (as a space), Unicode NFC, runs of white
   space.
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

    python -m preprocess.parallel_text prepare --train corpus/train --src en --tgt de --out data
    python -m preprocess.parallel_text prepare --train a.tsv.gz b --valid dev --src en --tgt de --out data
"""

import argparse
import contextlib
import hashlib
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from preprocess import cleaning
from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import TMP_SUFFIX, publish
from preprocess.corpora import (
    Corpus,
    CorpusError,
    check_line_counts,
    find_corpus,
    held_out_size,
    raw_pairs,
    sides_scripts,
)

FIRST = 10  # line numbers kept per reason


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

    def at(self, where: str) -> cleaning.Note:
        """What notes a reason at ``where``."""
        return lambda reason: self.note(reason, where)

    def as_dict(self) -> Dict:
        return {reason: {"count": n, "first": self.first.get(reason, [])} for reason, n in sorted(self.counts.items())}


RULES = cleaning.Opus  # this recipe's rule set (preprocess/cleaning.py)


@dataclass
class Options:
    """The cleaning's options as given (``--max-words``, ``--max-ratio``, ``--on-bad-bytes``, ``--no-langid``)."""

    src: str
    tgt: str
    max_words: int = 250
    max_ratio: float = 3.0
    on_bad_bytes: str = "refuse"
    langid: bool = True


def sentence_hash(text: str, seed: int = 0) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}\0{text}".encode(), digest_size=8).digest(), "little")


def clean_pairs(
    corpora: Sequence[Corpus], rules: cleaning.Opus, on_bad_bytes: str, report: Report
) -> Iterator[Tuple[str, str, str]]:
    """(where, source, target) of every pair kept by the checks that need no other pair."""
    bad_bytes = []
    for corpus in corpora:
        for number, s, t in raw_pairs(corpus):
            where = f"{corpus.spec}:{number}"
            try:
                source, target = s.decode("utf-8"), t.decode("utf-8")
            except UnicodeDecodeError:
                if on_bad_bytes == "drop":
                    report.note("invalid UTF-8", where)
                else:
                    bad_bytes.append(where)
                continue
            pair = rules.clean(source, target, note=report.at(where))
            if pair is not None:
                yield (where, *pair)
    if bad_bytes:
        raise CorpusError(
            f"{len(bad_bytes)} line{'s' * (len(bad_bytes) > 1)} not valid UTF-8 ({', '.join(bad_bytes[:FIRST])}"
            f"{', ...' if len(bad_bytes) > FIRST else ''}): convert the text to UTF-8 (iconv -f ...), or drop "
            "those pairs (ON_BAD_BYTES=drop, --on-bad-bytes drop)"
        )


# ---- prepare ---------------------------------------------------------------------------------------------


SPLITS = ("train", "valid", "test")


def given_sets(
    given: Dict[str, List[Corpus]], rules: cleaning.Opus, report: Report
) -> Dict[str, List[Tuple[str, str]]]:
    """The dev and test sets given (VALID, TEST): normalised, deduplicated, never filtered by length; invalid UTF-8
    refused, naming the line."""
    held: Dict[str, List[Tuple[str, str]]] = {}
    for split in ("valid", "test"):
        if not given[split]:
            continue
        seen, kept = set(), []
        for corpus in given[split]:
            for number, s, t in raw_pairs(corpus):
                where = f"{corpus.spec}:{number}"
                try:
                    pair = (
                        rules.normalise(s.decode("utf-8"), rules.src, report.at(where)),
                        rules.normalise(t.decode("utf-8"), rules.tgt, report.at(where)),
                    )
                except UnicodeDecodeError:
                    raise CorpusError(
                        f"{where}: not valid UTF-8 (a {split} set is never filtered: convert it)"
                    ) from None
                if not (pair[0] and pair[1]):
                    report.note(f"an empty side ({split} set)", where)
                elif pair in seen:
                    report.note(f"a duplicate of an earlier pair ({split} set)", where)
                else:
                    seen.add(pair)
                    kept.append(pair)
        held[split] = kept
    return held


def cleaned_once(corpora: Sequence[Corpus], rules: cleaning.Opus, on_bad_bytes: str, report: Report, tmp: str) -> int:
    """Pass 1: the training pairs cleaned, without exact duplicates, into ``tmp`` (``where<TAB>source<TAB>target``);
    how many."""
    seen_pairs = set()
    kept = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for where, s, t in clean_pairs(corpora, rules, on_bad_bytes, report):
            key = sentence_hash(f"{s}\t{t}")
            if key in seen_pairs:
                report.note("a duplicate of an earlier pair", where)
                continue
            seen_pairs.add(key)
            f.write(f"{where}\t{s}\t{t}\n")
            kept += 1
    return kept


def held_out_sources(tmp: str, sizes: Dict[str, int], held: Dict, seed: int) -> Dict[int, str]:
    """The split of each held-out source's hash, where a dev or test set is not given: the pairs whose source hashes
    lowest (by ``seed``), the test set's first."""
    if set(held) == {"valid", "test"}:
        return {}
    ranked = []
    with open(tmp, encoding="utf-8") as f:
        for line in f:
            _, s, _ = line.rstrip("\n").split("\t")
            ranked.append(sentence_hash(s, seed))
    wanted = sum(sizes[split] for split in ("valid", "test") if split not in held)
    unique = sorted(set(ranked))
    if wanted >= len(unique):
        raise CorpusError(
            f"only {len(unique)} distinct sources after cleaning: too few to hold out {wanted} for "
            "dev and test (give VALID and TEST)"
        )
    return {h: ("test" if "test" not in held and i < sizes["test"] else "valid") for i, h in enumerate(unique[:wanted])}


def write_splits(
    out: str, tmp: str, held: Dict, first: Dict[int, str], seed: int, src: str, tgt: str, report: Report
) -> Counter:
    """Pass 2: the given sets, then each kept pair into its split, under temporary names; the pairs of each split.
    One pair per held-out source; a training pair whose source is a dev or test source goes nowhere."""
    held_sources = {s for split in held for s, _ in held[split]}
    outputs = {
        f"{split}.{lang}": open(os.path.join(out, f"{split}.{lang}{TMP_SUFFIX}"), "w", encoding="utf-8")
        for split in SPLITS
        for lang in (src, tgt)
    }
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
    return counts


def prepare(
    train: Sequence[str],
    src: str,
    tgt: str,
    out: str,
    valid: Sequence[str] = (),
    test: Sequence[str] = (),
    options: Optional[Options] = None,
    seed: int = 1,
    valid_size: Optional[int] = None,
    test_size: Optional[int] = None,
    log=print,
) -> Dict:
    """Check, clean, deduplicate and split; returns the report (also written as report.json/.md)."""
    options = options or Options(src, tgt)
    corpora = [find_corpus(spec, src, tgt) for spec in train]
    given = {"valid": [find_corpus(s, src, tgt) for s in valid], "test": [find_corpus(s, src, tgt) for s in test]}
    for corpus in [*corpora, *given["valid"], *given["test"]]:
        if not corpus.tsv:
            check_line_counts(corpus)
    scripts = sides_scripts(corpora)
    langid = cleaning.LanguageId([src, tgt]) if options.langid else None
    rules = RULES(src, tgt, options.max_words, options.max_ratio, scripts, langid)
    os.makedirs(out, exist_ok=True)
    report = Report()
    held = given_sets(given, rules, report)
    tmp = os.path.join(out, "pairs" + TMP_SUFFIX)
    try:
        kept = cleaned_once(corpora, rules, options.on_bad_bytes, report, tmp)
        sizes = {
            split: len(held[split]) if split in held else held_out_size(kept, size)
            for split, size in (("valid", valid_size), ("test", test_size))
        }
        first = held_out_sources(tmp, sizes, held, seed)
        counts = write_splits(out, tmp, held, first, seed, src, tgt, report)
    except BaseException:
        for name in ["pairs", *(f"{split}.{lang}" for split in SPLITS for lang in (src, tgt))]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(out, name + TMP_SUFFIX))
        raise
    os.remove(tmp)
    result = {
        "source": src,
        "target": tgt,
        "corpora": [c.name for c in corpora],
        "valid": [c.name for c in given["valid"]] or f"held out: {counts['valid']} pairs (seed {seed})",
        "test": [c.name for c in given["test"]] or f"held out: {counts['test']} pairs (seed {seed})",
        "scripts": {src: scripts[0], tgt: scripts[1]},
        "langid": f"py3langid, {', '.join(langid.judged) or 'neither language known'}" if langid else "off",
        "pairs": dict(counts),
        "changes_and_drops": report.as_dict(),
        "rules": {"max_words": options.max_words, "max_ratio": options.max_ratio, "on_bad_bytes": options.on_bad_bytes},
    }
    texts = [f"{split}.{lang}" for split in SPLITS for lang in (src, tgt)]  # written above, under .tmp
    publish(out, {"report.md": report_text(result).rstrip("\n").split("\n")}, result, written=texts)
    log(report_text(result))
    return result


def report_text(result: Dict) -> str:
    scripts = ", ".join(f"{lang} {script or '(no letters)'}" for lang, script in result["scripts"].items())
    lines = [
        f"# {result['source']}-{result['target']}: {', '.join(result['corpora'])}",
        "",
        f"kept: train {result['pairs'].get('train', 0):,}, valid {result['pairs'].get('valid', 0):,}, "
        f"test {result['pairs'].get('test', 0):,} pairs; dev: {result['valid']}; test: {result['test']}",
        f"scripts: {scripts}; language id: {result['langid']}",
        "",
        "| change or reason a pair was dropped | pairs | the first |",
        "|---|---|---|",
    ]
    for reason, entry in result["changes_and_drops"].items():
        lines.append(f"| {reason} | {entry['count']:,} | {', '.join(entry['first'][:3])} |")
    return "\n".join(lines) + "\n"


# ---- a general corpus replayed into the training text (INIT with REPLAY=), or the parent's own translations ----


def _lines(prefix: str, lang: str) -> Iterator[str]:
    """The lines of PREFIX.LANG without their newlines; a missing or non-UTF-8 file raises CorpusError naming it."""
    path = f"{prefix}.{lang}"
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                yield line.rstrip("\n")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 ({e})") from None
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None


def _write_pairs(out: str, src: str, tgt: str, parts: Sequence[Tuple[Iterable[str], Iterable[str]]]) -> None:
    """OUT.SRC and OUT.TGT, each the concatenation of its side of ``parts``, published together."""
    os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
    for index, lang in enumerate((src, tgt)):
        with open(f"{out}.{lang}" + TMP_SUFFIX, "w", encoding="utf-8") as f:
            for part in parts:
                f.writelines(line + "\n" for line in part[index])
    for lang in (src, tgt):
        os.replace(f"{out}.{lang}" + TMP_SUFFIX, f"{out}.{lang}")


def replay(
    corpus: str,
    src: str,
    tgt: str,
    train: str,
    held: Sequence[str],
    ratio: float,
    seed: int,
    out: str,
) -> Dict[str, int]:
    """Training text for a fine-tuning that replays a general corpus against forgetting (docs/finetune.md): the pairs of
    ``train`` (PREFIX.SRC, PREFIX.TGT: stage 1's in-domain text) and ``ratio`` times as many pairs of ``corpus``, drawn
    by ``seed`` without replacement (all of it if it has fewer), none whose source is a source of the ``held`` dev and
    test sets, nor an empty side; written as OUT.SRC and OUT.TGT. Returns the counts."""
    import itertools

    held_sources = {s for prefix in held for s in _lines(prefix, src)}
    ranked = []  # (hash, line number) of each usable pair of the corpus
    for number, (s, t) in enumerate(itertools.zip_longest(_lines(corpus, src), _lines(corpus, tgt))):
        if s is None or t is None:
            raise CorpusError(f"{corpus}.{src} and {corpus}.{tgt} have different numbers of lines")
        if s.strip() and t.strip() and s not in held_sources:
            ranked.append((sentence_hash(s, seed), number))
    in_domain = sum(1 for _ in _lines(train, src))
    wanted = min(len(ranked), round(ratio * in_domain))
    chosen = {number for _, number in sorted(ranked)[:wanted]}
    replayed = [[line for number, line in enumerate(_lines(corpus, lang)) if number in chosen] for lang in (src, tgt)]
    _write_pairs(out, src, tgt, [(_lines(train, src), _lines(train, tgt)), replayed])
    return {"in_domain": in_domain, "replayed": wanted, "usable": len(ranked)}


def distill_sources(
    train: str,
    src: str,
    ratio: float,
    seed: int,
    out: str,
    pool: Optional[str] = None,
    held: Sequence[str] = (),
) -> Dict[str, int]:
    """The sources a parent translates for distillation (INIT with ``REPLAY=parent``), drawn by ``seed`` without
    replacement, in their order, one a line in the file ``out`` (whose line numbers are fairseq-interactive's sentence
    ids): ``ratio`` (above 0, at most 1) of the in-domain training sources of ``train`` (PREFIX.SRC); or, with
    ``pool`` (``REPLAY_SOURCES``: PREFIX of source-language text of the parent's domains, PREFIX.SRC), ``ratio`` (above
    0) times as many lines as ``train`` has pairs, drawn from the pool's distinct non-empty lines that are no source of
    the ``held`` dev and test sets (all of them if there are fewer)."""
    if pool is None and not 0 < ratio <= 1:
        raise CorpusError(
            f"REPLAY_RATIO={ratio:g} with REPLAY=parent: the parent translates the training sources, at most each once "
            "(a ratio above 0, at most 1; more with REPLAY_SOURCES, text of its own to translate)"
        )
    if not ratio > 0:
        raise CorpusError(f"REPLAY_RATIO={ratio:g}: sources drawn per in-domain pair, above 0")
    in_domain = sum(1 for _ in _lines(train, src))
    if pool is None:
        sources = list(_lines(train, src))
        wanted = round(ratio * len(sources))
    else:
        held_sources = {s for prefix in held for s in _lines(prefix, src)}
        sources = list(dict.fromkeys(s for s in _lines(pool, src) if s.strip() and s not in held_sources))
        wanted = min(len(sources), round(ratio * in_domain))
        if not sources:
            raise CorpusError(
                f"REPLAY_SOURCES={pool}: {pool}.{src} has no line to translate (none, or only dev and test sources)"
            )
    chosen = {number for _, number in sorted((sentence_hash(s, seed), n) for n, s in enumerate(sources))[:wanted]}
    os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
    with open(out + TMP_SUFFIX, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for n, s in enumerate(sources) if n in chosen)
    os.replace(out + TMP_SUFFIX, out)
    return {"in_domain": in_domain, "drawn": wanted, "usable": len(sources)}


def distilled(train: str, src: str, tgt: str, sources: str, translations: str, out: str) -> Dict[str, int]:
    """Training text for a fine-tuning distilled from its parent (INIT with ``REPLAY=parent``): the pairs of
    ``train`` and, for each line of ``sources`` (distill_sources' file), that source beside the parent's translation
    of it, the best ``D-`` hypothesis of ``translations`` (fairseq-interactive's output, sentence ids as the lines of
    ``sources``); written as OUT.SRC and OUT.TGT. A source without a translation (longer than the parent's positions,
    which fairseq-interactive skips) or with an empty one is left out and counted."""
    from transformer_plugin_cli.fairseq_output import sentence_lines

    try:
        with open(translations, encoding="utf-8") as f:
            found = sentence_lines(f.read(), "D")
    except FileNotFoundError:
        raise CorpusError(f"{translations}: no such file (the parent's translations, fairseq-interactive's output)")
    with open(sources, encoding="utf-8") as f:
        drawn = [line.rstrip("\n") for line in f]
    if found and max(found) >= len(drawn):
        raise CorpusError(
            f"{translations} translates sentence {max(found)}, and {sources} has {len(drawn)} lines: not its output"
        )
    pairs = [(s, "\t".join(found[n][1:]).strip()) for n, s in enumerate(drawn) if n in found]
    kept = [(s, t) for s, t in pairs if t]
    _write_pairs(
        out, src, tgt, [(_lines(train, src), _lines(train, tgt)), ([s for s, _ in kept], [t for _, t in kept])]
    )
    return {
        "in_domain": sum(1 for _ in _lines(train, src)),
        "distilled": len(kept),
        "untranslated": len(drawn) - len(pairs),
        "empty": len(pairs) - len(kept),
    }


# ---- the command line -----------------------------------------------------------------------------------


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vaswani-prepare-parallel-text", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--train", nargs="+", required=True, help="PREFIX (PREFIX.SRC and PREFIX.TGT) or a .tsv file, each")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--valid", nargs="*", default=[])
    p.add_argument("--test", nargs="*", default=[])
    p.add_argument("--out", required=True)
    p.add_argument("--max-words", type=int, default=250)
    p.add_argument("--max-ratio", type=float, default=3.0)
    p.add_argument("--on-bad-bytes", choices=["refuse", "drop"], default="refuse")
    p.add_argument("--no-langid", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--valid-size", type=int)
    p.add_argument("--test-size", type=int)
    r = sub.add_parser("replay", help="training text with a general corpus replayed in it (INIT with REPLAY=)")
    r.add_argument("--corpus", required=True, help="the general corpus: PREFIX (PREFIX.SRC and PREFIX.TGT)")
    r.add_argument("--src", required=True)
    r.add_argument("--tgt", required=True)
    r.add_argument("--train", required=True, help="the in-domain training text: PREFIX")
    r.add_argument("--held", nargs="*", default=[], help="the dev and test sets: PREFIX each (their sources not drawn)")
    r.add_argument("--ratio", type=float, required=True, help="general pairs drawn per in-domain pair")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--out", required=True, help="PREFIX of the mixed training text")
    d = sub.add_parser("distill-sources", help="the training sources the parent translates (INIT with REPLAY=parent)")
    d.add_argument("--train", required=True, help="the in-domain training text: PREFIX (its PREFIX.SRC is read)")
    d.add_argument("--src", required=True)
    ratio_help = "the share of the training sources drawn (at most 1); with --pool, its lines drawn a training pair"
    d.add_argument("--ratio", type=float, required=True, help=ratio_help)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--out", required=True, help="the file of the sources drawn, one a line")
    d.add_argument("--pool", help="PREFIX of source text to draw from instead (REPLAY_SOURCES): its PREFIX.SRC")
    d.add_argument("--held", nargs="*", default=[], help="the dev and test sets: PREFIX each (their sources not drawn)")
    t = sub.add_parser("distilled", help="training text with the parent's translations in it (INIT with REPLAY=parent)")
    t.add_argument("--train", required=True, help="the in-domain training text: PREFIX")
    t.add_argument("--src", required=True)
    t.add_argument("--tgt", required=True)
    t.add_argument("--sources", required=True, help="distill-sources' file")
    t.add_argument("--translations", required=True, help="fairseq-interactive's output for those sources")
    t.add_argument("--out", required=True, help="PREFIX of the mixed training text")
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            found = replay(args.corpus, args.src, args.tgt, args.train, args.held, args.ratio, args.seed, args.out)
            print(
                f"{found['in_domain']:,} in-domain pairs and {found['replayed']:,} of {args.corpus}'s "
                f"{found['usable']:,} (REPLAY_RATIO={args.ratio:g}): {args.out}.{args.src}, {args.out}.{args.tgt}"
            )
            return 0
        if args.command == "distill-sources":
            found = distill_sources(args.train, args.src, args.ratio, args.seed, args.out, args.pool, args.held)
            if args.pool:
                print(
                    f"{found['drawn']:,} of {args.pool}.{args.src}'s {found['usable']:,} lines (REPLAY_RATIO="
                    f"{args.ratio:g} for {found['in_domain']:,} in-domain pairs), for the parent: {args.out}"
                )
            else:
                print(f"{found['drawn']:,} of the {found['in_domain']:,} training sources, for the parent: {args.out}")
            return 0
        if args.command == "distilled":
            found = distilled(args.train, args.src, args.tgt, args.sources, args.translations, args.out)
            left = [f"{found[k]:,} {k}" for k in ("untranslated", "empty") if found[k]]
            print(
                f"{found['in_domain']:,} in-domain pairs and {found['distilled']:,} of the parent's translations"
                + (f" ({', '.join(left)}: left out)" if left else "")
                + f": {args.out}.{args.src}, {args.out}.{args.tgt}"
            )
            return 0
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        options = Options(args.src, args.tgt, args.max_words, args.max_ratio, args.on_bad_bytes, not args.no_langid)
        prepare(
            args.train,
            args.src,
            args.tgt,
            args.out,
            args.valid,
            args.test,
            options,
            args.seed,
            args.valid_size,
            args.test_size,
        )
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
