"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), Section 3, as a fairseq model.

Registered as model ``vaswani_transformer`` with the architectures of the paper (``vaswani_base``,
``vaswani_big``, ``vaswani_big_en_fr``, ``vaswani_parsing``) and ``vaswani_tiny`` for CPU demos.
Every row of Table 3 is reachable from ``vaswani_base`` with the flags named after the paper's
symbols: ``--encoder-layers/--decoder-layers`` (N), ``--d-model``, ``--d-ff``, ``--attention-heads``
(h), ``--d-k``, ``--d-v``, ``--dropout`` (P_drop), ``--positional-encoding`` (row E); eps_ls is the
criterion's ``--label-smoothing``.

Section 3.4: source embedding, target embedding and the pre-softmax projection share one matrix
(``--share-all-embeddings``, fairseq's flag, which needs a joined dictionary); embeddings are
multiplied by sqrt(d_model). Section 5.4: dropout on the sums of embeddings and positional
encodings.

Layout: batch-first inside the model, (B, T, d_model); shape comments use B batch, S source
length, T target length, h heads.

Not in the paper, chosen here (each can be changed by a flag where it matters):
- initialisation (the paper gives none): fairseq's `transformer`'s (multihead_attention.py and
  feed_forward.py say why), embeddings N(0, d_model^-0.5) with a zero padding row;
- ``--attention-dropout`` and ``--activation-dropout`` (default 0, as in the paper);
- ``--normalize-before`` (pre-norm), ``--sinusoid-variant fairseq`` (see positional_encoding.py);
- ``--dropout-masks packed`` (default): on CPU, P_drop is rounded to a multiple of 2^-16 so that
  masks are four times cheaper to draw; ``--dropout-masks torch`` is torch's dropout (see modules/dropout.py).

How published MarianMT / OPUS-MT models differ, each a flag so that they can be held exactly (off by default):
- ``--activation-fn swish``: the FFN's activation x * sigmoid(x) (modules/feed_forward.py);
- ``--output-bias``: a learned bias on the output logits, MarianMT's ``final_logits_bias`` (VaswaniDecoder);
- ``--decoder-start pad``: the decoder's first position takes the padding row's embedding, not the start token's
  (fairseq starts from </s>, MarianMT from <pad>, unmasked); positions, masks and outputs are unchanged
  (EmbeddingLayer).
"""

import ast
import dataclasses
import logging
import math
from argparse import Namespace
from dataclasses import field
from typing import Dict, List, Optional

import torch
from fairseq.models import (
    FairseqEncoder,
    FairseqEncoderDecoderModel,
    FairseqIncrementalDecoder,
    register_model,
)
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import Tensor, nn

from ..config import ARCHITECTURES, VaswaniTransformerConfig
from ..modules.dropout import Dropout
from ..modules.multihead_attention import attention_bias
from ..modules.positional_encoding import PositionalEncoding, token_positions
from ..modules.transformer_layer import DecoderLayer, EncoderLayer, packed_dropout
from .fairseq_transformer_flags import add_refused_flags

logger = logging.getLogger(__name__)


def check_config(cfg) -> None:
    """Fill d_k/d_v defaults and refuse inconsistent sizes before anything is built, naming the flag."""
    for name in ("encoder_layers", "decoder_layers", "d_model", "d_ff", "attention_heads"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(cfg, name)}")
    for name in ("d_k", "d_v"):
        if getattr(cfg, name, None) is None:
            if cfg.d_model % cfg.attention_heads != 0:
                raise ValueError(
                    f"--d-model {cfg.d_model} is not divisible by --attention-heads {cfg.attention_heads}:"
                    f" give --{name.replace('_', '-')} explicitly"
                )
            setattr(cfg, name, cfg.d_model // cfg.attention_heads)
        elif getattr(cfg, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(cfg, name)}")
    if cfg.positional_encoding == "sinusoidal" and cfg.d_model % 2 != 0:
        raise ValueError(f"--d-model {cfg.d_model} must be even for --positional-encoding sinusoidal")
    for name in ("dropout", "attention_dropout", "activation_dropout"):
        if not 0.0 <= getattr(cfg, name) < 1.0:
            raise ValueError(f"--{name.replace('_', '-')} must be in [0, 1), got {getattr(cfg, name)}")


def checkpointed(layer: nn.Module, cfg) -> nn.Module:
    """``layer``, with fairseq's activation checkpointing under --checkpoint-activations or
    --offload-activations: its forward pass keeps no activations, and the backward pass recomputes
    them from the layer's input with the same random state (the same dropout masks)."""
    offload = getattr(cfg, "offload_activations", False)
    if getattr(cfg, "checkpoint_activations", False) or offload:
        return checkpoint_wrapper(layer, offload_to_cpu=offload)
    return layer


def Embedding(num_embeddings: int, d_model: int, padding_idx: int) -> nn.Embedding:
    """Token embedding, N(0, d_model^-0.5) with a zero padding row."""
    emb = nn.Embedding(num_embeddings, d_model, padding_idx=padding_idx)
    nn.init.normal_(emb.weight, mean=0.0, std=d_model**-0.5)
    nn.init.zeros_(emb.weight[padding_idx])
    return emb


class EmbeddingLayer(nn.Module):
    """Section 3.4 + 3.5 + 5.4: Dropout(sqrt(d_model) * Embedding(tokens) + PE(positions)).

    ``start_from_padding_row`` (the decoder's, under ``--decoder-start pad``): each sentence's first real token is
    embedded with the padding row instead of its own, as MarianMT starts decoding from <pad> where fairseq
    starts from </s>. The token stays the start token for everything else (positions, masks)."""

    def __init__(self, cfg, embed_tokens: nn.Embedding, max_positions: int, start_from_padding_row: bool = False):
        super().__init__()
        self.start_from_padding_row = start_from_padding_row
        self.embed_tokens = embed_tokens
        self.padding_idx = embed_tokens.padding_idx
        self.embed_scale = math.sqrt(cfg.d_model)
        self.embed_positions = PositionalEncoding(
            max_positions,
            cfg.d_model,
            self.padding_idx,
            learned=cfg.positional_encoding == "learned",
            variant=cfg.sinusoid_variant,
        )
        self.dropout = Dropout(cfg.dropout, packed_dropout(cfg))

    def forward(self, tokens: Tensor, incremental: bool = False) -> Tensor:
        positions = self.embed_positions(tokens, incremental=incremental)
        first = token_positions(tokens, self.padding_idx).eq(0) if self.start_from_padding_row else None
        if incremental:
            tokens = tokens[:, -1:]
            first = None if first is None else first[:, -1:]
        embedded = self.embed_tokens(tokens)
        if first is not None:  # --decoder-start pad: the start token's position takes the padding row
            embedded = torch.where(
                first[..., None], self.embed_tokens.weight[self.padding_idx].to(embedded.dtype), embedded
            )
        x = self.embed_scale * embedded + positions
        return self.dropout(x)


class VaswaniEncoder(FairseqEncoder):
    """Section 3.1: a stack of N layers of self-attention and FFN over the embedded source."""

    def __init__(self, cfg, dictionary, embed_tokens: nn.Embedding):
        super().__init__(dictionary)
        self.padding_idx = embed_tokens.padding_idx
        self.max_source_positions = cfg.max_source_positions
        self.embed = EmbeddingLayer(cfg, embed_tokens, cfg.max_source_positions)
        self.layers = nn.ModuleList([checkpointed(EncoderLayer(cfg), cfg) for _ in range(cfg.encoder_layers)])
        self.layer_norm = nn.LayerNorm(cfg.d_model) if cfg.normalize_before else None

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        attention_layer: Optional[int] = None,
        **unused,
    ) -> Dict[str, List[Tensor]]:
        """src_tokens (B, S) -> {"encoder_out": [(B, S, d_model)], "encoder_padding_mask": [(B, S)]}.

        The padding mask is True at padding (fairseq's convention); it is an empty list when the
        batch has no padding, which lets attention skip masking. With ``attention_layer`` the
        self-attention weights of that layer (B, h, S, S) are returned as "self_attn" (the
        paper's Figures 3-5).
        """
        padding = src_tokens.eq(self.padding_idx)  # (B, S)
        has_padding = bool(padding.any())
        if attention_layer is not None and attention_layer < 0:
            attention_layer += len(self.layers)
        x = self.embed(src_tokens)
        attend = attention_bias(~padding[:, None, None, :], x.dtype) if has_padding else None  # (B, 1, 1, S)
        self_attn = []
        for idx, layer in enumerate(self.layers):
            x, attn = layer(x, attend, need_attn=idx == attention_layer)
            if attn is not None:
                self_attn.append(attn)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x],
            "encoder_padding_mask": [padding] if has_padding else [],
            "src_tokens": [],
            "src_lengths": [src_lengths] if src_lengths is not None else [],
            "self_attn": self_attn,
        }

    @torch.jit.export
    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor):
        """Select the rows of ``new_order`` (beam search expands and prunes the batch)."""
        return {key: [t.index_select(0, new_order) for t in value] for key, value in encoder_out.items()}

    def max_positions(self) -> int:
        return self.max_source_positions


def padding_before_tokens(padding: Tensor) -> bool:
    """Whether some row of ``padding`` (B, T), True at padding, has padding before a real token.

    Decoder self-attention needs a padding mask only then. fairseq pads targets on the right, and
    with the future masked (Section 3.2.3) a real position never sees the padding after it: only
    the outputs at padding positions change, and the loss ignores those. Without a padding mask,
    the causal mask is all there is, which fused attention kernels take as ``is_causal``.
    """
    return bool((padding[:, :-1] & ~padding[:, 1:]).any())


class VaswaniDecoder(FairseqIncrementalDecoder):
    """Section 3.1: N layers of masked self-attention, encoder-decoder attention and FFN, then the
    pre-softmax linear projection (Section 3.4), tied to the target embedding when shared."""

    def __init__(self, cfg, dictionary, embed_tokens: nn.Embedding, share_input_output_embed: bool):
        super().__init__(dictionary)
        self.padding_idx = embed_tokens.padding_idx
        self.max_target_positions = cfg.max_target_positions
        self.embed = EmbeddingLayer(
            cfg,
            embed_tokens,
            cfg.max_target_positions,
            start_from_padding_row=getattr(cfg, "decoder_start", "eos") == "pad",
        )
        self.layers = nn.ModuleList([checkpointed(DecoderLayer(cfg), cfg) for _ in range(cfg.decoder_layers)])
        self.layer_norm = nn.LayerNorm(cfg.d_model) if cfg.normalize_before else None
        self.output_projection = nn.Linear(cfg.d_model, len(dictionary), bias=False)
        # --output-bias: MarianMT's final_logits_bias (zero at the start, learned), not in the paper
        self.output_bias = nn.Parameter(torch.zeros(len(dictionary))) if getattr(cfg, "output_bias", False) else None
        self.need_attn = False  # fairseq's --print-alignment (VaswaniTransformerModel.make_generation_fast_)
        if share_input_output_embed:
            self.output_projection.weight = embed_tokens.weight
        else:
            nn.init.normal_(self.output_projection.weight, mean=0.0, std=cfg.d_model**-0.5)

    def forward(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        need_head_weights: bool = False,
        **unused,
    ):
        """prev_output_tokens (B, T) -> logits (B, T, V) and {"attn": [weights]}.

        With ``incremental_state`` only the last position is computed (beam search). The
        encoder-decoder attention weights of layer ``alignment_layer`` are returned averaged over
        heads, (B, T, S), or per head (B, h, T, S) with ``need_head_weights``. Without
        ``alignment_layer`` they are those of the last layer when fairseq asked for alignments
        (``need_attn``, set by --print-alignment), as fairseq's transformer returns them; otherwise
        none are computed, which keeps every attention in the fused kernel, and "attn" is None
        (which fairseq's generators and scorers skip, also in an ensemble with models that return
        attention).
        """
        x, extra = self.extract_features(
            prev_output_tokens, encoder_out, incremental_state, alignment_layer, need_head_weights
        )
        if not features_only:
            x = self.output_layer(x)
        return x, extra

    def extract_features(
        self,
        prev_output_tokens: Tensor,
        encoder_out: Optional[Dict[str, List[Tensor]]] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        alignment_layer: Optional[int] = None,
        need_head_weights: bool = False,
        **unused,
    ):
        assert encoder_out is not None, "the decoder needs the encoder output"
        memory = encoder_out["encoder_out"][0]  # (B, S, d_model)
        memory_padding = encoder_out["encoder_padding_mask"]
        memory_mask = (  # (B, 1, 1, S), 0 / -inf
            attention_bias(~memory_padding[0][:, None, None, :], memory.dtype) if len(memory_padding) > 0 else None
        )
        incremental = incremental_state is not None
        self_attn_mask = None
        if not incremental:
            target_padding = prev_output_tokens.eq(self.padding_idx)  # (B, T)
            if padding_before_tokens(target_padding):  # padded on the left (--left-pad-target)
                # the padding is masked, but each position sees itself: padding before every real
                # token would otherwise have nothing to attend to (a softmax over -inf only: NaN)
                diagonal = torch.eye(target_padding.size(1), dtype=torch.bool, device=target_padding.device)
                self_attn_mask = (~target_padding)[:, None, None, :] | diagonal  # (B, 1, T, T)
        if alignment_layer is None and self.need_attn:
            alignment_layer = len(self.layers) - 1
        elif alignment_layer is not None and alignment_layer < 0:
            alignment_layer += len(self.layers)

        x = self.embed(prev_output_tokens, incremental=incremental)
        attn = None
        for idx, layer in enumerate(self.layers):
            x, layer_attn = layer(
                x, memory, memory_mask, self_attn_mask, incremental_state, need_attn=idx == alignment_layer
            )
            if layer_attn is not None:
                attn = layer_attn if need_head_weights else layer_attn.mean(dim=1)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return x, {"attn": [attn] if attn is not None else None, "inner_states": None}

    def output_layer(self, features: Tensor) -> Tensor:
        """Section 3.4: the pre-softmax linear transformation (B, T, d_model) -> (B, T, V) (plus the
        --output-bias, where there is one)."""
        logits = self.output_projection(features)
        return logits if self.output_bias is None else logits + self.output_bias.to(logits.dtype)

    def max_positions(self) -> int:
        return self.max_target_positions


def dropouts_held_by(model: nn.Module, class_names: Optional[List[str]] = None) -> List[Dropout]:
    """The Dropout modules of ``model`` held (at any depth) by a module of one of ``class_names``,
    or all of them; a name that holds none raises ValueError listing the names that do."""
    owners = {}  # Dropout -> class names of the modules that hold it
    for name, module in model.named_modules():
        if isinstance(module, Dropout):
            path = name.split(".")
            owners[module] = {type(model.get_submodule(".".join(path[:i]))).__name__ for i in range(len(path))}
    if class_names is None:
        return list(owners)
    if isinstance(class_names, str):  # as fairseq passes the flag on: "['DecoderLayer']", or "DecoderLayer,..."
        text = class_names.strip()
        class_names = ast.literal_eval(text) if text.startswith("[") else text.replace(",", " ").split()
        class_names = [class_names] if isinstance(class_names, str) else class_names
    known = set().union(*owners.values()) - {"ModuleList"}
    unknown = [name for name in class_names if name not in known]
    if unknown:
        raise ValueError(
            f"--retain-dropout-modules {unknown}: no dropout of {type(model).__name__} is held by such a module;"
            f" the modules that hold dropout are {sorted(known)}"
        )
    return [dropout for dropout, held_by in owners.items() if held_by & set(class_names)]


@register_model("vaswani_transformer", dataclass=VaswaniTransformerConfig)
class VaswaniTransformerModel(FairseqEncoderDecoderModel):
    """Section 3: the encoder-decoder Transformer. See the module docstring for every flag."""

    @classmethod
    def add_args(cls, parser):
        """The dataclass's flags (fairseq's own way), and fairseq's transformer flags refused with their
        reason (fairseq_transformer_flags.py)."""
        super().add_args(parser)
        add_refused_flags(parser)

    @classmethod
    def build_model(cls, cfg, task):
        if isinstance(cfg, Namespace):  # fill what an older or foreign namespace lacks from the dataclass
            cfg = getattr(cls, "__dataclass").from_namespace(cfg)
        check_config(cfg)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        if src_dict.pad() != tgt_dict.pad():
            raise ValueError("source and target dictionaries must use the same padding index")

        if cfg.share_all_embeddings:
            if src_dict != tgt_dict:
                raise ValueError(
                    "--share-all-embeddings needs one dictionary for source and target:"
                    " binarize with fairseq-preprocess --joined-dictionary"
                )
            encoder_embed = Embedding(len(src_dict), cfg.d_model, src_dict.pad())
            decoder_embed = encoder_embed  # Section 3.4: one matrix, three uses
            share_output = True
        else:
            if src_dict == tgt_dict:
                logger.warning(
                    "the paper (Section 3.4) shares source, target and output embeddings;"
                    " pass --share-all-embeddings to do the same with this joined dictionary"
                )
            encoder_embed = Embedding(len(src_dict), cfg.d_model, src_dict.pad())
            decoder_embed = Embedding(len(tgt_dict), cfg.d_model, tgt_dict.pad())
            share_output = cfg.share_decoder_input_output_embed

        encoder = VaswaniEncoder(cfg, src_dict, encoder_embed)
        decoder = VaswaniDecoder(cfg, tgt_dict, decoder_embed, share_output)
        return cls(encoder, decoder)

    def forward(self, src_tokens, src_lengths, prev_output_tokens, **kwargs):
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, **kwargs)

    def make_generation_fast_(self, need_attn=False, retain_dropout=False, retain_dropout_modules=None, **kwargs):
        """fairseq's hook for inference, which ``prepare_for_inference_`` (fairseq-generate,
        fairseq-interactive, ``from_pretrained``) calls with the generation flags, once.

        ``need_attn`` (--print-alignment): the decoder returns the last layer's encoder-decoder
        attention averaged over heads at every step, which fairseq turns into alignments.
        ``retain_dropout`` (--retain-dropout): dropout stays on after ``eval()`` (Monte-Carlo
        dropout), in every module, or with ``retain_dropout_modules`` (--retain-dropout-modules)
        only in the modules held by one of the named classes (``DecoderLayer``, ``VaswaniEncoder``,
        ``MultiHeadAttention``, ...); a name that holds no dropout here is refused.
        """
        if self._is_generation_fast:
            return  # fairseq applies its own part once too
        self.decoder.need_attn = bool(need_attn)
        if retain_dropout:
            for dropout in dropouts_held_by(self, retain_dropout_modules):
                dropout.retain_during_inference = True
        super().make_generation_fast_(**kwargs)

    def set_beam_size(self, beam_size: int):
        """fairseq's SequenceGenerator calls this with its beam size: the encoder-decoder attention
        then projects the encoder output once per sentence (modules/beam_search_caches.py)."""
        self.decoder.set_beam_size(beam_size)


# ---------------------------------------------------------------------------------------------
# Architectures (config.py: ARCHITECTURES, overrides of VaswaniTransformerConfig's defaults). Each is
# registered under its own name with its own dataclass, so that ``--arch vaswani_big`` and a hydra
# config ``model: {_name: vaswani_big}`` start from the same defaults, which flags and keys still
# override. (A shared dataclass with architecture functions would not do: in a hydra config fairseq
# fills every key from the model's dataclass before an architecture function could set its own.)
# ---------------------------------------------------------------------------------------------


def register_architecture(name: str, overrides: Dict[str, object]) -> None:
    """Register ``name`` as VaswaniTransformerConfig with the defaults in ``overrides``."""
    base = {f.name: f for f in dataclasses.fields(VaswaniTransformerConfig)}
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise ValueError(f"architecture {name}: no such fields {unknown}")
    config = dataclasses.make_dataclass(
        "".join(part.capitalize() for part in name.split("_")) + "Config",
        [(k, base[k].type, field(default=v, metadata=base[k].metadata)) for k, v in overrides.items()],
        bases=(VaswaniTransformerConfig,),
    )
    config.__module__ = __name__
    # the same model; a subclass only because fairseq keeps one dataclass per registered class
    model = type(VaswaniTransformerModel.__name__, (VaswaniTransformerModel,), {"__module__": __name__})
    register_model(name, dataclass=config)(model)


for _name, _overrides in ARCHITECTURES.items():
    register_architecture(_name, _overrides)
