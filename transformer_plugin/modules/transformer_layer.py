"""Section 3.1: the encoder and decoder layers.

Every sub-layer is wrapped as ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-norm, Section 3.1 with
the residual dropout of Section 5.4). ``normalize_before=True`` gives the pre-norm variant
``x + Dropout(Sublayer(LayerNorm(x)))`` (not in the paper; then the encoder and decoder end with a
final LayerNorm).

Encoder layer: self-attention, then FFN.
Decoder layer: masked self-attention, then encoder-decoder attention, then FFN.

Each layer's ``sublayers`` is the paper's computation; ``forward`` runs it eagerly or, in training under
``--compile-layers``, compiled by torch.compile (compiled_layers.py, a speed seam).
"""

from typing import Callable, Optional, Tuple

from torch import Tensor, nn

from . import compiled_layers
from .dropout import Dropout
from .feed_forward import PositionwiseFeedForward
from .multihead_attention import MultiHeadAttention


def packed_dropout(cfg) -> bool:
    """``--dropout-masks`` (see dropout.py); configurations saved before the flag existed get "packed"."""
    return getattr(cfg, "dropout_masks", None) in (None, "packed")


class SublayerConnection(nn.Module):
    """LayerNorm(x + Dropout(Sublayer(x))), or pre-norm x + Dropout(Sublayer(LayerNorm(x)))."""

    def __init__(self, d_model: int, dropout: float, normalize_before: bool = False, packed_dropout: bool = True):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout, packed_dropout)
        self.normalize_before = normalize_before

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.normalize_before:
            return x + self.dropout(sublayer(self.layer_norm(x)))
        return self.layer_norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        packed = packed_dropout(cfg)
        self.self_attn = MultiHeadAttention(
            cfg.d_model,
            cfg.attention_heads,
            cfg.d_k,
            cfg.d_v,
            cfg.attention_dropout,
            self_attention=True,
            packed_dropout=packed,
        )
        self.ffn = PositionwiseFeedForward(
            cfg.d_model, cfg.d_ff, cfg.activation_dropout, packed, getattr(cfg, "activation_fn", "relu")
        )
        self.self_attn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.normalize_before, packed)
        self.ffn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.normalize_before, packed)
        self.compile_layers = compiled_layers.mode_of(cfg)

    def forward(
        self, x: Tensor, padding_mask: Optional[Tensor], need_attn: bool = False
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """x (B, S, d_model); padding_mask (B, 1, 1, S): 0 at real tokens, -inf at padding (attention_bias).

        Returns the output and, with ``need_attn``, the self-attention weights (B, h, S, S).
        """
        if not need_attn and compiled_layers.applies(self.compile_layers, self, x):
            return compiled_layers.compiled(EncoderLayer.sublayers)(self, x, padding_mask)
        return self.sublayers(x, padding_mask, need_attn)

    def sublayers(
        self, x: Tensor, padding_mask: Optional[Tensor], need_attn: bool = False
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Self-attention, then FFN, each in its SublayerConnection (the paper's layer; ``forward``'s arguments)."""
        attn = None

        def self_attention(y):
            nonlocal attn
            out, attn = self.self_attn(y, mask=padding_mask, need_weights=need_attn)
            return out

        x = self.self_attn_sublayer(x, self_attention)
        return self.ffn_sublayer(x, self.ffn), attn


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, d_k, d_v, packed = cfg.attention_heads, cfg.d_k, cfg.d_v, packed_dropout(cfg)
        self.self_attn = MultiHeadAttention(
            cfg.d_model, h, d_k, d_v, cfg.attention_dropout, self_attention=True, packed_dropout=packed
        )
        self.encoder_attn = MultiHeadAttention(
            cfg.d_model, h, d_k, d_v, cfg.attention_dropout, self_attention=False, packed_dropout=packed
        )
        self.ffn = PositionwiseFeedForward(
            cfg.d_model, cfg.d_ff, cfg.activation_dropout, packed, getattr(cfg, "activation_fn", "relu")
        )
        self.self_attn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.normalize_before, packed)
        self.encoder_attn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.normalize_before, packed)
        self.ffn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.normalize_before, packed)
        self.compile_layers = compiled_layers.mode_of(cfg)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        memory_mask: Optional[Tensor],
        self_attn_mask: Optional[Tensor],
        incremental_state=None,
        need_attn: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """x (B, T, d_model); memory (B, S, d_model); memory_mask (B, 1, 1, S) an attention_bias
        (0 / -inf); self_attn_mask None, or for targets padded on the left (B, 1, T, T) bool, True =
        may attend (right padding needs none: the causal mask already hides it from real tokens).

        Returns the output and, with ``need_attn``, the encoder-decoder attention weights (B, h, T, S).
        """
        if incremental_state is None and not need_attn and compiled_layers.applies(self.compile_layers, self, x):
            return compiled_layers.compiled(DecoderLayer.sublayers)(self, x, memory, memory_mask, self_attn_mask)
        return self.sublayers(x, memory, memory_mask, self_attn_mask, incremental_state, need_attn)

    def sublayers(
        self,
        x: Tensor,
        memory: Tensor,
        memory_mask: Optional[Tensor],
        self_attn_mask: Optional[Tensor],
        incremental_state=None,
        need_attn: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Masked self-attention, encoder-decoder attention, then FFN, each in its SublayerConnection (the paper's
        layer; ``forward``'s arguments)."""
        x = self.self_attn_sublayer(
            x,
            lambda y: self.self_attn(y, mask=self_attn_mask, causal=True, incremental_state=incremental_state)[0],
        )
        attn = None

        def encoder_attention(y):
            nonlocal attn
            out, attn = self.encoder_attn(
                y,
                memory,
                mask=memory_mask,
                incremental_state=incremental_state,
                need_weights=need_attn,
            )
            return out

        x = self.encoder_attn_sublayer(x, encoder_attention)
        return self.ffn_sublayer(x, self.ffn), attn
