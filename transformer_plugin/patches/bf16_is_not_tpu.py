"""``--bf16`` trains in bfloat16, not on a TPU.

fairseq's option post-processing sets ``tpu`` whenever ``bf16`` is set (``options.py``: ``if
args.bf16: args.tpu = True``), and fairseq-train then looks for an XLA device and dies on a CPU or a
GPU. This patch gives ``tpu`` back the value the command line gave it (unset unless ``--tpu`` was
passed); bf16 then means what fairseq's trainer does with it elsewhere: the model and the batches in
bfloat16, fp32 master weights in fairseq's FP16Optimizer (no loss scaling). fairseq-hydra-train does
not go through ``options.py`` and needs no patch.
"""

from fairseq import options

from ._patching import replace

UPSTREAM = "fairseq #4696"
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _tpu_as_given(original):
    def parse_args_and_arch(parser, input_args=None, parse_known=False, suppress_defaults=False, modify_parser=None):
        result = original(parser, input_args, parse_known, suppress_defaults, modify_parser)
        args = result[0] if parse_known else result
        if getattr(args, "bf16", False) and getattr(args, "tpu", False):
            given, _ = parser.parse_known_args(input_args)  # the command line before fairseq's post-processing
            args.tpu = bool(getattr(given, "tpu", False))
        return result

    return parse_args_and_arch


def apply() -> None:
    replace(options, "parse_args_and_arch", _tpu_as_given)
