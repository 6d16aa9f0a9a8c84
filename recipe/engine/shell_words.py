"""The words of a line that bash's ``printf %q`` wrote: how the recipes quoted a command line before the engine
(the old stamps that :mod:`.stamps` still reads, and :mod:`.legacy` compares)."""

import re
from typing import List

_C_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def bash_words(text: str) -> List[str]:
    """The words of a line written by bash's ``printf %q`` (backslash escapes, '...' and $'...')."""
    words, word, i, n, in_word = [], [], 0, len(text), False
    while i < n:
        c = text[i]
        if c in " \t\n":
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        in_word = True
        if c == "\\" and i + 1 < n:
            word.append(text[i + 1])
            i += 2
        elif c == "'":
            j = text.index("'", i + 1)
            word.append(text[i + 1 : j])
            i = j + 1
        elif c == "$" and text.startswith("$'", i):
            i += 2
            while i < n and text[i] != "'":
                if text[i] == "\\" and i + 1 < n:
                    e = text[i + 1]
                    if e in _C_ESCAPES:
                        word.append(_C_ESCAPES[e])
                        i += 2
                    elif e == "x":
                        m = re.match(r"[0-9a-fA-F]{1,2}", text[i + 2 :])
                        word.append(chr(int(m.group(), 16)))
                        i += 2 + len(m.group())
                    elif e in "01234567":
                        m = re.match(r"[0-7]{1,3}", text[i + 1 :])
                        word.append(chr(int(m.group(), 8)))
                        i += 1 + len(m.group())
                    else:
                        word.append("\\" + e)
                        i += 2
                else:
                    word.append(text[i])
                    i += 1
            i += 1
        else:
            word.append(c)
            i += 1
    if in_word:
        words.append("".join(word))
    return words
