"""fairseq's ``transformer`` flags that ``vaswani_transformer`` does not take, each refused with its reason.

A fairseq user swaps ``--arch transformer_wmt_en_de_big`` for ``--arch vaswani_big`` in a command
that may still carry flags of fairseq's model. Each such flag stops fairseq-train at start-up with
an argparse error naming the flag and saying why: either this model's name for the same setting, or
why the paper's model has no such part. None is ignored silently. A value that changes nothing
(``--encoder-layerdrop 0``) is accepted. (``--activation-fn`` is this model's own flag: relu, or swish.)

In a hydra config the same keys are refused by fairseq itself: they are not fields of the model's
dataclass (``Key 'encoder_layerdrop' not in 'VaswaniTransformerConfig'``).
"""

import argparse

# fairseq's flag -> this model's flag for the same setting
RENAMED = {
    "--encoder-embed-dim": "--d-model",
    "--decoder-embed-dim": "--d-model",
    "--decoder-input-dim": "--d-model",
    "--decoder-output-dim": "--d-model",
    "--encoder-ffn-embed-dim": "--d-ff",
    "--decoder-ffn-embed-dim": "--d-ff",
    "--encoder-attention-heads": "--attention-heads",
    "--decoder-attention-heads": "--attention-heads",
    "--encoder-normalize-before": "--normalize-before",
    "--decoder-normalize-before": "--normalize-before",
    "--encoder-learned-pos": "--positional-encoding learned",
    "--decoder-learned-pos": "--positional-encoding learned",
    "--relu-dropout": "--activation-dropout",
    "--merge-src-tgt-embed": "--share-all-embeddings",
}

_LAYERDROP = "LayerDrop (Fan et al., 2019) is not part of the paper's model: every layer runs in every update"
_QUANT_NOISE = "Quant-Noise (Fan et al., 2020) is not part of the paper's model"
_ADAPTIVE = (
    "adaptive input and softmax (Baevski and Auli, 2019) are not part of the paper's model, "
    "whose output is one softmax over the vocabulary (Section 3.4)"
)

# fairseq's flag -> (why the paper's model has no such part, the values that change nothing)
NOT_IN_THE_PAPER = {
    "--encoder-layerdrop": (_LAYERDROP, {"0", "0.0"}),
    "--decoder-layerdrop": (_LAYERDROP, {"0", "0.0"}),
    "--encoder-layers-to-keep": (
        "it prunes layers trained with LayerDrop, which the paper's model does not use",
        set(),
    ),
    "--decoder-layers-to-keep": (
        "it prunes layers trained with LayerDrop, which the paper's model does not use",
        set(),
    ),
    "--quant-noise-pq": (_QUANT_NOISE, {"0", "0.0"}),
    "--quant-noise-pq-block-size": (_QUANT_NOISE, {"8"}),
    "--quant-noise-scalar": (_QUANT_NOISE, {"0", "0.0"}),
    "--adaptive-input": (_ADAPTIVE, set()),
    "--adaptive-softmax-cutoff": (_ADAPTIVE, set()),
    "--adaptive-softmax-dropout": (_ADAPTIVE, {"0", "0.0"}),
    "--adaptive-softmax-factor": (_ADAPTIVE, set()),
    "--tie-adaptive-weights": (_ADAPTIVE, set()),
    "--tie-adaptive-proj": (_ADAPTIVE, set()),
    "--no-scale-embedding": ("Section 3.4 multiplies the embeddings by sqrt(d_model)", set()),
    "--layernorm-embedding": (
        "the paper normalises no embedding: layer normalisation follows each sub-layer (Section 3.1)",
        set(),
    ),
    "--no-token-positional-embeddings": (
        "Section 3.5 adds positional encodings; for learned ones use --positional-encoding learned",
        set(),
    ),
    "--no-cross-attention": ("every decoder layer of Section 3.1 attends to the encoder output", set()),
    "--cross-self-attention": (
        "the decoder of Section 3.1 has separate self-attention and encoder-decoder attention",
        set(),
    ),
    "--encoder-embed-path": (
        "the paper's embeddings are learned from scratch; load pretrained ones into a checkpoint instead",
        set(),
    ),
    "--decoder-embed-path": (
        "the paper's embeddings are learned from scratch; load pretrained ones into a checkpoint instead",
        set(),
    ),
    "--no-decoder-final-norm": (
        "the post-norm model has no final layer norm; with --normalize-before it is part of the pre-norm variant",
        set(),
    ),
    "--char-inputs": ("the paper's model reads word pieces, not characters", set()),
    "--base-layers": ("BASE layers (Lewis et al., 2021) are not part of the paper's model", {"0"}),
    "--base-sublayers": ("BASE layers (Lewis et al., 2021) are not part of the paper's model", {"1"}),
    "--base-shuffle": ("BASE layers (Lewis et al., 2021) are not part of the paper's model", {"1"}),
    "--xformers-att-config": (
        "attention is torch's scaled_dot_product_attention (modules/multihead_attention.py)",
        set(),
    ),
    "--min-params-to-wrap": ("the model's layers are not wrapped one by one for --ddp-backend fully_sharded", set()),
}

# flags of fairseq's transformer that take no value
SWITCHES = {
    "--encoder-normalize-before",
    "--decoder-normalize-before",
    "--encoder-learned-pos",
    "--decoder-learned-pos",
    "--merge-src-tgt-embed",
    "--adaptive-input",
    "--tie-adaptive-weights",
    "--tie-adaptive-proj",
    "--no-scale-embedding",
    "--layernorm-embedding",
    "--no-token-positional-embeddings",
    "--no-cross-attention",
    "--cross-self-attention",
    "--no-decoder-final-norm",
    "--char-inputs",
}


def reason(flag: str) -> str:
    """Why ``flag`` is refused, in the words of the error fairseq-train stops with."""
    if flag in RENAMED:
        return f"vaswani_transformer names this setting {RENAMED[flag]} (encoder and decoder share it)"
    return f"{NOT_IN_THE_PAPER[flag][0]} (a flag of fairseq's transformer)"


class _Refuse(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        if self.nargs != 0 and values in NOT_IN_THE_PAPER.get(option_string, ("", set()))[1]:
            return  # a value that changes nothing
        parser.error(f"argument {option_string}: {reason(option_string)}")


def add_refused_flags(parser) -> None:
    """Add every flag above to ``parser`` (hidden from --help) so that giving one stops with its reason."""
    for flag in sorted(set(RENAMED) | set(NOT_IN_THE_PAPER)):
        try:
            parser.add_argument(
                flag,
                action=_Refuse,
                nargs=0 if flag in SWITCHES else None,
                default=argparse.SUPPRESS,
                help=argparse.SUPPRESS,
                dest="refused_" + flag[2:].replace("-", "_"),
            )
        except argparse.ArgumentError:  # already a flag of another part (the task's, say): not ours to refuse
            pass
