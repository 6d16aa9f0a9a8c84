"""Convert the weights of fairseq's built-in ``transformer`` into ``vaswani_transformer`` weights.

fairseq's post-norm transformer with ReLU, shared embeddings and no extra layer norms computes the
same function as this model with ``--sinusoid-variant fairseq`` (its positional encoding). The
converter renames the parameters and stacks W^Q, W^K, W^V into one matrix for self-attention (and
W^K, W^V for encoder-decoder attention), so that a fairseq model can be evaluated, or fine-tuned,
with this plugin. The tests use it to prove that both models compute the same logits and the same
beam search output; the speed benchmark decodes one set of weights with both implementations.

    vaswani-convert fairseq_transformer.pt vaswani.pt
    fairseq-generate DATA --user-dir transformer_plugin --path vaswani.pt ...

The converted checkpoint has no optimizer state: continue training from it with --reset-optimizer.
"""

import argparse
import re
import sys
from typing import Any, Dict

import torch
from torch import Tensor

from transformer_plugin_cli.console import console_script


_RENAMES = [
    (r"^(encoder|decoder)\.embed_tokens\.weight$", r"\1.embed.embed_tokens.weight"),
    (r"^(encoder|decoder)\.embed_positions\.weight$", r"\1.embed.embed_positions.weight"),
    (r"\.self_attn_layer_norm\.", ".self_attn_sublayer.layer_norm."),
    (r"\.encoder_attn_layer_norm\.", ".encoder_attn_sublayer.layer_norm."),
    (r"\.final_layer_norm\.", ".ffn_sublayer.layer_norm."),
    (r"\.fc1\.", ".ffn.w_1."),
    (r"\.fc2\.", ".ffn.w_2."),
]

_UNSUPPORTED = (
    "layernorm_embedding",
    "encoder.layer_norm.",
    "decoder.layer_norm.",
    "project_in_dim",
    "project_out_dim",
)


def state_dict_from_fairseq_transformer(fairseq_state: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """fairseq ``transformer`` state dict -> ``vaswani_transformer`` state dict (a new dict)."""
    for key in fairseq_state:
        if any(part in key for part in _UNSUPPORTED):
            raise ValueError(
                f"cannot convert {key}: only fairseq's post-norm transformer without extra layer norms maps"
            )
    out, stacked = {}, {}
    for key, value in fairseq_state.items():
        if key.endswith("._float_tensor") or key.endswith(".version"):
            continue
        m = re.match(r"^(.*\.(self_attn|encoder_attn))\.(q|k|v)_proj\.(weight|bias)$", key)
        if m:
            stacked.setdefault((m.group(1), m.group(2), m.group(4)), {})[m.group(3)] = value
            continue
        for pattern, replacement in _RENAMES:
            key = re.sub(pattern, replacement, key)
        out[key] = value
    for (prefix, kind, param), parts in stacked.items():
        if kind == "self_attn":
            out[f"{prefix}.in_proj.{param}"] = torch.cat([parts["q"], parts["k"], parts["v"]], dim=0)
        else:
            out[f"{prefix}.q_proj.{param}"] = parts["q"]
            out[f"{prefix}.kv_proj.{param}"] = torch.cat([parts["k"], parts["v"]], dim=0)
    return out


# fairseq transformer options that change the function computed; each must have this value
_REQUIRED = {
    "encoder_normalize_before": False,
    "decoder_normalize_before": False,
    "encoder_learned_pos": False,
    "decoder_learned_pos": False,
    "no_scale_embedding": False,
    "layernorm_embedding": False,
    "no_token_positional_embeddings": False,
    "cross_self_attention": False,
    "adaptive_softmax_cutoff": None,
    "activation_fn": "relu",
    "quant_noise_pq": 0,
}


def config_from_fairseq_transformer(model_cfg: Any) -> Dict[str, Any]:
    """The ``vaswani_transformer`` model config computing what fairseq's ``transformer`` config does."""

    def get(name, default=None):
        return model_cfg.get(name, default) if isinstance(model_cfg, dict) else getattr(model_cfg, name, default)

    for name, value in _REQUIRED.items():
        if get(name, value) not in (value, None if value is False else value):
            raise ValueError(f"cannot convert a fairseq transformer with {name}={get(name)!r} (needs {value!r})")
    for a, b in [
        ("encoder_embed_dim", "decoder_embed_dim"),
        ("encoder_ffn_embed_dim", "decoder_ffn_embed_dim"),
        ("encoder_attention_heads", "decoder_attention_heads"),
    ]:
        if get(a) != get(b):
            raise ValueError(f"cannot convert: {a}={get(a)} differs from {b}={get(b)}")
    if get("decoder_output_dim", get("decoder_embed_dim")) != get("decoder_embed_dim"):
        raise ValueError("cannot convert: decoder_output_dim differs from decoder_embed_dim")
    return {
        "_name": "vaswani_transformer",
        "encoder_layers": get("encoder_layers"),
        "decoder_layers": get("decoder_layers"),
        "d_model": get("encoder_embed_dim"),
        "d_ff": get("encoder_ffn_embed_dim"),
        "attention_heads": get("encoder_attention_heads"),
        "d_k": None,
        "d_v": None,
        "dropout": get("dropout", 0.1),
        "attention_dropout": get("attention_dropout", 0.0),
        "activation_dropout": get("activation_dropout", 0.0),
        "dropout_masks": "packed",
        "positional_encoding": "sinusoidal",
        "sinusoid_variant": "fairseq",
        "share_all_embeddings": bool(get("share_all_embeddings", False)),
        "share_decoder_input_output_embed": bool(get("share_decoder_input_output_embed", False)),
        "normalize_before": False,
        "max_source_positions": get("max_source_positions", 1024),
        "max_target_positions": get("max_target_positions", 1024),
    }


def convert_checkpoint(state: Dict[str, Any]) -> Dict[str, Any]:
    """A fairseq ``transformer`` checkpoint -> a ``vaswani_transformer`` checkpoint (new dict)."""
    cfg = state.get("cfg")
    if cfg is None or cfg.get("model") is None:
        raise ValueError("only checkpoints with a 'cfg' (fairseq >= 0.10) can be converted")
    out = dict(state)
    out["cfg"] = dict(cfg)
    out["cfg"]["model"] = config_from_fairseq_transformer(cfg["model"])
    out["model"] = state_dict_from_fairseq_transformer(state["model"])
    out.pop("last_optimizer_state", None)  # its tensors follow the old parameter layout
    return out


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Convert a fairseq transformer checkpoint to vaswani_transformer.")
    parser.add_argument("input", help="checkpoint of fairseq's transformer")
    parser.add_argument("output", help="where to write the vaswani_transformer checkpoint")
    args = parser.parse_args(argv)
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    from ..files import save_torch

    try:
        converted = convert_checkpoint(load_checked(args.input))
    except ValueError as e:
        print(f"convert: error: {args.input}: {e}", file=sys.stderr)
        return 1
    save_torch(converted, args.output)
    print(f"converted {args.input} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
