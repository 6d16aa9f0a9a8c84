"""The plugin's configuration: every default of the model, the schedule and the criterion, once.

fairseq builds its command-line flags and hydra's config groups from these dataclasses, so a flag's
default, its ``--help`` and a YAML key's default are the same value:

- ``VaswaniTransformerConfig``: the model of Section 3 with the base model's sizes (Table 3, row
  "base"); ``ARCHITECTURES`` gives the other architectures as overrides of it (registered by
  models/vaswani_transformer.py, one dataclass each); both sizes and overrides live in architectures.py,
  which the recipes' space estimate reads without fairseq;
- ``VaswaniInverseSqrtConfig``: Eq. (3) (Section 5.3); its ``d_model`` is the model's, by
  interpolation (``II("model.d_model")``), in a hydra config as on the command line;
- ``VaswaniLabelSmoothedCrossEntropyConfig``: label smoothing, eps_ls (Section 5.4).

The paper's other training and decoding settings are fairseq's own flags (Adam's, beam search's):
``python -m transformer_plugin_cli.paper`` prints them with these defaults.
"""

from dataclasses import dataclass, field
from typing import Optional

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from omegaconf import II

from .architectures import ARCHITECTURES, BASE  # noqa: F401 (ARCHITECTURES: registered by models/)
from .modules.compiled_layers import MODES as COMPILE_MODES
from .modules.dropout import MASK_CHOICES
from .modules.positional_encoding import SINUSOID_VARIANTS

POSITIONAL_ENCODINGS = ChoiceEnum(["sinusoidal", "learned"])
ACTIVATIONS = ChoiceEnum(["relu", "swish"])
DECODER_STARTS = ChoiceEnum(["eos", "pad"])


@dataclass
class VaswaniTransformerConfig(FairseqDataclass):
    encoder_layers: int = field(default=BASE["encoder_layers"], metadata={"help": "N, number of encoder layers"})
    decoder_layers: int = field(default=BASE["decoder_layers"], metadata={"help": "N, number of decoder layers"})
    d_model: int = field(
        default=BASE["d_model"], metadata={"help": "d_model, width of embeddings and every sub-layer output"}
    )
    d_ff: int = field(default=BASE["d_ff"], metadata={"help": "d_ff, inner size of the feed-forward network (Eq. 2)"})
    attention_heads: int = field(default=BASE["attention_heads"], metadata={"help": "h, number of attention heads"})
    d_k: Optional[int] = field(
        default=BASE["d_k"], metadata={"help": "d_k, query/key width per head (default d_model/h)"}
    )
    d_v: Optional[int] = field(default=BASE["d_v"], metadata={"help": "d_v, value width per head (default d_model/h)"})
    dropout: float = field(
        default=BASE["dropout"], metadata={"help": "P_drop, residual and embedding dropout (Section 5.4)"}
    )
    attention_dropout: float = field(
        default=0.0, metadata={"help": "dropout on attention weights (not in the paper; default 0)"}
    )
    activation_dropout: float = field(
        default=0.0, metadata={"help": "dropout after the FFN's ReLU (not in the paper; default 0)"}
    )
    positional_encoding: POSITIONAL_ENCODINGS = field(
        default=BASE["positional_encoding"], metadata={"help": "sinusoidal (Section 3.5) or learned (Table 3 row E)"}
    )
    sinusoid_variant: ChoiceEnum(list(SINUSOID_VARIANTS)) = field(
        default="paper",
        metadata={"help": "paper: Section 3.5, interleaved sin/cos; fairseq: fairseq's concatenated layout"},
    )
    share_all_embeddings: bool = field(
        default=False,
        metadata={
            "help": "one matrix for source, target and output embeddings (Section 3.4; needs a joined dictionary)"
        },
    )
    share_decoder_input_output_embed: bool = field(
        default=False, metadata={"help": "share only the target embedding and the pre-softmax projection"}
    )
    dropout_masks: ChoiceEnum(list(MASK_CHOICES)) = field(
        default="packed",
        metadata={
            "help": "packed: on CPU, 16-bit dropout masks drawn 4 per 64-bit random word, P_drop rounded to"
            " a multiple of 2^-16 (faster; see modules/dropout.py); torch: torch's F.dropout. GPUs always use torch's"
        },
    )
    compile_layers: ChoiceEnum(list(COMPILE_MODES)) = field(
        default="auto",
        metadata={
            "help": "each layer's training forward and backward pass compiled by torch.compile, its LayerNorms,"
            " dropouts and residuals fused (modules/compiled_layers.py): auto, on a CUDA device; on, on any device;"
            " off, eager"
        },
    )
    normalize_before: bool = field(
        default=False,
        metadata={"help": "pre-norm x + Dropout(Sublayer(LayerNorm(x))) instead of the paper's post-norm"},
    )
    activation_fn: ACTIVATIONS = field(
        default="relu",
        metadata={
            "help": "the FFN's activation: relu, max(0, x) (Eq. 2); swish, x * sigmoid(x), as published MarianMT"
            " / OPUS-MT models have it (not in the paper)"
        },
    )
    output_bias: bool = field(
        default=False,
        metadata={
            "help": "a learned bias added to the output logits, MarianMT's final_logits_bias (not in the paper,"
            " whose pre-softmax projection has none)"
        },
    )
    decoder_start: DECODER_STARTS = field(
        default="eos",
        metadata={
            "help": "the token embedding at the decoder's first position: eos, fairseq's start token; pad, the"
            " padding row's, where MarianMT starts (its decoder_start_token_id; not in the paper)"
        },
    )
    max_source_positions: int = field(
        default=BASE["max_source_positions"], metadata={"help": "longest source sentence, in tokens"}
    )
    max_target_positions: int = field(
        default=BASE["max_target_positions"], metadata={"help": "longest target sentence, in tokens"}
    )
    checkpoint_activations: bool = field(
        default=False,
        metadata={
            "help": "keep only each layer's input and recompute the layer in the backward pass"
            " (less memory, more compute)"
        },
    )
    offload_activations: bool = field(
        default=False,
        metadata={
            "help": "with activation checkpointing, keep the layers' inputs in CPU memory"
            " (implies --checkpoint-activations)"
        },
    )


@dataclass
class VaswaniInverseSqrtConfig(FairseqDataclass):
    warmup_updates: int = field(default=4000, metadata={"help": "warmup_steps of Eq. (3)"})
    d_model: Optional[int] = field(
        default=II("model.d_model"),
        metadata={"help": "d_model of Eq. (3); with --arch vaswani_* this is the model's own --d-model"},
    )
    lr_multiplier: float = field(default=1.0, metadata={"help": "factor applied to Eq. (3) (1 in the paper)"})
    peak_warmup_updates: Optional[int] = field(
        default=None,
        metadata={
            "help": "not in the paper: keep Eq. (3)'s peak at its value for this warmup_steps, (d_model * N)^-0.5,"
            " when --warmup-updates is shorter (the whole curve scaled by (warmup_updates / N)^0.5), for training"
            " budgets too short for the paper's 4000 warm-up updates; unset: Eq. (3) as written"
        },
    )


@dataclass
class VaswaniLabelSmoothedCrossEntropyConfig(FairseqDataclass):
    label_smoothing: float = field(default=0.1, metadata={"help": "eps_ls, mass spread over the other V-1 entries"})
    report_accuracy: bool = field(default=False, metadata={"help": "also log the accuracy of the argmax token"})
    compile_loss: ChoiceEnum(list(COMPILE_MODES)) = field(
        default="auto",
        metadata={
            "help": "the loss from the logits compiled by torch.compile in training, its log-softmax, gather and"
            " sums fused (criterions/label_smoothed_cross_entropy.py): auto, on a CUDA device; on, on any device;"
            " off, eager"
        },
    )
    sentence_avg: bool = II("optimization.sentence_avg")
