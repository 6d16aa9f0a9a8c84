"""Data preparation for the recipes: synthetic pair, sentencepiece vocabularies, WMT14, Penn Treebank."""

import json
import os
from typing import Dict, Iterable, List, Sequence


def write_lines(path: str, lines: Iterable[str]) -> None:
    """``lines`` into ``path``, one per line, UTF-8; written under a temporary name and renamed, so that
    a half-written file never appears under the final name."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(path + ".tmp", path)


def publish(out: str, texts: Dict[str, List[str]], report: Dict, written: Sequence[str] = ()) -> None:
    """All of a preparation's outputs at once: each of ``texts`` ({name: lines}) and ``report`` (as
    report.json) written into ``out`` under a temporary name, then renamed together with ``written``
    (names already written as NAME.tmp), the report last; so a preparation that fails leaves no
    output under a final name."""
    for name, lines in texts.items():
        with open(os.path.join(out, name + ".tmp"), "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    with open(os.path.join(out, "report.json.tmp"), "w") as f:
        json.dump(report, f, indent=2)
    for name in (*written, *texts, "report.json"):
        os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
