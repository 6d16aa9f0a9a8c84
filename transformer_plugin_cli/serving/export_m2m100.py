"""A ``vaswani_transformer`` fine-tuned from an NLLB-200 or M2M100 parent, exported back to their own format:
``M2M100ForConditionalGeneration`` with the parent's tokenizer, which transformers loads with no missing or unexpected
weights and which translates as fairseq-generate does (``vaswani-export-hf --m2m100-tokenizer PARENT/tokenizer``).

The mapping is import_m2m100's backwards: no coordinate is renamed, the stacked projections are split into q, k and v
again, each stack's LayerNorm and the one embedding matrix go where M2M100 keeps them. The generation config is
fairseq-generate's beam search (Section 6.1's beam and length penalty, <pad> never generated) with the target's code
forced first (``forced_bos_token_id``); the tokenizer's ``src_lang`` and ``tgt_lang`` are the pair's codes.

Refused, naming the flag: a model other than the family's shape (post-norm, the paper's sinusoids, learned positions,
swish, embeddings not shared three ways, an output bias, decoding from <pad>, d_k other than d_model / h).
"""

import json
import os
import shutil
from typing import Dict, List, Optional, Sequence

from .bart_family import layer_parts
from .checkpoint import UnsupportedModelError, check_even_heads, load_for_export
from .import_m2m100 import LANGUAGES, check_equivalent
from .marian import ExportError


def check_supported(cfg) -> None:
    """Refuse, naming the flag, a model M2M100's code does not compute."""
    wanted = {
        "normalize_before": (True, "--normalize-before (M2M100 is pre-norm)"),
        "sinusoid_variant": ("fairseq", "--sinusoid-variant fairseq (M2M100's positions)"),
        "positional_encoding": ("sinusoidal", "sinusoidal positions (M2M100 has no learned ones)"),
        "activation_fn": ("relu", "--activation-fn relu"),
        "share_all_embeddings": (True, "--share-all-embeddings (M2M100 has one embedding matrix)"),
        "output_bias": (False, "no --output-bias (M2M100's output has none)"),
        "decoder_start": ("eos", "--decoder-start eos (M2M100 starts decoding from </s>)"),
    }
    for name, (value, flag) in wanted.items():
        found = getattr(cfg, name, value)
        found = str(found) if not isinstance(value, bool) else bool(found)
        if found != value:
            raise UnsupportedModelError(f"{name} {found!r}: M2M100ForConditionalGeneration needs {flag}")
    check_even_heads(cfg, "M2M100")


def m2m100_config(cfg, dictionary):
    """The M2M100Config of the model's cfg."""
    from transformers import M2M100Config

    return M2M100Config(
        vocab_size=len(dictionary),
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.attention_heads,
        decoder_attention_heads=cfg.attention_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function="relu",
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        max_position_embeddings=cfg.max_source_positions,
        scale_embedding=True,
        pad_token_id=dictionary.pad(),
        bos_token_id=dictionary.bos(),
        eos_token_id=dictionary.eos(),
        decoder_start_token_id=dictionary.eos(),
        tie_word_embeddings=True,
    )


def m2m100_state_dict(model) -> Dict[str, object]:
    """The plugin's weights under M2M100's names."""
    out: Dict[str, object] = {}

    def linear(module, name):
        out[f"{name}.weight"], out[f"{name}.bias"] = module.weight.detach(), module.bias.detach()

    def split(weight, bias, name, parts):
        for part, w, b in zip(parts, weight.detach().chunk(len(parts)), bias.detach().chunk(len(parts))):
            out[f"{name}.{part}.weight"], out[f"{name}.{part}.bias"] = w, b

    for module, how, name, stacked in layer_parts(model):  # the walk the import takes, backwards
        if how == "stacked":
            split(module.weight, module.bias, name, stacked)
        else:
            linear(module, name)
    linear(model.encoder.layer_norm, "model.encoder.layer_norm")
    linear(model.decoder.layer_norm, "model.decoder.layer_norm")
    out["model.shared.weight"] = model.encoder.embed.embed_tokens.weight.detach()
    return out


def languages_of(tokenizer_dir: str) -> dict:
    """languages.json of the import the tokenizer directory is in (vaswani-import-m2m100's OUT_DIR/tokenizer)."""
    path = os.path.join(os.path.dirname(os.path.abspath(tokenizer_dir)), LANGUAGES)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: the parent's languages, which vaswani-import-m2m100 writes ({e})") from None


def export_m2m100(
    model_path: str,
    data_dir: str,
    tokenizer_dir: str,
    output_dir: str,
    source_lang: Optional[str] = None,
    target_lang: Optional[str] = None,
    force: bool = False,
    beam: int = 4,
    lenpen: float = 0.6,
    max_new_tokens: int = 256,
    scores: Sequence[str] = (),
) -> float:
    """Write ``output_dir`` (module docstring), whole or not at all; returns the largest log-probability difference
    between the checkpoint and the exported model on a probe batch."""
    import torch
    from transformers import GenerationConfig, M2M100ForConditionalGeneration

    if os.path.exists(output_dir) and os.listdir(output_dir) and not force:
        raise ExportError(f"{output_dir} exists and is not empty (--force replaces it)")
    languages = languages_of(tokenizer_dir)
    model, cfg, task, _ = load_for_export(
        model_path, data_dir, source_lang, target_lang, check_supported, "an NLLB or M2M100 child only"
    )
    dictionary = task.target_dictionary
    config = m2m100_config(cfg.model, dictionary)
    theirs = M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():
        missing, unexpected = theirs.load_state_dict(m2m100_state_dict(model), strict=False)
    missing = [
        k
        for k in missing
        if k not in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")
    ]
    if missing or unexpected:
        raise ExportError(f"weights not mapped: missing {missing[:5]}, unexpected {unexpected[:5]}")
    theirs.tie_weights()
    src_code, tgt_code = languages["source"]["code"], languages["target"]["code"]
    codes = [dictionary.index(c) for c in (src_code, tgt_code)]
    if dictionary.unk() in codes:
        raise ExportError(f"{data_dir}: the dictionary has no symbol {src_code} or {tgt_code} (the parent's codes)")
    difference = check_equivalent(model, theirs, *codes)
    theirs.generation_config = GenerationConfig(
        num_beams=beam,
        length_penalty=lenpen,
        early_stopping=True,
        max_new_tokens=max_new_tokens,
        bad_words_ids=[[dictionary.pad()]],
        decoder_start_token_id=dictionary.eos(),
        forced_bos_token_id=codes[1],
        eos_token_id=dictionary.eos(),
        pad_token_id=dictionary.pad(),
    )
    partial = output_dir.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        theirs.save_pretrained(partial)
        for name in os.listdir(tokenizer_dir):
            shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(partial, name))
        settings = os.path.join(partial, "tokenizer_config.json")
        with open(settings, encoding="utf-8") as f:
            tokenizer_config = json.load(f)
        family = languages["family"]
        tokenizer_config["src_lang"] = tokenizer_lang(family, src_code)
        tokenizer_config["tgt_lang"] = tokenizer_lang(family, tgt_code)
        with open(settings, "w", encoding="utf-8") as f:
            json.dump(tokenizer_config, f, ensure_ascii=False, indent=1)
        with open(os.path.join(partial, "README.md"), "w", encoding="utf-8") as f:
            f.write(card(family, src_code, tgt_code, model_path, difference, list(scores)))
        shutil.rmtree(output_dir, ignore_errors=True)
        os.replace(partial, output_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return difference


def main_of(args) -> int:
    """vaswani-export-hf with --m2m100-tokenizer: export_m2m100 of its arguments (its errors said by
    export_transformers.main, as its own are)."""
    difference = export_m2m100(
        args.model_path,
        args.data_dir,
        args.m2m100_tokenizer,
        args.output_dir,
        args.source_lang,
        args.target_lang,
        args.force,
        args.beam,
        args.lenpen,
        args.max_new_tokens or 256,
        args.scores,
    )
    print(f"M2M100 model: {args.output_dir} (log-probabilities within {difference:.1e} of the checkpoint's)")
    return 0


def tokenizer_lang(family: str, code: str) -> str:
    """The tokenizer's name of a code: NLLB's tokenizer takes eng_Latn, M2M100's en for __en__."""
    return code if family == "nllb" else code.strip("_")


def card(family: str, src_code: str, tgt_code: str, model_path: str, difference: float, scores: List[str]) -> str:
    name = "NLLB-200" if family == "nllb" else "M2M100"
    lines = [
        f"# {src_code} -> {tgt_code}: a fine-tuned {name} model",
        "",
        f"Fine-tuned with transformer_plugin (fairseq) from an {name} parent, exported from `{model_path}`; its",
        f"log-probabilities are within {difference:.1e} of the checkpoint's.",
        "",
        "```python",
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
        'model = AutoModelForSeq2SeqLM.from_pretrained("THIS_DIR")',
        f'tokenizer = AutoTokenizer.from_pretrained("THIS_DIR", src_lang="{tokenizer_lang(family, src_code)}")',
        'batch = tokenizer(["..."], return_tensors="pt")',
        "out = model.generate(**batch)  # generation_config.json forces the target's code first",
        "print(tokenizer.batch_decode(out, skip_special_tokens=True))",
        "```",
    ]
    if scores:
        lines += ["", "Scores (vaswani-evaluate):", ""] + [f"- {s}" for s in scores]
    return "\n".join(lines) + "\n"
