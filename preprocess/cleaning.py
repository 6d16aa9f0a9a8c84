"""The one cleaner of the recipes' text: each side normalised, then the pair kept or dropped for a named reason,
by the rule set of its kind of text. To change a cleaning rule, change its set here.

- ``Moses``: WMT14 (recipes/wmt14.sh, through preprocess/wmt14.py). Moses' punctuation normalisation (sacremoses),
  control characters removed, white space collapsed; dropped as Moses' clean-corpus-n does: an empty side, too many
  words, a length ratio.
- ``Opus``: your own corpora, OPUS's or anyone's (recipes/parallel_text.sh and finetune.sh, through
  preprocess/parallel_text.py). A byte-order mark, a final carriage return, control characters, NFC and white
  space normalised, each change counted; dropped: an empty side, too many words (characters in scripts written
  without spaces), a length ratio, the source equal to the target, a side not in its script or (py3langid) in
  another language.
- ``Gettext``: gettext catalogues (preprocess/debian_l10n.py, the learning benchmark's corpus). Accelerator marks
  and control characters removed, white space collapsed; dropped: untranslated, too few or too many words, a length
  ratio.

Each preparation names its set (its ``RULES``). A set has two methods, ``normalise`` (one side, telling ``note`` of
each change it makes) and ``drop`` (why a normalised pair goes, or None to keep it); ``clean`` applies both, the same
way for every set. Reading the files before, and the duplicates and the split after, are each preparation's own.
"""

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple

from preprocess.corpora import share_in, units

Note = Callable[[str], None]  # told the reason of each change made and of a pair dropped


def ignore(reason: str) -> None:
    pass


@dataclass(frozen=True)
class RuleSet:
    """A kind of text's rules: its languages (``src``, ``tgt``) and the limits of a pair."""

    src: str
    tgt: str
    max_words: int
    max_ratio: float

    def normalise(self, text: str, lang: str, note: Note = ignore) -> str:
        raise NotImplementedError

    def drop(self, source: str, target: str) -> Optional[str]:
        raise NotImplementedError

    def clean(self, source: str, target: str, note: Note = ignore) -> Optional[Tuple[str, str]]:
        """The pair normalised, or None where it is dropped (``note`` told why)."""
        source, target = self.normalise(source, self.src, note), self.normalise(target, self.tgt, note)
        reason = self.drop(source, target)
        if reason is not None:
            note(reason)
            return None
        return source, target


# ---- MOSES: WMT14 ---------------------------------------------------------------------------------------

_moses_normalisers: Dict[str, object] = {}


@dataclass(frozen=True)
class Moses(RuleSet):
    """WMT14 as is standard: Moses' normalize-punctuation (sacremoses, Unicode punctuation replaced first, control
    characters removed after), white space collapsed; dropped as Moses' clean-corpus-n does, counting words by
    spaces."""

    max_words: int = 250
    max_ratio: float = 1.5

    reasons = ("invalid_utf8", "empty", "too_long", "ratio")  # the report's keys, in its order

    def normalise(self, text: str, lang: str, note: Note = ignore) -> str:
        from sacremoses import MosesPunctNormalizer

        if lang not in _moses_normalisers:
            _moses_normalisers[lang] = MosesPunctNormalizer(
                lang, pre_replace_unicode_punct=True, post_remove_control_chars=True
            )
        return " ".join(_moses_normalisers[lang].normalize(text).split())

    def drop(self, source: str, target: str) -> Optional[str]:
        lengths = [len(source.split()), len(target.split())]
        if min(lengths) == 0:
            return "empty"
        if max(lengths) > self.max_words:
            return "too_long"
        if max(lengths) / min(lengths) > self.max_ratio:
            return "ratio"
        return None


# ---- OPUS: your own corpora -----------------------------------------------------------------------------

LANGID_MIN_CHARS = 40
LANGID_MIN_PROBABILITY = 0.9


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


@dataclass(frozen=True)
class Opus(RuleSet):
    """Corpora of every origin (OPUS's, a company's, a scrape): every change counted, the sides' scripts (from the
    corpus: ``preprocess.corpora.sides_scripts``) and, with ``langid``, their languages checked."""

    max_words: int = 250
    max_ratio: float = 3.0
    scripts: Tuple[Optional[str], Optional[str]] = (None, None)
    langid: Optional[LanguageId] = None

    def normalise(self, text: str, lang: str, note: Note = ignore) -> str:
        """A byte-order mark and a final carriage return dropped, control characters as spaces, NFC, single
        spaces; each change counted."""
        if text.startswith("\ufeff"):
            text = text[1:]
            note("byte-order mark removed")
        if text.endswith("\r"):
            text = text[:-1]
            note("carriage return at the end removed")
        cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)
        if cleaned != text:
            note("control characters replaced by spaces")
        nfc = unicodedata.normalize("NFC", cleaned)
        if nfc != cleaned:
            note("Unicode normalised (NFC)")
        single = " ".join(nfc.split())
        if single != nfc:
            note("white space collapsed (runs, tabs, or at either end)")
        return single

    def drop(self, source: str, target: str) -> Optional[str]:
        if not source or not target:
            return "an empty side"
        ns, nt = units(source, self.scripts[0]), units(target, self.scripts[1])
        if max(ns, nt) > self.max_words:
            return f"more than {self.max_words} words on a side"
        if max(ns, nt) > self.max_ratio * max(1, min(ns, nt)):
            return f"length ratio above {self.max_ratio:g}"
        if source == target:
            return "source equal to target"
        for text, script, lang in ((source, self.scripts[0], self.src), (target, self.scripts[1], self.tgt)):
            if script and share_in(text, script) < 0.5:
                return f"a side mostly not in its script ({lang}: {script.lower()})"
        if self.langid is not None:
            for text, lang in ((source, self.src), (target, self.tgt)):
                other = self.langid.other(text, lang)
                if other:
                    return f"a side in another language ({lang} side: {other})"
        return None


# ---- GETTEXT: gettext catalogues ------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_GTK_MNEMONIC = re.compile(r"_(?=\w)")


@dataclass(frozen=True)
class Gettext(RuleSet):
    """Messages of free software's gettext catalogues: keyboard accelerator marks (LibreOffice's ``~``, and an ``_``
    before a letter where a string has exactly one, as GTK's) and control characters removed, white space
    collapsed; dropped: untranslated, fewer than ``min_words`` or more than ``max_words`` words, a length ratio."""

    max_words: int = 80
    max_ratio: float = 3.0
    min_words: int = 3

    def normalise(self, text: str, lang: str = "", note: Note = ignore) -> str:
        text = re.sub(r"~(?=\w)", "", text)
        if len(_GTK_MNEMONIC.findall(text)) == 1:
            text = _GTK_MNEMONIC.sub("", text)
        text = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)
        return _SPACE.sub(" ", text).strip()

    def drop(self, source: str, target: str) -> Optional[str]:
        if not target or target == source:
            return "untranslated"
        n_source, n_target = len(source.split()), len(target.split())
        if min(n_source, n_target) < self.min_words:
            return "too short"
        if max(n_source, n_target) > self.max_words:
            return "too long"
        if max(n_source, n_target) > self.max_ratio * min(n_source, n_target):
            return "length ratio"
        return None
