"""Data preparation for the recipes: synthetic pair, sentencepiece vocabularies, WMT14, Penn Treebank."""

import os
from typing import Iterable


def write_lines(path: str, lines: Iterable[str]) -> None:
    """``lines`` into ``path``, one per line, UTF-8; written under a temporary name and renamed, so that
    a half-written file never appears under the final name."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(path + ".tmp", path)
