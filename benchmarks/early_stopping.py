"""What early stopping should count, and what a run stopped early should average, measured on one finished run.

A run of the parallel-text recipe with ``PATIENCE=0`` (no early stopping), ``EVAL_BLEU=1`` (the dev set's BLEU at
every validation beside its loss) and every interval's checkpoint kept (``AVERAGE_LAST`` at least its
validations) holds everything a rule could have seen. For each rule (patience P on the validation loss, as
fairseq's ``--patience`` counts it, or on the dev BLEU, or none) this finds the validation at which fairseq would
have stopped, then scores on the test set, as the recipe scores (beam 4, lenpen 0.6, sacreBLEU and chrF), what
the run would have handed over: the average of the last ``--average`` checkpoints saved by then (the recipe's
stage 5), the best checkpoint by the rule's metric, and the average of ``--average`` checkpoints ending at it.

    python -m benchmarks.early_stopping --work runs/early/run --tgt ru --patience 3 5 10 \\
        --out runs/early/early_stopping.md
"""

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import decode_and_score  # noqa: E402
from transformer_plugin_cli.fairseq_output import log_records  # noqa: E402

Validation = Dict[str, float]  # update, loss, bleu


def validations(train_log: str) -> List[Validation]:
    """Each validation of a fairseq log (``--log-format json``): its update, loss and BLEU (None without
    ``--eval-bleu``), in order."""
    with open(train_log, encoding="utf-8", errors="replace") as f:
        records = log_records(f.read(), "valid")
    return [
        {
            "update": int(r["valid_num_updates"]),
            "loss": float(r["valid_loss"]),
            "bleu": float(r["valid_bleu"]) if "valid_bleu" in r else None,
        }
        for r in records
    ]


def stop_index(found: Sequence[Validation], metric: str, patience: int) -> int:
    """The index of the validation after which fairseq's ``--patience`` would stop, counting ``metric`` (loss:
    lower is better; bleu: higher): the first at which ``patience`` validations in a row have not improved on the
    best before them. The last validation where none would stop, or ``patience`` is 0."""
    best, runs = None, 0
    for i, v in enumerate(found):
        value = v[metric] if metric == "bleu" else -v[metric]
        if best is None or value > best:
            best, runs = value, 0
        else:
            runs += 1
            if patience and runs >= patience:
                return i
    return len(found) - 1


def best_index(found: Sequence[Validation], metric: str, upto: int) -> int:
    """The validation of the best ``metric`` among the first ``upto + 1`` (the latest of equals, as fairseq
    keeps checkpoint_best.pt)."""
    values = [(v[metric] if metric == "bleu" else -v[metric]) for v in found[: upto + 1]]
    return len(values) - 1 - values[::-1].index(max(values))


def handed_over(found: Sequence[Validation], metric: str, patience: int, average: int) -> Dict[str, Tuple[int, ...]]:
    """What a run stopped by the rule would hand over, as the updates of the checkpoints to average:
    the last ``average`` saved by the stop, the best by ``metric``, and ``average`` ending at the best."""
    stop = stop_index(found, metric, patience)
    best = best_index(found, metric, stop)
    updates = [v["update"] for v in found]
    return {
        "last": tuple(updates[max(0, stop - average + 1) : stop + 1]),
        "best": (updates[best],),
        "around best": tuple(updates[max(0, best - average + 1) : best + 1]),
    }


def checkpoint(work: str, update: int) -> str:
    folder = os.path.join(work, "checkpoints")
    names = [n for n in os.listdir(folder) if n.startswith("checkpoint_") and n.endswith(f"_{update}.pt")]
    if len(names) != 1:
        raise FileNotFoundError(f"{folder}: no checkpoint of update {update} (keep every one: AVERAGE_LAST)")
    return os.path.join(folder, names[0])


def score(work: str, updates: Tuple[int, ...], tgt: str, out: str) -> Dict[str, float]:
    """Test sacreBLEU and chrF of the average of these updates' checkpoints, as the recipe's stages 5-7 score."""
    name = "avg_" + "_".join(map(str, updates))
    scores_file = os.path.join(out, name + ".json")
    if os.path.exists(scores_file):
        with open(scores_file) as f:
            return json.load(f)
    model = os.path.join(out, name + ".pt")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_plugin_cli.tools.average_checkpoints",
            "--inputs",
            *[checkpoint(work, u) for u in updates],
            "--output",
            model,
        ],
        check=True,
        capture_output=True,
    )
    found = decode_and_score(
        os.path.join(work, "data-bin"), model, os.path.join(work, "data", f"test.{tgt}"), os.path.join(out, name), name
    )
    os.remove(model)
    return found


def measure(work: str, tgt: str, patiences: Sequence[int], average: int, out: str) -> str:
    found = validations(os.path.join(work, "train.log"))
    if not found or found[0]["bleu"] is None:
        raise SystemExit(f"{work}/train.log: no validations with BLEU (run the recipe with EVAL_BLEU=1 and PATIENCE=0)")
    os.makedirs(out, exist_ok=True)
    lines = ["| rule | stops after update | hands over | test BLEU | chrF |", "|---|---|---|---|---|"]
    rules = [("none", "loss", 0)] + [(f"patience {p} on valid {m}", m, p) for m in ("loss", "bleu") for p in patiences]
    for name, metric, patience in rules:
        stop = found[stop_index(found, metric, patience)]["update"]
        for what, updates in handed_over(found, metric, patience, average).items():
            s = score(work, updates, tgt, out)
            said = f"{len(updates)} ending at {updates[-1]}" if len(updates) > 1 else f"update {updates[0]}"
            lines.append(f"| {name} | {stop} | {what} by {metric}: {said} | {s['sacrebleu']:.2f} | {s['chrf']:.2f} |")
            print(lines[-1], flush=True)
    curve = ["| update | valid loss | valid BLEU |", "|---|---|---|"] + [
        f"| {v['update']} | {v['loss']:.3f} | {v['bleu']:.2f} |" for v in found
    ]
    return "\n".join(lines + [""] + curve)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, help="the recipe's WORK, run with PATIENCE=0 EVAL_BLEU=1")
    p.add_argument("--tgt", required=True)
    p.add_argument("--patience", type=int, nargs="+", default=[3, 5, 10])
    p.add_argument("--average", type=int, default=5, help="checkpoints averaged (the recipe's AVERAGE_LAST)")
    p.add_argument("--out", required=True, help="a folder: the table (early_stopping.md) and each model's scores")
    a = p.parse_args(argv)
    text = measure(a.work, a.tgt, a.patience, a.average, a.out)
    with open(os.path.join(a.out, "early_stopping.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
