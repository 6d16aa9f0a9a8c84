"""The model card (README.md) of an exported MarianMT directory: what the model is, how it was trained, what it
scored (``vaswani-evaluate --json`` files, read by :func:`read_scores`), and how to run it as fairseq-generate does."""

import datetime
import json
from typing import Dict, List, Optional, Sequence, Tuple

from .marian import ExportError


def model_card(
    cfg,
    task,
    state,
    parameters: int,
    scores: List[Tuple[str, Dict]],
    command: str,
    dataset: Optional[str],
    directory: str,
    difference: float,
    beam: int,
    lenpen: float,
    max_len_b: int,
    max_new_tokens: int,
    target_token: Optional[str] = None,
) -> str:
    """README.md: what the model is, how it was trained, and what it scored."""
    from transformer_plugin import __version__

    m, src, tgt = cfg.model, task.cfg.source_lang, task.cfg.target_lang
    history = (state.get("optimizer_history") or [{}])[-1]
    opt = cfg.optimization
    if m.share_all_embeddings:
        embeddings = "shared: source, target, output (Section 3.4)"
    else:
        embeddings = "target and output shared" if m.share_decoder_input_output_embed else "separate"
    activation = (
        "swish (as published MarianMT models have it)" if getattr(m, "activation_fn", "relu") == "swish" else "ReLU"
    )
    prefix = target_token + " " if target_token else ""  # a multilingual parent's >>xx<<
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: translation",
        *([f"language:\n- {src}\n- {tgt}"] if src and tgt and len(src) == len(tgt) == 2 else []),  # ISO 639-1
        "tags:\n- marian\n- fairseq\n- attention-is-all-you-need",
        "---",
        "",
        f"# {m._name} {src}-{tgt}",
        "",
        '"Attention Is All You Need" (Vaswani et al., 2017), trained with fairseq and the transformer_plugin'
        f" {__version__} `--user-dir` plugin, exported to MarianMT by `vaswani-export-hf`.",
        "",
        "## Architecture",
        "",
        "| N | d_model | d_ff | h | d_k = d_v | P_drop | parameters | vocabulary | embeddings |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {m.encoder_layers} / {m.decoder_layers} | {m.d_model} | {m.d_ff} | {m.attention_heads} |"
        f" {m.d_k or m.d_model // m.attention_heads} |"
        f" {m.dropout} | {parameters / 1e6:.1f}M | {len(task.source_dictionary)}"
        f"{'' if m.share_all_embeddings else ' / ' + str(len(task.target_dictionary))} |"
        f" {embeddings} |",
        "",
        "Post-norm layers, sinusoidal positions (Section 3.5), "
        f"{activation}, "
        "embeddings scaled by sqrt(d_model)"
        f"{'; a learned output bias (final_logits_bias)' if getattr(m, 'output_bias', False) else ''}"
        f"{'; decoding starts from <pad>' if getattr(m, 'decoder_start', 'eos') == 'pad' else ''}. MarianMT holds"
        " the paper's sinusoids in sine-then-cosine order; the weights are permuted to match, which gives the same"
        " function (transformer_plugin_cli/serving/marian.py says why). Checked at export: the log-probabilities of "
        "this"
        f" model and of the fairseq checkpoint agreed within {difference:.1e} on a probe batch.",
        "",
        "## Training",
        "",
        f"- updates: {history.get('num_updates', 'not recorded')}; criterion `{cfg.criterion._name}`"
        f"{f' (label smoothing {cfg.criterion.label_smoothing})' if hasattr(cfg.criterion, 'label_smoothing') else ''};"
        f" learning-rate schedule `{cfg.lr_scheduler._name}`"
        f"{f' (warmup {cfg.lr_scheduler.warmup_updates})' if hasattr(cfg.lr_scheduler, 'warmup_updates') else ''};"
        f" optimizer `{cfg.optimizer._name}`",
        f"- batch: --max-tokens {cfg.dataset.max_tokens} x {cfg.distributed_training.distributed_world_size} processes"
        f" x --update-freq {opt.update_freq[0] if opt.update_freq else 1}",
        f"- data: {dataset or 'not described (vaswani-export-hf --dataset)'}; binarized in `{cfg.task.data}`",
        "",
        "## Evaluation",
        "",
    ]
    if scores:
        lines += ["| test set | sacreBLEU | chrF | tokenized BLEU | sentences |", "|---|---|---|---|---|"]
        for label, s in scores:
            tok = s.get("tokenized_bleu_compound_split", s.get("tokenized_bleu", ""))
            lines.append(
                f"| {label} | {s.get('sacrebleu', '')} | {s.get('chrf', '')} | {tok} | {s.get('sentences', '')} |"
            )
        signatures = {s.get("sacrebleu_signature") for _, s in scores} | {s.get("chrf_signature") for _, s in scores}
        lines += ["", "Scored with fairseq-generate's output by `vaswani-evaluate`; signatures:", ""]
        lines += [f"- `{sig}`" for sig in sorted(x for x in signatures if x)]
    else:
        lines.append("No scores were given to the exporter (`--scores LABEL=FILE`, from `vaswani-evaluate --json`).")
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "from transformers import MarianMTModel, MarianTokenizer",
        f"tokenizer = MarianTokenizer.from_pretrained({directory!r})",
        f"model = MarianMTModel.from_pretrained({directory!r})",
        f'batch = tokenizer(["{prefix}A sentence to translate."], return_tensors="pt", padding=True)',
        f'output = model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + {max_len_b + 1})',
        "print(tokenizer.batch_decode(output, skip_special_tokens=True))",
        "```",
        "",
        f"`generate()` runs beam search (beam {beam}, length penalty {lenpen}) as fairseq-generate does, and"
        f" `max_new_tokens` bounds the output as fairseq does: the batch's longest input + {max_len_b} tokens,"
        " then `</s>`. A generation config cannot follow the input; without the argument the output stops after"
        f" {max_new_tokens} new tokens (that bound for the longest source in the data the model was exported"
        " with), and a hypothesis that never ends makes its whole batch run that long. `skip_special_tokens=True`"
        " drops `<unk>` where fairseq prints it.",
        "",
        *(
            [
                f"Put `{target_token}` before every source sentence, as above: the model was fine-tuned from a"
                " multilingual parent with that token before each source sentence, where it chooses the target"
                " language; `MarianTokenizer` takes it as one id, as training did.",
                "",
            ]
            if target_token
            else []
        ),
        f"Exported on {datetime.date.today().isoformat()} with `{command}`.",
        "",
    ]
    return "\n".join(lines)


def read_scores(specs: Sequence[str]) -> List[Tuple[str, Dict]]:
    found = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise ExportError(f"--scores {spec!r}: give LABEL=FILE")
        try:
            with open(path, encoding="utf-8") as f:
                scores = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ExportError(f"--scores {path}: {e}") from e
        if not isinstance(scores, dict) or "sacrebleu" not in scores:
            raise ExportError(f"--scores {path}: not a vaswani-evaluate --json file (no 'sacrebleu')")
        found.append((label, scores))
    return found
