"""Convert the weights of fairseq's built-in ``transformer`` into ``vaswani_transformer`` weights.

fairseq's post-norm transformer with ReLU, shared embeddings and no extra layer norms computes the
same function as this model with ``--sinusoid-variant fairseq`` (its positional encoding). The
converter renames the parameters and stacks W^Q, W^K, W^V into one matrix for self-attention (and
W^K, W^V for encoder-decoder attention), so that a fairseq model can be evaluated, or fine-tuned,
with this plugin (``model.load_state_dict(state_dict_from_fairseq_transformer(state["model"]))``).
The tests use it to prove that both models compute the same logits and the same beam search output.
"""

import re
from typing import Dict

import torch
from torch import Tensor

_RENAMES = [
    (r"^(encoder|decoder)\.embed_tokens\.weight$", r"\1.embed.embed_tokens.weight"),
    (r"^(encoder|decoder)\.embed_positions\.weight$", r"\1.embed.embed_positions.weight"),
    (r"\.self_attn_layer_norm\.", ".self_attn_sublayer.layer_norm."),
    (r"\.encoder_attn_layer_norm\.", ".encoder_attn_sublayer.layer_norm."),
    (r"\.final_layer_norm\.", ".ffn_sublayer.layer_norm."),
    (r"\.fc1\.", ".ffn.w_1."),
    (r"\.fc2\.", ".ffn.w_2."),
]

_UNSUPPORTED = ("layernorm_embedding", "encoder.layer_norm.", "decoder.layer_norm.", "project_in_dim", "project_out_dim")


def state_dict_from_fairseq_transformer(fairseq_state: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """fairseq ``transformer`` state dict -> ``vaswani_transformer`` state dict (a new dict)."""
    for key in fairseq_state:
        if any(part in key for part in _UNSUPPORTED):
            raise ValueError(f"cannot convert {key}: only fairseq's post-norm transformer without extra layer norms maps")
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
