"""How a ``vaswani_transformer`` becomes a MarianMT model: its config, its weights, its vocabulary, and the check that
both compute the same function (``vaswani-export-hf``, ``export_transformers.py``, writes the directory).

Why Marian, and the one permutation
-----------------------------------
``MarianMTModel`` computes the paper's model: post-norm layers ``LayerNorm(x + Sublayer(x))``,
embeddings scaled by sqrt(d_model), biased projections, ReLU (``activation_function: relu``), no
layer norm on the embeddings, and fixed sinusoids with the paper's frequencies
``10000^(-2i/d_model)`` from position 0. It lays them out differently: the paper interleaves them,
``PE[2i] = sin``, ``PE[2i+1] = cos``; Marian puts all sines first, ``PE'[i] = sin``,
``PE'[d_model/2 + i] = cos``. So ``PE' = PE[perm]`` with ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``.

The exported model is the plugin's model with the d_model coordinates of its residual stream
renamed by ``perm``: every vector x on the stream becomes ``x[perm]``. That gives the same function,
because each part of a layer either commutes with the renaming or has its weights renamed with it:

- a linear map that reads the stream (W^Q, W^K, W^V, W_1, the output projection) computes
  ``W x = W[:, perm] x[perm]``: its columns are permuted;
- a linear map that writes to the stream (W^O, W_2) must give ``(W h + b)[perm] = W[perm, :] h + b[perm]``:
  its rows and bias are permuted;
- the residual sums are elementwise, so they commute; dropout is the identity at inference;
- LayerNorm's mean and variance are sums over all coordinates, unchanged by their order; its gain
  and bias are elementwise and are permuted;
- the embeddings write to the stream: the columns of each embedding matrix are permuted (a tied
  output projection stays tied: it reads the stream through the same permuted columns);
- the positional encodings added to them are already in Marian's order, which is the paper's
  permuted: ``PE' = PE[perm]``.

Nothing is approximated: the encoder and decoder outputs are the plugin's permuted, and the logits,
which read the stream through the permuted output projection, are the plugin's. The exporter checks
this on a probe batch before it writes anything (log-probabilities within 1e-4, and Marian's own
sinusoid table against the permuted paper table).

What Marian cannot hold is refused before anything is written, naming the flag:
``--normalize-before`` (Marian is post-norm), ``--positional-encoding learned`` (Marian's positions
are fixed sinusoids), ``--sinusoid-variant fairseq`` (other frequencies, and positions from
padding_idx + 1), ``--d-k``/``--d-v`` other than d_model/h (Marian splits d_model evenly).
"""

from typing import Dict, Sequence

from .checkpoint import UnsupportedModelError, check_even_heads


class ExportError(ValueError):
    """The inputs do not fit together (dictionary and sentencepiece model, output directory, ...)."""


def check_supported(cfg) -> None:
    """Refuse, naming the flag, a model that MarianMT cannot compute."""
    if getattr(cfg, "normalize_before", False):
        raise UnsupportedModelError(
            "--normalize-before: MarianMT's layers are post-norm, LayerNorm(x + Sublayer(x)), as in the paper"
        )
    if getattr(cfg, "positional_encoding", "sinusoidal") != "sinusoidal":
        raise UnsupportedModelError(
            f"--positional-encoding {cfg.positional_encoding}: MarianMT's positions are fixed sinusoids"
        )
    if getattr(cfg, "sinusoid_variant", "paper") != "paper":
        raise UnsupportedModelError(
            f"--sinusoid-variant {cfg.sinusoid_variant}: MarianMT's sinusoids have the paper's frequencies and start"
            " at position 0; fairseq's have other frequencies and start at padding_idx + 1"
        )
    check_even_heads(cfg, "MarianMT")


def paper_to_marian(d_model: int):
    """``perm``: Marian's coordinate k holds the paper's coordinate ``perm[k]`` (sines, then cosines)."""
    import torch

    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_state_dict(model, perm) -> Dict[str, "object"]:
    """The plugin model's weights under MarianMTModel's names, the residual stream renamed by ``perm``."""
    import torch

    state: Dict[str, torch.Tensor] = {}

    def reads(name, linear):  # columns: the input comes from the stream
        state[f"{name}.weight"] = linear.weight.detach()[:, perm]
        state[f"{name}.bias"] = linear.bias.detach()

    def writes(name, linear):  # rows and bias: the output goes to the stream
        state[f"{name}.weight"] = linear.weight.detach()[perm, :]
        state[f"{name}.bias"] = linear.bias.detach()[perm]

    def norm(name, layer_norm):
        state[f"{name}.weight"] = layer_norm.weight.detach()[perm]
        state[f"{name}.bias"] = layer_norm.bias.detach()[perm]

    def projections(name, weight, bias, parts: Sequence[str], sizes: Sequence[int]):
        for part, w, b in zip(parts, weight.detach().split(sizes), bias.detach().split(sizes)):
            state[f"{name}.{part}.weight"] = w[:, perm]
            state[f"{name}.{part}.bias"] = b

    def ffn(prefix, layer):
        reads(f"{prefix}.fc1", layer.ffn.w_1)
        writes(f"{prefix}.fc2", layer.ffn.w_2)
        norm(f"{prefix}.final_layer_norm", layer.ffn_sublayer.layer_norm)

    def self_attention(prefix, layer):
        attn = layer.self_attn
        projections(
            f"{prefix}.self_attn",
            attn.in_proj.weight,
            attn.in_proj.bias,
            ("q_proj", "k_proj", "v_proj"),
            [attn.h * attn.d_k, attn.h * attn.d_k, attn.h * attn.d_v],
        )
        writes(f"{prefix}.self_attn.out_proj", attn.out_proj)
        norm(f"{prefix}.self_attn_layer_norm", layer.self_attn_sublayer.layer_norm)

    encoder, decoder = model.encoder, model.decoder
    for i, layer in enumerate(encoder.layers):
        self_attention(f"model.encoder.layers.{i}", layer)
        ffn(f"model.encoder.layers.{i}", layer)
    for i, layer in enumerate(decoder.layers):
        prefix = f"model.decoder.layers.{i}"
        self_attention(prefix, layer)
        attn = layer.encoder_attn
        reads(f"{prefix}.encoder_attn.q_proj", attn.q_proj)
        projections(
            f"{prefix}.encoder_attn",
            attn.kv_proj.weight,
            attn.kv_proj.bias,
            ("k_proj", "v_proj"),
            [attn.h * attn.d_k, attn.h * attn.d_v],
        )
        writes(f"{prefix}.encoder_attn.out_proj", attn.out_proj)
        norm(f"{prefix}.encoder_attn_layer_norm", layer.encoder_attn_sublayer.layer_norm)
        ffn(prefix, layer)

    source_embed = encoder.embed.embed_tokens.weight.detach()[:, perm]
    target_embed = decoder.embed.embed_tokens.weight.detach()[:, perm]
    if encoder.embed.embed_tokens is decoder.embed.embed_tokens:  # --share-all-embeddings
        state["model.shared.weight"] = source_embed
    else:
        state["model.encoder.embed_tokens.weight"] = source_embed
        state["model.decoder.embed_tokens.weight"] = target_embed
    output = decoder.output_projection.weight
    if output is not decoder.embed.embed_tokens.weight:  # not tied: Marian's lm_head is a matrix of its own
        state["lm_head.weight"] = output.detach()[:, perm]
    bias = decoder.output_bias  # --output-bias: MarianMT's own final_logits_bias; the paper's projection has none
    state["final_logits_bias"] = torch.zeros(1, output.size(0)) if bias is None else bias.detach().reshape(1, -1)
    return state


def marian_config(cfg, source_dictionary, target_dictionary):
    """MarianConfig for the plugin model's configuration ``cfg`` and its dictionaries."""
    from transformers import MarianConfig

    for name in ("pad", "eos", "unk"):
        if getattr(source_dictionary, name)() != getattr(target_dictionary, name)():
            raise ExportError(f"the source and target dictionaries give <{name}> different ids")
    shared = bool(cfg.share_all_embeddings)
    return MarianConfig(
        vocab_size=len(source_dictionary),
        decoder_vocab_size=len(target_dictionary),
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=shared or bool(cfg.share_decoder_input_output_embed),
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        encoder_attention_heads=cfg.attention_heads,
        decoder_attention_heads=cfg.attention_heads,
        activation_function=getattr(cfg, "activation_fn", "relu"),  # relu (the paper's), or swish
        scale_embedding=True,
        max_position_embeddings=max(cfg.max_source_positions, cfg.max_target_positions),
        dropout=cfg.dropout,  # for fine-tuning; generation runs in eval mode
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        pad_token_id=target_dictionary.pad(),
        eos_token_id=target_dictionary.eos(),
        forced_eos_token_id=target_dictionary.eos(),
        # fairseq starts every target with </s>; under --decoder-start pad its first position takes the padding
        # row's embedding, which is MarianMT's start from <pad>
        decoder_start_token_id=target_dictionary.pad()
        if getattr(cfg, "decoder_start", "eos") == "pad"
        else target_dictionary.eos(),
        bos_token_id=None,
    )


def vocabulary(dictionary, spm_path: str) -> Dict[str, int]:
    """{piece: fairseq id} for the tokenizer's vocab.json. Every symbol of the dictionary but fairseq's
    own (<s>, <pad>, </s>, <unk>, madeupword*) must be a piece of the sentencepiece model."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
    specials = set(dictionary.symbols[: dictionary.nspecial])
    foreign = [
        s for s in dictionary.symbols if s not in pieces and s not in specials and not s.startswith("madeupword")
    ]
    if foreign:
        raise ExportError(
            f"{len(foreign)} symbols of the dictionary are not pieces of {spm_path} (e.g. {foreign[:5]}):"
            " give the sentencepiece model the data was encoded with"
        )
    return {symbol: i for i, symbol in enumerate(dictionary.symbols)}


def check_equivalent(model, marian, source_dictionary, target_dictionary, perm, tolerance: float = 1e-4) -> float:
    """The largest difference between the two models' log-probabilities on a probe batch; raises if it
    exceeds ``tolerance`` or if Marian's sinusoids are not the paper's permuted."""
    import torch

    from transformer_plugin.modules.positional_encoding import sinusoid_table

    table = marian.model.encoder.embed_positions.weight
    expected = sinusoid_table(table.size(0), table.size(1), "paper")[:, perm]
    if not torch.allclose(table.float(), expected, atol=1e-6, rtol=0):
        raise ExportError("MarianMT's sinusoid table is not the paper's in sine-then-cosine order")
    generator = torch.Generator().manual_seed(0)

    def tokens(dictionary, n):
        return torch.randint(dictionary.nspecial, len(dictionary), (3, n), generator=generator)

    source = torch.cat([tokens(source_dictionary, 9), torch.full((3, 1), source_dictionary.eos())], dim=1)
    target = torch.cat([torch.full((3, 1), target_dictionary.eos()), tokens(target_dictionary, 7)], dim=1)
    their_target = target.clone()
    their_target[:, 0] = marian.config.decoder_start_token_id  # </s>, or <pad> under --decoder-start pad
    with torch.no_grad():
        ours = model.get_normalized_probs(model(source, torch.full((3,), source.size(1)), target), log_probs=True)
        theirs = marian(input_ids=source, attention_mask=torch.ones_like(source), decoder_input_ids=their_target).logits
        theirs = torch.log_softmax(theirs.float(), dim=-1)
    difference = float((ours.float() - theirs).abs().max())
    if not difference <= tolerance:
        raise ExportError(f"the exported model's log-probabilities differ from the checkpoint's by {difference:.2e}")
    return difference


def tied_weights(marian) -> set:
    """The weights Marian ties to others (they need no entry of their own)."""
    tied = getattr(marian, "_tied_weights_keys", None) or {}
    tied = set(tied) if marian.config.tie_word_embeddings else set()
    base = getattr(marian.model, "_tied_weights_keys", None) or {}
    return tied | {f"model.{k}" for k in base}
