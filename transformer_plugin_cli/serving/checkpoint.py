"""What the exporters share: loading a ``vaswani_transformer`` checkpoint for export, refusing what the
target format cannot hold before fairseq builds the model."""

import argparse
from typing import Callable, Optional


class UnsupportedModelError(ValueError):
    """The checkpoint's model has something the export format cannot hold."""


def check_even_heads(cfg, target: str) -> None:
    """``target`` (CTranslate2, MarianMT) splits d_model evenly between the heads: refuse --d-k or --d-v
    other than d_model / h, naming the flag."""
    h = cfg.attention_heads
    for name in ("d_k", "d_v"):
        value = getattr(cfg, name, None)
        if value is not None and value * h != cfg.d_model:
            raise UnsupportedModelError(
                f"--{name.replace('_', '-')} {value} with --attention-heads {h} and --d-model {cfg.d_model}:"
                f" {target} needs {name} = d_model / h = {cfg.d_model // h}"
            )


def load_for_export(
    model_path: str,
    data_dir: str,
    source_lang: Optional[str],
    target_lang: Optional[str],
    check_supported: Callable,
    other_models: str,
):
    """(model in float32 and eval mode, cfg, task, the saved state) of the vaswani_transformer checkpoint
    ``model_path`` with the dictionaries of ``data_dir``, loaded through the plugin's allowlist (a
    missing, corrupt or unsafe file is named before fairseq reads it). ``check_supported(model cfg)``
    runs on the saved configuration before fairseq builds anything, and again on the built one (d_k and
    d_v filled in); another model is refused, pointing to ``other_models``."""
    from fairseq import checkpoint_utils

    from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    state = load_checked(model_path, mmap=True)
    saved = state.get("cfg") or {}
    model_cfg = saved.get("model") if hasattr(saved, "get") else None
    if model_cfg is not None:
        if not str(model_cfg.get("_name", "")).startswith("vaswani"):
            raise UnsupportedModelError(
                f"{model_path} is a {model_cfg.get('_name')} checkpoint, not vaswani_transformer ({other_models})"
            )
        check_supported(argparse.Namespace(**model_cfg))
    overrides = {"data": data_dir}
    overrides.update({k: v for k, v in (("source_lang", source_lang), ("target_lang", target_lang)) if v})
    (model,), cfg, task = checkpoint_utils.load_model_ensemble_and_task([model_path], arg_overrides=overrides)
    if not isinstance(model, VaswaniTransformerModel):
        raise UnsupportedModelError(
            f"{model_path} is a {cfg.model._name} checkpoint, not vaswani_transformer ({other_models})"
        )
    check_supported(cfg.model)
    return model.eval().float(), cfg, task, state
