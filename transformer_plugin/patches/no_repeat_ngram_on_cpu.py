"""``--no-repeat-ngram-size`` blocks repeated n-grams on a CPU too.

Without fairseq's CUDA extension, its blocker compares the n-grams of each hypothesis with the last
n - 1 entries of the generator's whole token buffer, which are padding, so it never blocks anything.
This patch compares them with the last n - 1 tokens generated, as the CUDA kernel does.
"""

from fairseq.ngram_repeat_block import NGramRepeatBlock

from ._patching import replace

UPSTREAM = "fairseq #5206"
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _last_tokens_generated(original):
    def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        """Set to -inf the log-probability of every token that would repeat an n-gram of its hypothesis."""
        n = self.no_repeat_ngram_size
        start = step + 2 - n  # the n-grams that end before the last n - 1 tokens generated
        for row, generated in enumerate(tokens[:, : step + 1].tolist() if start > 0 else []):
            last = generated[start:]
            banned = [generated[i + n - 1] for i in range(start) if generated[i : i + n - 1] == last]
            if banned:
                lprobs[row, banned] = float("-inf")
        return lprobs

    return _no_repeat_ngram


def apply() -> None:
    replace(NGramRepeatBlock, "_no_repeat_ngram", _last_tokens_generated)
