"""A ``vaswani_transformer`` checkpoint as a CTranslate2 model, for serving.

CTranslate2's own fairseq converter accepts only fairseq's model names (``transformer``, ``bart``,
...), so it refuses this plugin's checkpoints. This converter takes the same flags and writes the
same kind of model directory:

    vaswani-export-ct2 --model-path checkpoints/average.pt \\
        --data-dir data-bin/wmt14_en_de --output-dir ct2_model [--quantization int8] [--force]

What is carried over: the model's own positional table (the paper's interleaved sinusoids, fairseq's
concatenated ones, or learned positions: always written out as a table, so CTranslate2 uses exactly
the encodings the model was trained with), shared or separate embeddings and output projection,
post-norm (the paper) or pre-norm (``--normalize-before``) layers, and sqrt(d_model) on the
embeddings. A model CTranslate2 cannot hold is refused with the flag that made it so: d_k or d_v
other than d_model/h (CTranslate2 splits d_model evenly between the heads).

The outputs are CTranslate2's: ``ctranslate2.Translator(output_dir).translate_batch(pieces,
beam_size=4, length_penalty=0.6)`` on sentencepiece pieces (tests/integration/test_cli.py checks
the scores and translations against fairseq-generate's; ``make bench-serving`` measures the speed).
"""

import argparse
import sys
from typing import List, Optional

import numpy as np
from ctranslate2.converters.converter import Converter

from ..console import console_script, kebab_case_options
from .checkpoint import UnsupportedModelError, check_even_heads, load_for_export


def _vocabulary(dictionary) -> List[str]:
    return ["<blank>" if token == "<pad>" else token for token in dictionary.symbols]  # CTranslate2's padding name


def check_supported(cfg) -> None:
    """Refuse what CTranslate2 cannot represent, naming the flag. --decoder-start pad is refused: CTranslate2 4.8's
    scores were the same with its start token set to the padding token and to </s>, so that its
    decoding from the padding row could not be shown."""
    check_even_heads(cfg, "CTranslate2")
    if getattr(cfg, "decoder_start", "eos") != "eos":
        raise UnsupportedModelError(
            f"--decoder-start {cfg.decoder_start}: not exported to CTranslate2 (vaswani-export-hf exports it)"
        )


def _table(positions) -> np.ndarray:
    """The encoding of positions 0, 1, 2, ... as the model adds them (see modules/positional_encoding.py)."""
    weight = positions.weight if positions.learned else positions.sinusoids(positions.max_positions)
    return weight.detach().float().numpy()


def _linear(spec, linear) -> None:
    spec.weight = linear.weight.detach().float().numpy()
    if linear.bias is not None:
        spec.bias = linear.bias.detach().float().numpy()


def _layer_norm(spec, norm) -> None:
    spec.gamma = norm.weight.detach().float().numpy()
    spec.beta = norm.bias.detach().float().numpy()


def _embedding_layer(spec, embed) -> None:
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings  # encoder: a list
    embeddings.weight = embed.embed_tokens.weight.detach().float().numpy()
    spec.scale_embeddings = embed.embed_scale
    spec.position_encodings.encodings = _table(embed.embed_positions)


def _attention(spec, attention, self_attention: bool) -> None:
    if self_attention:  # [W^Q | W^K | W^V] is already one matrix, as CTranslate2 keeps it
        _linear(spec.linear[0], attention.in_proj)
    else:  # W^Q, then [W^K | W^V]
        _linear(spec.linear[0], attention.q_proj)
        _linear(spec.linear[1], attention.kv_proj)
    _linear(spec.linear[-1], attention.out_proj)


def _ffn(spec, ffn, sublayer) -> None:
    _linear(spec.linear_0, ffn.w_1)
    _linear(spec.linear_1, ffn.w_2)
    _layer_norm(spec.layer_norm, sublayer.layer_norm)


def fill_spec(spec, model) -> None:
    """Copy ``model``'s weights into a CTranslate2 TransformerSpec built for its sizes."""
    encoder, decoder = model.encoder, model.decoder
    _embedding_layer(spec.encoder, encoder.embed)
    for layer_spec, layer in zip(spec.encoder.layer, encoder.layers):
        _attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_sublayer.layer_norm)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_sublayer)
    if encoder.layer_norm is not None:
        _layer_norm(spec.encoder.layer_norm, encoder.layer_norm)
    _embedding_layer(spec.decoder, decoder.embed)
    for layer_spec, layer in zip(spec.decoder.layer, decoder.layers):
        _attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_sublayer.layer_norm)
        _attention(layer_spec.attention, layer.encoder_attn, self_attention=False)
        _layer_norm(layer_spec.attention.layer_norm, layer.encoder_attn_sublayer.layer_norm)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_sublayer)
    if decoder.layer_norm is not None:
        _layer_norm(spec.decoder.layer_norm, decoder.layer_norm)
    _linear(spec.decoder.projection, decoder.output_projection)
    if decoder.output_bias is not None:  # --output-bias: the projection's bias in CTranslate2
        spec.decoder.projection.bias = decoder.output_bias.detach().float().numpy()


class VaswaniTransformerConverter(Converter):
    """CTranslate2's Converter for ``vaswani_transformer`` checkpoints (fairseq + this plugin)."""

    def __init__(
        self, model_path: str, data_dir: str, source_lang: Optional[str] = None, target_lang: Optional[str] = None
    ):
        self.model_path, self.data_dir = model_path, data_dir
        self.source_lang, self.target_lang = source_lang, target_lang

    def _load(self):
        import torch
        from ctranslate2.specs import common_spec, transformer_spec

        model, cfg, task, _ = load_for_export(
            self.model_path,
            self.data_dir,
            self.source_lang,
            self.target_lang,
            check_supported,
            "for fairseq's own models use ct2-fairseq-converter",
        )
        spec = transformer_spec.TransformerSpec.from_config(
            (cfg.model.encoder_layers, cfg.model.decoder_layers),
            cfg.model.attention_heads,
            pre_norm=bool(cfg.model.normalize_before),
            activation=getattr(
                common_spec.Activation, {"swish": "SWISH"}.get(getattr(cfg.model, "activation_fn", "relu"), "RELU")
            ),
        )
        with torch.no_grad():
            fill_spec(spec, model)
        spec.register_source_vocabulary(_vocabulary(task.source_dictionary))
        spec.register_target_vocabulary(_vocabulary(task.target_dictionary))
        spec.config.decoder_start_token = spec.config.eos_token  # fairseq starts the target with </s>
        spec.config.add_source_eos = True  # and ends every source with </s>
        return spec


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", required=True, help="the vaswani_transformer checkpoint (.pt)")
    parser.add_argument("--data-dir", required=True, help="the fairseq data directory with its dict.*.txt")
    parser.add_argument("--source-lang", help="source language, if the checkpoint does not name it")
    parser.add_argument("--target-lang", help="target language, if the checkpoint does not name it")
    Converter.declare_arguments(parser)  # --output_dir, --vocab_mapping, --quantization, --force
    args = kebab_case_options(parser).parse_args(argv)
    from transformer_plugin.patches.checkpoint_allowlist import CorruptCheckpointError, UnsafeCheckpointError

    converter = VaswaniTransformerConverter(args.model_path, args.data_dir, args.source_lang, args.target_lang)
    try:
        output = converter.convert_from_args(args)
    except (UnsupportedModelError, CorruptCheckpointError, UnsafeCheckpointError, FileNotFoundError) as e:
        print(f"export_ctranslate2: error: {e}", file=sys.stderr)
        return 1
    print(f"CTranslate2 model: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
