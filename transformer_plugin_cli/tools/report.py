"""A run report: learning curves, the learning rate (Eq. 3), attention maps and scores, in markdown.

Reads fairseq-train's log (``--log-format json``, as the recipes write it), the score files of
vaswani-evaluate and a checkpoint, and writes into ``--out-dir``:

- ``loss.png``: training loss (per logged interval) and validation loss against updates;
- ``lr.png``: the learning rate fairseq used against updates, with Eq. (3) drawn over it;
- ``attention_encoder.png`` / ``attention_decoder.png``: for one test sentence, the attention
  weights of every head of the last encoder layer's self-attention (the paper's Figures 3-5) and of
  the last decoder layer's encoder-decoder attention;
- ``report.md``, which links them.

    vaswani-report --train-log train.log --checkpoint avg.pt --data data-bin \
        --scores last=scores_last.json --scores average=scores_avg.json --out-dir report
"""

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from transformer_plugin.lr_scheduler.inverse_sqrt import effective_multiplier, paper_lrate

from ..console import console_script
from ..fairseq_output import EARLY_STOP, log_records, numbers, process_walls, training_seconds
from ..files import atomic_path, duration, write_text
from .evaluate import bootstrap_said


def save_figure(fig, path: str) -> None:
    """``fig`` as a PNG into ``path``, atomically; the figure is closed."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def read_train_log(path: str) -> Dict[str, List[Dict[str, float]]]:
    """The JSON records of a fairseq-train log, by kind ("train_inner", "valid", "train"), and "stopped": the
    last validation, where fairseq's early stopping (--patience) ended the run after it, else nothing."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    records = {
        kind: [numbers(record) for record in log_records(text, kind)] for kind in ("train_inner", "valid", "train")
    }
    records["stopped"] = records["valid"][-1:] if EARLY_STOP in text else []
    if not records["train_inner"]:
        raise ValueError(
            f"{path}: no train_inner records (fairseq-train writes one every --log-interval updates"
            " with --log-format json; fewer updates than --log-interval write none)"
        )
    return records


def plot_losses(records, path: str) -> None:
    train = records["train_inner"]
    valid = [r for r in records["valid"] if "valid_num_updates" in r]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["num_updates"] for r in train], [r["loss"] for r in train], label="train loss (label-smoothed)")
    ax.plot([r["num_updates"] for r in train], [r["nll_loss"] for r in train], label="train nll", alpha=0.6)
    if valid:
        ax.plot([r["valid_num_updates"] for r in valid], [r["valid_loss"] for r in valid], "o-", label="valid loss")
        ax.plot([r["valid_num_updates"] for r in valid], [r["valid_nll_loss"] for r in valid], "s--", label="valid nll")
    ax.set_xlabel("updates")
    ax.set_ylabel("bits per target token")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def schedule_of(checkpoint: str) -> Dict[str, float]:
    """The schedule of the run that wrote ``checkpoint``: Eq. (3)'s d_model, warmup_steps and multiplier (the plugin's
    vaswani_inverse_sqrt), or fine-tuning's peak and ramp (fairseq's inverse_sqrt: a linear ramp, then the inverse
    square root; recipes/planner/finetuning.py)."""
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    cfg = load_checked(checkpoint, mmap=True).get("cfg") or {}
    schedule = cfg.get("lr_scheduler") or {}
    if schedule.get("_name") == "inverse_sqrt":
        lr = (cfg.get("optimization") or {}).get("lr") or [0.0]
        start = schedule.get("warmup_init_lr", -1)
        return {
            "kind": "inverse_sqrt",
            "peak": float(lr[0]),
            "warmup": int(schedule["warmup_updates"]),
            "start": 0.0 if start is None or start < 0 else float(start),
        }
    if schedule.get("_name") != "vaswani_inverse_sqrt" or not schedule.get("d_model"):
        raise ValueError(
            f"{checkpoint}: not trained with --lr-scheduler vaswani_inverse_sqrt or inverse_sqrt; give --d-model and "
            "--warmup-updates"
        )
    multiplier = effective_multiplier(
        schedule["warmup_updates"], schedule.get("lr_multiplier", 1.0), schedule.get("peak_warmup_updates")
    )
    return {"d_model": schedule["d_model"], "warmup": schedule["warmup_updates"], "multiplier": multiplier}


def scheduled_rate(schedule: Dict[str, float], step: int) -> float:
    """The rate a schedule (:func:`schedule_of`) sets for update ``step``."""
    if schedule.get("kind") == "inverse_sqrt":  # fairseq's inverse_sqrt, as it computes it
        warmup, peak = schedule["warmup"], schedule["peak"]
        if step < warmup:
            return schedule["start"] + step * (peak - schedule["start"]) / warmup
        return peak * warmup**0.5 * step**-0.5
    return paper_lrate(step, schedule["d_model"], schedule["warmup"], schedule.get("multiplier", 1.0))


def plot_lr(records, path: str, schedule: Dict[str, float]) -> None:
    train = records["train_inner"]
    steps = [int(r["num_updates"]) for r in train]
    fig, ax = plt.subplots(figsize=(6, 4))
    grid = range(1, max(steps) + 2)
    fine_tuning = schedule.get("kind") == "inverse_sqrt"
    label = "a ramp, then 1 / sqrt(step) (fine-tuning)" if fine_tuning else "Eq. (3)"
    ax.plot(list(grid), [scheduled_rate(schedule, s) for s in grid], label=label, color="gray")
    # the rate logged after update n: Eq. (3)'s for update n + 1 (the plugin's scheduler), inverse_sqrt's for n
    shift = 0 if fine_tuning else 1
    ax.plot([s + shift for s in steps], [r["lr"] for r in train], ".", label="fairseq lr (logged)")
    ax.axvline(schedule["warmup"], linestyle=":", color="gray")
    ax.set_xlabel("update (step_num)")
    ax.set_ylabel("learning rate")
    if fine_tuning:
        ax.set_title(f"peak {schedule['peak']:g} after {schedule['warmup']} updates")
    else:
        ax.set_title(f"d_model={schedule['d_model']}, warmup_steps={schedule['warmup']}")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def plot_heads(weights: torch.Tensor, rows: List[str], cols: List[str], title: str, path: str) -> None:
    """weights (h, len(rows), len(cols)): one panel per head."""
    h = weights.size(0)
    ncols = min(2, h)
    nrows = (h + ncols - 1) // ncols
    size = max(2.5, 0.28 * max(len(rows), len(cols)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        ax.imshow(weights[i].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"head {i + 1}", fontsize=9)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels(cols, rotation=90, fontsize=7)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows, fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)


def attention_maps(checkpoint: str, data: str, out_dir: str, index: Optional[int] = None) -> Tuple[str, str]:
    """Attention of every head of the last encoder and decoder layer, for test sentence ``index``
    (default: the first test sentence of 10 to 16 source tokens, small enough to read)."""
    from fairseq import checkpoint_utils

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
    model = models[0].eval()
    task.load_dataset("test")
    test = task.dataset("test")
    if index is None:
        index = next((i for i in range(len(test)) if 10 <= test.src_sizes[i] <= 16), 0)
    example = test[index]
    src, tgt = example["source"].unsqueeze(0), example["target"].unsqueeze(0)
    prev = torch.cat([tgt.new_tensor([[task.target_dictionary.eos()]]), tgt[:, :-1]], dim=1)
    with torch.no_grad():
        encoder_out = model.encoder(src, torch.tensor([src.size(1)]), attention_layer=-1)
        _, extra = model.decoder(prev, encoder_out, alignment_layer=-1, need_head_weights=True)
    src_words = [task.source_dictionary[i] for i in src[0]]
    tgt_words = [task.target_dictionary[i] for i in tgt[0]]
    encoder_png = os.path.join(out_dir, "attention_encoder.png")
    decoder_png = os.path.join(out_dir, "attention_decoder.png")
    plot_heads(
        encoder_out["self_attn"][0][0],
        src_words,
        src_words,
        f"encoder self-attention, layer {len(model.encoder.layers)}, test sentence {index}",
        encoder_png,
    )
    plot_heads(
        extra["attn"][0][0],
        tgt_words,
        src_words,
        f"encoder-decoder attention, decoder layer {len(model.decoder.layers)} (rows: target, columns: source)",
        decoder_png,
    )
    return encoder_png, decoder_png


def write_report(
    out_dir: str,
    records,
    scores: Dict[str, Dict],
    schedule: Dict[str, float],
    checkpoint: Optional[str],
    data: Optional[str],
    title: str,
    notes: List[str],
) -> str:
    os.makedirs(out_dir, exist_ok=True)
    plot_losses(records, os.path.join(out_dir, "loss.png"))
    plot_lr(records, os.path.join(out_dir, "lr.png"), schedule)
    figures = ["loss.png", "lr.png"]
    if checkpoint and data:
        figures += [os.path.basename(p) for p in attention_maps(checkpoint, data, out_dir)]
    valid = [r for r in records["valid"] if "valid_num_updates" in r]
    last = records["train_inner"][-1]
    lines = [f"# {title}", ""]
    lines += [f"- {note}" for note in notes]
    lines += [
        f"- updates: {int(last['num_updates'])}; last logged train loss {last['loss']:.3f},"
        f" nll {last['nll_loss']:.3f} bits/token",
    ]
    walls = [r["wall"] for r in records["train_inner"] if "wall" in r]  # fairseq's 'wall' meter, each logged interval
    if walls:
        processes = len(process_walls(walls))  # a resumed run's clock starts again
        lines.append(
            f"- training took {duration(training_seconds(walls))} (fairseq's wall clock at update "
            f"{int(last['num_updates'])}"
            f"{f', added over its {processes} processes: the run was resumed' if processes > 1 else ''})"
        )
    for stop in records.get("stopped", []):
        lines.append(
            f"- stopped early at update {int(stop['valid_num_updates'])}: no better validation in the last "
            "--patience validations (fairseq-train's: the dev BLEU with --eval-bleu, else the loss)"
        )
    if valid:
        lines.append(
            f"- last validation: loss {valid[-1]['valid_loss']:.3f}, nll {valid[-1]['valid_nll_loss']:.3f},"
            f" ppl {2 ** valid[-1]['valid_nll_loss']:.2f} (per subword token)"
        )
    lines += ["", "| model | sacreBLEU | chrF | sentences |", "|---|---|---|---|"]
    for name, s in scores.items():
        lines.append(f"| {name} | {s['sacrebleu']:.2f} | {s['chrf']:.2f} | {s['sentences']} |")
    for name, s in scores.items():  # a paired bootstrap against another system (vaswani-evaluate --baseline)
        if "against" in s:
            lines += ["", f"{name}, {bootstrap_said(s['against'], s['against']['label'])}"]
    if scores:
        first = next(iter(scores.values()))
        lines += [
            "",
            f"sacreBLEU signature: `{first['sacrebleu_signature']}`",
            f"chrF signature: `{first['chrf_signature']}`",
        ]
    lines += [""] + [f"![{name}]({name})" for name in figures]
    path = os.path.join(out_dir, "report.md")
    write_text(path, "\n".join(lines) + "\n")
    return path


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write a run report with learning curves and attention maps.")
    parser.add_argument("--train-log", required=True, help="fairseq-train output written with --log-format json")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--scores", action="append", default=[], help="NAME=scores.json (vaswani-evaluate)")
    parser.add_argument("--checkpoint", help="checkpoint for the attention maps")
    parser.add_argument("--data", help="fairseq data-bin directory (with a test split) for the attention maps")
    parser.add_argument("--d-model", type=int, help="d_model of Eq. (3) (default: the checkpoint's)")
    parser.add_argument("--warmup-updates", type=int, help="warmup_steps of Eq. (3) (default: the checkpoint's)")
    parser.add_argument("--title", default="Run report")
    parser.add_argument("--note", action="append", default=[], help="a line for the report's header")
    parser.add_argument(
        "--unknown",
        action="append",
        default=[],
        metavar="JSON",
        help="vaswani-sentencepiece encode's --unknown-report: the pieces a parent's dictionary lacks",
    )
    args = parser.parse_args(argv)
    for path in args.unknown:  # INIT=: how much of the text the parent's vocabulary does not hold
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
        args.note += [
            f"{name}: {r['unknown']:,} of {r['pieces']:,} pieces ({r['share']:.2%}) not in the parent's dictionary "
            f"({os.path.basename(found['dictionary'])}): <unk>"
            for name, r in found["inputs"].items()
            if name.startswith("train.")
        ]
    scores = {}
    for item in args.scores:
        name, _, path = item.partition("=")
        with open(path, encoding="utf-8") as f:
            scores[name] = json.load(f)
    try:
        records = read_train_log(args.train_log)
        if args.d_model and args.warmup_updates:
            schedule = {"d_model": args.d_model, "warmup": args.warmup_updates, "multiplier": 1.0}
        elif args.checkpoint:
            schedule = schedule_of(args.checkpoint)
            schedule.update({k: v for k, v in (("d_model", args.d_model), ("warmup", args.warmup_updates)) if v})
        else:
            raise ValueError("give --checkpoint, or --d-model and --warmup-updates, for the curve of Eq. (3)")
    except ValueError as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 1
    path = write_report(
        args.out_dir,
        records,
        scores,
        schedule,
        args.checkpoint,
        args.data,
        args.title,
        args.note,
    )
    print(f"report written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
