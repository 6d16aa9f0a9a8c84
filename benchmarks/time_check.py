"""TIME against real training: the speed probe's seconds an update beside fairseq-train's own, on this machine.

``TIME=`` turns a duration into updates at the speed that ``vaswani-speed-probe`` measures (docs/benchmarks.md,
"Time"). This runs the parallel-text recipe as a user would, with a candidate's settings and ``--updates`` updates
(``MAX_UPDATE``, one validation and checkpoint at the end, no early stopping), on the GPUs or CPU workers given,
and puts beside each other:

- the probe's seconds an update, for the training as the recipe lays it out (read back from what the recipe's own
  probe kept: the same figure TIME would use);
- fairseq-train's seconds an update from its log, the first logged interval left out (start-up, warm-up), and its
  target tokens an update (fairseq's ``wpb``), against the probe's;
- the recipe's predicted training time (the probe's figure, the validations and start-up: what TIME counts) against
  fairseq's clock at its last update.

The data stages run once (``DATA_ONLY=1``), and each candidate trains in a copy of that WORK (the stages read
their stamps, not the folder's name, and are not redone).

    python -m benchmarks.time_check --corpus de_77k=runs/budgets/data/de_77k/train:en:de --gpus 1 --precision bf16 \\
        --updates 300 --work /tmp/time-check --out time_check.md
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.budgets import Corpus, candidates, parse_corpus  # noqa: E402
from benchmarks.common import print_table, recipe_env, start_recipe  # noqa: E402
from transformer_plugin_cli.fairseq_output import log_records  # noqa: E402
from recipes.planner.speed.probing import layout_probe  # noqa: E402
from recipes.planner.speed.probe_cache import seconds_per_update  # noqa: E402


def recipe(corpus: Corpus, settings: Dict[str, str], work: str, log: str, extra: Dict[str, str]) -> None:
    """The parallel-text recipe with ``settings`` and ``extra`` (budget, layout) in ``work``, its output in ``log``."""
    status = start_recipe(recipe_env(corpus.files, settings, extra, {"WORK": work}), log, f"{settings} {extra}").wait()
    if status != 0:
        raise RuntimeError(f"the recipe failed ({status}) in {work}: see {log}")


def fairseq_speed(train_log: str) -> Dict[str, Optional[float]]:
    """fairseq-train's seconds an update over its logged intervals after the first, its mean target tokens an
    update (``wpb``) over them, and its clock at the last logged update."""
    with open(train_log, encoding="utf-8", errors="replace") as f:
        records = [r for r in log_records(f.read(), "train_inner") if "wall" in r and "num_updates" in r]
    if len(records) < 3:
        raise RuntimeError(f"{train_log}: {len(records)} logged intervals, at least 3 needed (more --updates)")
    first, last = records[0], records[-1]
    updates = int(last["num_updates"]) - int(first["num_updates"])
    return {
        "seconds": (float(last["wall"]) - float(first["wall"])) / updates,
        "wpb": statistics.mean(float(r["wpb"]) for r in records[1:]),
        "clock": float(last["wall"]),
        "updates": int(last["num_updates"]),
    }


def _timed_run(
    corpus: Corpus,
    name: str,
    s: Dict[str, str],
    data: str,
    work: str,
    updates: int,
    layout: Dict[str, str],
    gpus: int,
    cpu_workers: int,
    precision: str,
) -> Dict[str, object]:
    """One candidate trained by the recipe on a copy of the data stages' ``data``: what its probe said an update would
    take against what fairseq-train took, and its scores."""
    run = os.path.join(work, name.replace(" ", "_").replace("=", ""))
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(data, run, symlinks=True)
    log = run + ".log"
    t0 = time.time()
    recipe(
        corpus,
        s,
        run,
        log,
        {
            **layout,
            "MAX_UPDATE": str(updates),
            "PATIENCE": "0",
            "SAVE_INTERVAL_UPDATES": str(updates),
            "AVERAGE_LAST": "1",
        },
    )
    whole = time.time() - t0
    probe = layout_probe(
        s["ARCH"],
        s["MODEL_FLAGS"],
        int(s["VOCAB_SIZE"]),
        int(s["TOKENS_PER_UPDATE"]),
        gpus,
        cpu_workers,
        precision=precision,
    )
    kept = seconds_per_update(probe)  # read back: the recipe's probe measured it
    with open(log, encoding="utf-8", errors="replace") as f:
        said = [line.strip() for line in f if line.startswith("time: training")]
    ours = fairseq_speed(os.path.join(run, "train.log"))
    with open(os.path.join(run, "results", "scores.test.json")) as f:
        scores = json.load(f)
    print(
        f"{name}: probe {kept['seconds']:.4f} s an update, fairseq {ours['seconds']:.4f} "
        f"({ours['wpb']:.0f} target tokens an update of {probe.tokens_per_update}); {said[-1] if said else ''}",
        flush=True,
    )
    return {
        "candidate": name,
        "settings": s,
        "probe_seconds": float(kept["seconds"]),
        "probe_cached": bool(kept.get("cached")),
        "probe_tokens": probe.tokens_per_update,
        "fairseq": ours,
        "recipe_said": said[-1] if said else "",
        "recipe_seconds": whole,
        "bleu": scores["sacrebleu"],
        "chrf": scores["chrf"],
    }


def check(
    corpus: Corpus,
    names: Sequence[str],
    updates: int,
    gpus: int,
    cpu_workers: int,
    precision: str,
    work: str,
    data_only: bool = False,
) -> List[Dict[str, object]]:
    everyone = candidates(corpus)
    unknown = [n for n in names if n not in everyone]
    if unknown:
        raise SystemExit(f"--candidates: {', '.join(unknown)} unknown; known: {', '.join(everyone)}")
    layout = {"GPUS": str(gpus), "CPU_WORKERS": str(cpu_workers), "PRECISION": precision}
    vocabularies = {everyone[n]["VOCAB_SIZE"] for n in names}
    if len(vocabularies) != 1:
        raise SystemExit(f"--candidates: one data stage for all needs one vocabulary, not {sorted(vocabularies)}")
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "data")
    t0 = time.time()
    recipe(
        corpus,
        everyone[names[0]],
        data,
        os.path.join(work, "data.log"),
        {**layout, "DATA_ONLY": "1", "MAX_UPDATE": str(updates)},
    )
    print(f"data stages: {time.time() - t0:.0f} s", flush=True)
    rows = []
    if data_only:
        return rows
    for name in names:
        rows.append(_timed_run(corpus, name, everyone[name], data, work, updates, layout, gpus, cpu_workers, precision))
    return rows


def table(rows: Sequence[Dict[str, object]]) -> str:
    out = [
        [
            "candidate",
            "model",
            "probe s/update",
            "fairseq s/update",
            "fairseq / probe",
            "fairseq tokens/update",
            "fairseq clock at last update",
            "the recipe said",
            "BLEU",
            "chrF",
        ]
    ]
    for r in rows:
        s, f = r["settings"], r["fairseq"]
        out.append(
            [
                r["candidate"],
                f"{s['ARCH']} {s['MODEL_FLAGS']} P_drop {s['DROPOUT']}, BPE {s['VOCAB_SIZE']}",
                f"{r['probe_seconds']:.4f}",
                f"{f['seconds']:.4f}",
                f"{f['seconds'] / r['probe_seconds']:.2f}",
                f"{f['wpb']:,.0f} of {r['probe_tokens']:,}",
                f"{f['clock']:.1f} s ({f['updates']} updates)",
                r["recipe_said"].removeprefix("time: training "),
                f"{r['bleu']:.2f}",
                f"{r['chrf']:.2f}",
            ]
        )
    lines = ["| " + " | ".join(row) + " |" for row in out]
    return "\n".join([lines[0], "|" + "---|" * len(out[0]), *lines[1:]])


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=parse_corpus, required=True, help="NAME=PREFIX:SRC:TGT (valid and test beside it)")
    p.add_argument("--candidates", nargs="+", default=["short", "class"], help="benchmarks.budgets' candidates")
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--cpu-workers", type=int, default=2)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16", "amp"])
    p.add_argument("--work", required=True)
    p.add_argument("--out", help="the table, as markdown")
    p.add_argument("--data-only", action="store_true", help="the data stages alone (a later run skips them)")
    a = p.parse_args(argv)
    rows = check(a.corpus, a.candidates, a.updates, a.gpus, a.cpu_workers, a.precision, a.work, a.data_only)
    if a.data_only:
        return 0
    with open(os.path.join(a.work, "time_check.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print_table(table(rows), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
