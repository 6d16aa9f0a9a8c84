"""A generator that aligns asks its models for attention.

fairseq's protocol for a model that computes attention weights only on request is
``make_generation_fast_(need_attn=...)``, which fairseq-generate calls with --print-alignment; but the
hub interface's ``generate(..., print_alignment=...)`` builds the aligning generator without it, and
the generator then dies on the missing weights (``IndexError: Dimension out of range``). fairseq's
own transformer always computes them; the paper's model, like fairseq's fconv, does so when asked.
The aligning generator now sets ``need_attn`` on the decoders of its models that have one.
"""

from fairseq.sequence_generator import SequenceGeneratorWithAlignment

from ._patching import replace

UPSTREAM = None  # no upstream issue found
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _asks_for_attention(original):
    def __init__(self, models, *args, **kwargs):
        original(self, models, *args, **kwargs)
        for model in self.model.models:
            decoder = getattr(model, "decoder", None)
            if hasattr(decoder, "need_attn"):
                decoder.need_attn = True

    return __init__


def apply() -> None:
    replace(SequenceGeneratorWithAlignment, "__init__", _asks_for_attention)
