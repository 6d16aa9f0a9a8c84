"""Language codes as OPUS-MT's parents write them, against the recipe's ``SRC`` and ``TGT``.

OPUS-MT's older models name their languages in ISO 639-1 (``en``, ``de``), the Tatoeba-Challenge models in ISO
639-3 (``eng``, ``deu``), some with a script or region (``cmn_Hans``, ``pt_BR``); multilingual models name a group
as their target (``mul``, an ISO 639-5 family such as ``gem``, or an upper-case name such as ``ROMANCE``) and expect
a ``>>xx<<`` token before each source sentence naming the language to translate into. ISO 639's tables are
pycountry's.
"""

import re
from typing import Iterable, List, Optional

import pycountry


def base(code: str) -> str:
    """The language part of a code: ``cmn`` of ``cmn_Hans``, ``pt`` of ``pt-BR``."""
    return re.split(r"[_-]", code.strip())[0]


def iso639_3(code: str) -> Optional[str]:
    """The ISO 639-3 code of an ISO 639-1, 639-3 or 639-2/B code (``de``, ``deu``, ``ger``: ``deu``), a script or
    region after it ignored; None for a code that names no language."""
    found = base(code).lower()
    if len(found) == 2:
        language = pycountry.languages.get(alpha_2=found)
    elif len(found) == 3:
        language = pycountry.languages.get(alpha_3=found) or pycountry.languages.get(bibliographic=found)
    else:
        language = None
    return language.alpha_3 if language is not None else None


def same_language(a: str, b: str) -> bool:
    """Whether two codes name one language: the same code, or the same ISO 639-3 code (``en`` and ``eng``)."""
    if base(a).lower() == base(b).lower():
        return True
    ours, theirs = iso639_3(a), iso639_3(b)
    return ours is not None and ours == theirs


def _name(code: str) -> Optional[str]:
    found = iso639_3(code)
    language = pycountry.languages.get(alpha_3=found) if found else None
    return language.name if language is not None else None


def in_macrolanguage(code: str, macro: str) -> Optional[str]:
    """Where ``macro`` (``sw``, ``ar``) is an ISO 639 macrolanguage and ``code`` (``swh``, ``arb_Arab``) one of its
    languages by ISO 639-3's names ("Swahili (individual language)" of "Swahili (macrolanguage)", "Standard Arabic"
    of "Arabic"): "standard" for the one a macrolanguage's code usually means (named Standard or individual
    language), "member" for another; else None. pycountry holds the names, not ISO's table of members."""
    whole = iso639_3(macro)
    language = pycountry.languages.get(alpha_3=whole) if whole else None
    name = _name(code)
    if language is None or getattr(language, "scope", "") != "M" or name is None or iso639_3(code) == whole:
        return None
    stem = language.name.replace(" (macrolanguage)", "")
    own = name.replace(" (individual language)", "")
    if not own.endswith(stem):
        return None
    return "standard" if own in (stem, f"Standard {stem}") else "member"


def is_group(code: str) -> bool:
    """Whether a parent's target language is a group of languages: ``mul``, an ISO 639-5 family (``gem``), several
    joined by ``+``, or OPUS-MT's upper-case names (``ROMANCE``)."""
    if "+" in code or code.isupper():
        return True
    found = base(code).lower()
    return found == "mul" or pycountry.language_families.get(alpha_3=found) is not None


def target_tokens(tgt: str, pieces: Iterable[str]) -> List[str]:
    """The ``>>xx<<`` pieces of a vocabulary that name the language ``tgt`` (``>>de<<``, ``>>deu<<``,
    ``>>deu_Latn<<`` for ``de``), in the vocabulary's order."""
    found = []
    for piece in pieces:
        m = re.fullmatch(r">>(.+)<<", piece)
        if m and same_language(m.group(1), tgt):
            found.append(piece)
    return found
