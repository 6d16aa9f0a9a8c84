"""Fine-tuning a parent against training from nothing in the same time, on real text of another domain, offline.

The parent is a model of this project exported to MarianMT (``EXPORT=hf``), as a published OPUS-MT model would be
downloaded: published weights cannot be fetched on these machines. At each budget, the parallel-text recipe runs
twice side by side, one core each: ``INIT=`` the parent, and from nothing (the budget rule's own pick for the
corpus), both with ``TIME=`` the budget. Scored on the child's test set (the recipe's stages 6-7): the parent alone
(the recipe's stage 3q), fine-tuned and from nothing; and on the parent's own test set, the parent before and after
fine-tuning (forgetting): its test text in the parent's pieces and dictionaries, decoded as the recipe decodes.

    python -m benchmarks.finetune run --parent runs/finetune/parent --child runs/finetune/data/games/train:en:de \\
        --budgets 10m 30m --cores 0 1 --work runs/finetune/runs --record benchmarks/records/finetune/games.json
    python -m benchmarks.finetune table --record benchmarks/records/finetune/games.json --figure docs/finetune.png

``--parent`` is the parent's recipe WORK: its ``hf`` export (the parent) and its ``data/test.*`` (its test set).
A run whose scores exist is read back, not run again.
"""

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.budget_record import read_run  # noqa: E402
from benchmarks.budgets import Corpus  # noqa: E402
from benchmarks.common import decode_and_score, print_table, recipe_env, start_recipe  # noqa: E402
from transformer_plugin_cli.fairseq_output import log_records  # noqa: E402

KINDS = ("fine-tuned", "from nothing")


def child_env(child: Corpus, work: str, budget: str, init: Optional[str], extra: Dict[str, str]) -> Dict[str, str]:
    """A run's environment: the child corpus and ``budget`` as its TIME, one CPU worker, ``init`` as its INIT."""
    env = recipe_env(
        child.files, {"WORK": work, "TIME": budget, "CPU_WORKERS": "1", "GPUS": "0"}, extra, unset=("MAX_UPDATE",)
    )
    if init:
        env["INIT"] = init
    return env


def on_parent_test(parent_work: str, work: str, model: str, src: str, tgt: str) -> Dict[str, float]:
    """sacreBLEU and chrF of ``model`` (fine-tuned in ``work``) on the parent's test set: its text in the parent's
    pieces (work's sentencepiece models) and dictionaries (work/parent), decoded with the recipe's settings."""
    out = os.path.join(work, "parent_test")
    scores = os.path.join(out, os.path.basename(model) + ".json")
    if os.path.exists(scores):
        with open(scores) as f:
            return json.load(f)
    py, text = sys.executable, os.path.join(parent_work, "data")
    os.makedirs(out, exist_ok=True)
    for lang, spm in ((src, "source.spm"), (tgt, "target.spm")):
        subprocess.run(
            [
                py,
                "-m",
                "preprocess.sentencepiece_vocab",
                "encode",
                "--model",
                os.path.join(parent_work, "hf", spm),
                "--inputs",
                os.path.join(text, f"test.{lang}"),
                "--outputs",
                os.path.join(out, f"test.sp.{lang}"),
                "--threads",
                "1",
            ],
            check=True,
            capture_output=True,
            cwd=REPO,
        )
    bindir = os.path.join(out, "bin")
    if not os.path.exists(os.path.join(bindir, f"test.{src}-{tgt}.{src}.bin")):
        subprocess.run(
            [
                os.path.join(os.path.dirname(py), "fairseq-preprocess"),
                "--source-lang",
                src,
                "--target-lang",
                tgt,
                "--testpref",
                os.path.join(out, "test.sp"),
                "--srcdict",
                os.path.join(work, "parent", f"dict.{src}.txt"),
                "--tgtdict",
                os.path.join(work, "parent", f"dict.{tgt}.txt"),
                "--destdir",
                bindir,
                "--workers",
                "1",
            ],
            check=True,
            capture_output=True,
        )
    return decode_and_score(
        bindir,
        model,
        os.path.join(text, f"test.{tgt}"),
        os.path.join(out, os.path.basename(model)),
        f"{model} on the parent's test set",
    )


def handed_over(work: str) -> str:
    """The model a recipe's run in WORK scored and exported: its best checkpoint by dev BLEU where its plan says so
    (INIT on a corpus under 10,000 pairs, recipe/finetuning.py), else the average of its last checkpoints."""
    with open(os.path.join(work, "plan.json"), encoding="utf-8") as f:
        best = json.load(f)["schedule"].get("handed_over") == "best"
    return os.path.join(work, "checkpoints", "checkpoint_best.pt" if best else "average.pt")


def updates_of(work: str) -> int:
    with open(os.path.join(work, "train.log"), encoding="utf-8", errors="replace") as f:
        logged = log_records(f.read(), "train_inner")
    return int(logged[-1]["num_updates"]) if logged else 0


def run(
    parent_work: str,
    child: Corpus,
    budgets: List[str],
    cores: List[int],
    work_root: str,
    record: str,
    extra: Dict[str, str],
) -> dict:
    init = os.path.join(parent_work, "hf")
    if not os.path.exists(os.path.join(init, "config.json")):
        raise SystemExit(f"{init}: no MarianMT export of the parent (run its recipe with EXPORT=hf)")
    found = {
        "parent": parent_work,
        "child": {"prefix": child.prefix, "src": child.src, "tgt": child.tgt},
        "runs": [],
        "parent_run": {"updates": updates_of(parent_work), **read_run(parent_work)},
    }
    for budget in budgets:
        works = {kind: os.path.join(work_root, budget, kind.replace(" ", "_")) for kind in KINDS}
        running = []
        for (kind, work), core in zip(works.items(), cores * 2):
            if os.path.exists(os.path.join(work, "results", "scores.test.json")):
                continue
            os.makedirs(work, exist_ok=True)
            env = child_env(child, work, budget, init if kind == "fine-tuned" else None, extra)
            running.append((kind, start_recipe(env, work + ".log", f"TIME={budget} INIT={env.get('INIT', '')}", core)))
            if len(cores) == 1:
                running[-1][1].wait()
        for kind, proc in running:
            if proc.wait() != 0:
                raise SystemExit(f"{kind} at {budget}: the recipe failed ({proc.returncode}); see {works[kind]}.log")
        for kind, work in works.items():
            result = {"budget": budget, "kind": kind, "updates": updates_of(work), **read_run(work)}
            if kind == "fine-tuned":
                with open(os.path.join(work, "results", "scores.parent.json")) as f:
                    alone = json.load(f)
                found["parent_alone"] = {"bleu": alone["sacrebleu"], "chrf": alone["chrf"]}
                after = on_parent_test(parent_work, work, handed_over(work), child.src, child.tgt)
                before = on_parent_test(
                    parent_work, work, os.path.join(work, "parent", "checkpoint.pt"), child.src, child.tgt
                )
                result["parent_test"] = {"bleu": after["sacrebleu"], "chrf": after["chrf"]}
                found["parent_on_its_test"] = {"bleu": before["sacrebleu"], "chrf": before["chrf"]}
            found["runs"].append(result)
    os.makedirs(os.path.dirname(os.path.abspath(record)), exist_ok=True)
    with open(record, "w") as f:
        json.dump(found, f, indent=1)
    return found


def table(found: dict) -> str:
    alone, own = found["parent_alone"], found["parent_on_its_test"]
    lines = [
        "| TIME (one core) | model | updates | child test BLEU | chrF | parent's test BLEU | chrF |",
        "|---|---|---|---|---|---|---|",
        f"| 0 | the parent alone | 0 | {alone['bleu']:.2f} | {alone['chrf']:.2f} | {own['bleu']:.2f} | "
        f"{own['chrf']:.2f} |",
    ]
    for r in found["runs"]:
        theirs = r.get("parent_test")
        lines.append(
            f"| {r['budget']} | {r['kind']} | {r['updates']:,} | {r['bleu']:.2f} | {r['chrf']:.2f} | "
            + (f"{theirs['bleu']:.2f} | {theirs['chrf']:.2f} |" if theirs else "- | - |")
        )
    return "\n".join(lines)


def figure(found: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    budgets = list(dict.fromkeys(r["budget"] for r in found["runs"]))
    for kind, style in zip(KINDS, ("o-", "s--")):
        ax.plot(
            budgets,
            [next(r["bleu"] for r in found["runs"] if r["budget"] == b and r["kind"] == kind) for b in budgets],
            style,
            label=f"{kind}, on the child's test set",
        )
    ax.plot(
        budgets,
        [
            next(r["parent_test"]["bleu"] for r in found["runs"] if r["budget"] == b and r["kind"] == "fine-tuned")
            for b in budgets
        ],
        "^:",
        label="fine-tuned, on the parent's test set",
    )
    ax.axhline(
        found["parent_alone"]["bleu"], color="grey", linestyle="-.", label="the parent alone, on the child's test set"
    )
    ax.axhline(found["parent_on_its_test"]["bleu"], color="grey", linestyle=":", label="the parent on its own test set")
    ax.set_xlabel("TIME of one core")
    ax.set_ylabel("sacreBLEU")
    ax.legend(fontsize=8)
    ax.set_title("Fine-tuning a parent against training from nothing")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--parent", required=True, help="the parent's recipe WORK (its hf export and data/test.*)")
    r.add_argument("--child", required=True, help="PREFIX:SRC:TGT of the child's training text (valid, test beside it)")
    r.add_argument("--budgets", nargs="+", default=["10m", "30m"])
    r.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="the two runs of a budget, side by side")
    r.add_argument("--work", required=True)
    r.add_argument("--record", required=True)
    r.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a recipe variable for every run (TOY=1)"
    )
    t = sub.add_parser("table")
    t.add_argument("--record", required=True)
    t.add_argument("--figure")
    a = p.parse_args(argv)
    if a.command == "run":
        prefix, src, tgt = a.child.rsplit(":", 2)
        found = run(
            a.parent,
            Corpus("child", os.path.abspath(prefix), src, tgt),
            a.budgets,
            a.cores,
            a.work,
            a.record,
            dict(item.split("=", 1) for item in a.set),
        )
    else:
        with open(a.record) as f:
            found = json.load(f)
        if a.figure:
            figure(found, a.figure)
    print_table(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
