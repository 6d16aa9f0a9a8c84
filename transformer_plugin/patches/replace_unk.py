"""``--replace-unk`` works.

fairseq's flag takes an optional alignment dictionary; given alone, its placeholder value ``"@@ "``
is opened as a file and fairseq-generate dies. And the alignments fairseq now makes
(``--print-alignment``: (source, target) pairs, or rows of source probabilities with ``soft``) are
indexed as if they were one source position per target word. This patch reads the placeholder as
"no dictionary" (an <unk> becomes the source word it is aligned to), reads both forms of alignment,
and refuses, naming the flag, a hypothesis with an <unk> but no alignment: fairseq aligns only with
--print-alignment.
"""

from fairseq import utils

from ._patching import replace

UPSTREAM = "fairseq #3533"
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

REPLACE_UNK_WITHOUT_DICTIONARY = "@@ "  # what fairseq's --replace-unk holds when given no file


def source_positions(alignment) -> dict:
    """{target word: the source word aligned to it} from either of fairseq's alignments: hard, a list
    of (source, target) pairs; soft, one row of source probabilities (as strings) per target token."""
    if isinstance(alignment[0][0], str):  # soft
        return {tgt: max(range(len(row)), key=lambda i: float(row[i])) for tgt, row in enumerate(alignment)}
    return {int(tgt): int(src) for src, tgt in alignment}


def _placeholder_is_no_dictionary(original):
    def load_align_dict(replace_unk):
        if replace_unk == REPLACE_UNK_WITHOUT_DICTIONARY:
            return {}  # copy the aligned source word
        return original(replace_unk)

    return load_align_dict


def _either_alignment(original):
    def replace_unk(hypo_str, src_str, alignment, align_dict, unk):
        hypo_tokens = hypo_str.split()
        if unk not in hypo_tokens:
            return hypo_str
        if alignment is None or len(alignment) == 0:
            raise ValueError(
                f"--replace-unk needs the alignment of each hypothesis: add --print-alignment ({hypo_str!r})"
            )
        aligned = source_positions(alignment)
        src_tokens = src_str.split() + ["<eos>"]
        for i, token in enumerate(hypo_tokens):
            if token == unk and i in aligned:
                hypo_tokens[i] = align_dict.get(src_tokens[aligned[i]], src_tokens[aligned[i]])
        return " ".join(hypo_tokens)

    return replace_unk


def apply() -> None:
    replace(utils, "load_align_dict", _placeholder_is_no_dictionary)
    replace(utils, "replace_unk", _either_alignment)  # post_process_prediction finds it in utils
