"""fairseq's beam search with its per-step bookkeeping in tensors, for the plugin's models.

fairseq's ``SequenceGenerator._generate`` reads from the device 34 times a decoding step at beam 4 (a
``masked_select`` of the finished hypotheses, their count, a Python loop over them with ``tolist`` and ``unique``,
boolean-index assignments, an ``assert`` on a tensor): on a GPU each read waits until the device has done all it was
given. Where the search is plain beam search over ``vaswani_transformer`` models, this patch runs it as
``transformer_plugin/modules/beam_search.py`` does: the same hypotheses, scores and positional scores, with one read
a step. Everything else goes to fairseq's loop, as does everything with ``TRANSFORMER_PLUGIN_BEAM_SEARCH=fairseq`` in
the environment (the plain path, for a comparison).
"""

import os

from fairseq.sequence_generator import SequenceGenerator

from ._patching import replace

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

OFF = "TRANSFORMER_PLUGIN_BEAM_SEARCH"  # "fairseq": fairseq's own loop for every search


def enabled() -> bool:
    """Whether the plugin's models decode with the tensor beam search (``TRANSFORMER_PLUGIN_BEAM_SEARCH`` not
    "fairseq")."""
    return os.environ.get(OFF, "tensors") != "fairseq"


def plugin_models_without_attention(generator) -> bool:
    """Whether every model of ``generator`` is the plugin's and returns no attention weights (no --print-alignment)."""
    from ..models.vaswani_transformer import VaswaniTransformerModel

    return all(isinstance(m, VaswaniTransformerModel) and not m.decoder.need_attn for m in generator.model.models)


def _in_tensors(original):
    def _generate(self, sample, prefix_tokens=None, constraints=None, bos_token=None):
        from ..modules import beam_search

        if (
            enabled()
            and plugin_models_without_attention(self)
            and beam_search.is_plain_beam_search(self, prefix_tokens, constraints)
        ):
            return beam_search.generate(self, sample, bos_token=bos_token)
        return original(self, sample, prefix_tokens=prefix_tokens, constraints=constraints, bos_token=bos_token)

    return _generate


def apply() -> None:
    replace(SequenceGenerator, "_generate", _in_tensors)
