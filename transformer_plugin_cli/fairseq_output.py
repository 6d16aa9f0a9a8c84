"""Readers of what fairseq's command-line tools print, for the tools, the benchmarks and the tests.

- fairseq-train and fairseq-validate with ``--log-format json``: one JSON record per logged
  interval, after a tag: ``| train_inner |``, ``| train |``, or the validated subset's name
  (``| valid |``) (:func:`log_records`);
- fairseq-generate and fairseq-interactive: tab-separated ``S-``, ``T-``, ``H-``, ``D-``, ``P-``,
  ``A-`` lines per sentence id (:func:`sentence_lines`, :func:`hypotheses`) and the closing
  ``Translated N sentences (...) in Xs (Y sentences/s, ...)`` line (:func:`translation_speed`).

Pure text: no fairseq import.
"""

import json
import re
from typing import Dict, Iterable, List, NamedTuple, Optional

_RECORD = re.compile(r"\| ([\w.-]+) \| (\{.*\})\s*$", re.M)
_TRANSLATED = re.compile(r"Translated ([\d,]+) sentences .* in ([\d.]+)s \(([\d.]+) sentences/s")


def log_records(text: str, kind: str) -> List[Dict[str, str]]:
    """The JSON records tagged ``kind`` ("train_inner", "train", or a validated subset: "valid") in a
    fairseq log printed with ``--log-format json``, in order; fairseq prints most values as strings."""
    return [json.loads(m.group(2)) for m in _RECORD.finditer(text) if m.group(1) == kind]


EARLY_STOP = "early stop since valid performance hasn't improved"  # fairseq_cli.train's line (--patience)


def process_walls(walls: List[float]) -> List[float]:
    """The last of the ``wall`` readings of fairseq-train's ``train_inner`` records, in order, in each process
    that wrote them: a resumed run's new process starts that clock again (a reading lower than the one before)."""
    return [w for w, after in zip(walls, walls[1:] + [0.0]) if after < w]


def training_seconds(walls: List[float]) -> Optional[float]:
    """fairseq-train's time from those readings: each process's last, added; None without any."""
    return sum(process_walls(walls)) if walls else None


def numbers(record: Dict[str, str]) -> Dict[str, float]:
    """The numeric values of a log record, as floats."""
    values = {}
    for key, value in record.items():
        try:
            values[key] = float(value)
        except (TypeError, ValueError):
            pass
    return values


def sentence_lines(text: str, kind: str) -> Dict[int, List[str]]:
    """{sentence id: the tab-separated fields after the id} of the ``kind`` lines (S, T, H, D, P, A)
    of fairseq-generate or fairseq-interactive output; the first line per id (the best hypothesis)."""
    found: Dict[int, List[str]] = {}
    for m in re.finditer(rf"^{kind}-(\d+)\t(.*)$", text, re.M):
        found.setdefault(int(m.group(1)), m.group(2).split("\t"))
    return found


def hypotheses(lines: Iterable[str], kind: str = "D", expected: Optional[int] = None) -> List[str]:
    """The best hypothesis per sentence of fairseq-generate output (``D-`` detokenized, ``H-``
    tokenized), in corpus order. Raises ValueError when sentence ids are missing (``expected``: the
    size of the test set)."""
    text = "\n".join(line.rstrip("\n") for line in lines)
    found = {i: "\t".join(fields[1:]) for i, fields in sentence_lines(text, kind).items()}  # fields: score, text
    n = expected if expected is not None else (max(found) + 1 if found else 0)
    missing = [i for i in range(n) if i not in found]
    if missing or (expected is not None and len(found) != expected):
        raise ValueError(
            f"fairseq-generate output has {len(found)} {kind}- hypotheses for {n} sentences;"
            f" missing ids {missing[:10]}{'...' if len(missing) > 10 else ''}"
        )
    return [found[i] for i in range(n)]


class TranslationSpeed(NamedTuple):
    sentences: int
    seconds: float
    sentences_per_second: float


def translation_speed(text: str) -> TranslationSpeed:
    """fairseq-generate's closing ``Translated ...`` line."""
    m = _TRANSLATED.search(text)
    if m is None:
        raise ValueError("no 'Translated N sentences ... in Xs (Y sentences/s' line in fairseq-generate's output")
    return TranslationSpeed(int(m.group(1).replace(",", "")), float(m.group(2)), float(m.group(3)))
