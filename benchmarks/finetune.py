"""Fine-tuning a parent against training from nothing in the same time, on real text of another domain, offline.

The parent is a model of this project exported to MarianMT (``EXPORT=hf``), as a published OPUS-MT model would be
downloaded: published weights cannot be fetched on these machines. At each budget, the parallel-text recipe runs
twice, side by side on ``--cores``, one core each: ``INIT=`` the parent, and from nothing (the budget rule's own pick
for the corpus), both with ``TIME=`` the budget. Scored on the child's test set (the recipe's stages 6-7): the parent
alone (the recipe's stage 3q), fine-tuned and from nothing; and on the parent's own test set, the parent before and
after fine-tuning (forgetting): its test text in the parent's pieces and dictionaries, decoded as the recipe decodes.

    python -m benchmarks.finetune run --parent runs/finetune/parent --child runs/finetune/data/games/train:en:de \\
        --sizes 500 2000 10000 --budgets 10m 30m --cores 0 1 --work runs/finetune/runs \\
        --record benchmarks/records/finetune/games.json
    python -m benchmarks.finetune table --record benchmarks/records/finetune/games.json --figure docs/finetune.png

What fine-tuning forgets, and what guards against it (``forgetting``): at one size and budget, the fine-tuning
without a guard, with the parent's own training text replayed at each ``--ratios`` (``REPLAY=``), and distilled from
the parent (``REPLAY=parent``: its translations of the training sources; and, at the largest ratio, its translations
of its own training text's sources, ``REPLAY_SOURCES``, as source text of its domain would be had without
translations), two side by side, one core each; each scored by the recipe on the child's test set and, with
``PARENT_TEST=`` the parent's test set, on the parent's before and after (the paired bootstrap of the change):

    python -m benchmarks.finetune forgetting --parent runs/finetune/parent \\
        --child runs/finetune/data/games/train:en:de --size 2000 --budget 10m --ratios 1 3 --cores 0 1 \\
        --work runs/finetune/forgetting --record benchmarks/records/finetune/forgetting.json
    python -m benchmarks.finetune forgetting-table --record benchmarks/records/finetune/forgetting.json \\
        --figure docs/forgetting.png

``--parent`` is the parent's recipe WORK: its ``hf`` export (the parent) and its ``data/test.*`` (its test set).
``--sizes``: the child's training text cut to that many pairs (drawn with seed 1; the same dev and test sets for
every size), each size at every budget. Under 10,000 pairs the recipe refuses to train from nothing (``MIN_PAIRS``):
the run from nothing is given ``MIN_PAIRS`` of its size, to be measured. A run whose scores exist is read back, not
run again; the rest go as many at a time as there are cores (so the runs from nothing, which need no parent, can be
made first, and the fine-tunings then pair up).
"""

import argparse
import json
import os
import random
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.budget_record import read_run  # noqa: E402
from benchmarks.budgets import Corpus  # noqa: E402
from benchmarks.common import decode_and_score, print_table, recipe_env, start_recipe  # noqa: E402
from transformer_plugin_cli.fairseq_output import log_records  # noqa: E402

KINDS = ("fine-tuned", "from nothing")


FROM_NOTHING_MIN_PAIRS = 10_000  # the recipe's MIN_PAIRS: fewer pairs are refused without INIT


def child_env(child: Corpus, work: str, budget: str, init: Optional[str], extra: Dict[str, str]) -> Dict[str, str]:
    """A run's environment: the child corpus and ``budget`` as its TIME, one CPU worker, ``init`` as its INIT (or,
    from nothing on fewer pairs than the recipe takes, ``MIN_PAIRS`` of the corpus's size)."""
    env = recipe_env(
        child.files, {"WORK": work, "TIME": budget, "CPU_WORKERS": "1", "GPUS": "0"}, extra, unset=("MAX_UPDATE",)
    )
    if init:
        env["INIT"] = init
    elif child.pairs() < FROM_NOTHING_MIN_PAIRS:
        env.setdefault("MIN_PAIRS", str(child.pairs()))
    return env


def subset(child: Corpus, pairs: int, out: str) -> Corpus:
    """``child``'s training text cut to ``pairs`` pairs drawn with seed 1 (in their order), in ``out``, beside
    ``child``'s own dev and test sets (linked)."""
    folder = os.path.dirname(child.prefix)
    os.makedirs(out, exist_ok=True)
    lines = {}
    for lang in (child.src, child.tgt):
        with open(f"{child.prefix}.{lang}", encoding="utf-8") as f:
            lines[lang] = f.readlines()
    have = len(lines[child.src])
    if pairs > have:
        raise SystemExit(f"{child.prefix}.{child.src}: {have} pairs, fewer than --sizes {pairs}")
    drawn = sorted(random.Random(1).sample(range(have), pairs))
    for lang in (child.src, child.tgt):
        with open(os.path.join(out, f"train.{lang}"), "w", encoding="utf-8") as f:
            f.writelines(lines[lang][i] for i in drawn)
        for split in ("valid", "test"):
            link = os.path.join(out, f"{split}.{lang}")
            if not os.path.lexists(link):
                os.symlink(os.path.abspath(os.path.join(folder, f"{split}.{lang}")), link)
    return Corpus(f"{child.name} {pairs}", os.path.join(out, "train"), child.src, child.tgt)


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
    (INIT on a corpus under 10,000 pairs, recipes/planner/finetuning.py), else the average of its last checkpoints."""
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
    sizes: Sequence[Optional[int]] = (None,),
) -> dict:
    """Every size at every budget, fine-tuned and from nothing: the runs whose scores are not there yet, as many at a
    time as ``cores`` (a size's two runs at a budget side by side where both are to run); then the record."""
    init = os.path.join(parent_work, "hf")
    if not os.path.exists(os.path.join(init, "config.json")):
        raise SystemExit(f"{init}: no MarianMT export of the parent (run its recipe with EXPORT=hf)")
    found = {
        "parent": parent_work,
        "child": {"prefix": child.prefix, "src": child.src, "tgt": child.tgt},
        "runs": [],
        "parent_run": {"updates": updates_of(parent_work), **read_run(parent_work)},
    }
    corpora, todo = [], []
    for size in sizes:
        corpus = subset(child, size, os.path.join(work_root, "data", str(size))) if size else child
        root = os.path.join(work_root, str(size)) if size else work_root
        corpora.append((corpus, root))
        for budget in budgets:
            for kind, work in works_of(root, budget).items():
                if not os.path.exists(os.path.join(work, "results", "scores.test.json")):
                    todo.append((corpus, budget, kind, work))
    for start in range(0, len(todo), len(cores)):
        running = []
        for (corpus, budget, kind, work), core in zip(todo[start : start + len(cores)], cores):
            os.makedirs(work, exist_ok=True)
            env = child_env(corpus, work, budget, init if kind == "fine-tuned" else None, extra)
            header = f"{corpus.pairs()} pairs, TIME={budget} INIT={env.get('INIT', '')}"
            running.append((corpus, budget, kind, work, start_recipe(env, work + ".log", header, core)))
        failed = [r for r in running if r[-1].wait() != 0]  # every run ended, none left behind
        if failed:
            raise SystemExit(
                "; ".join(
                    f"{kind} at {budget} on {corpus.pairs()} pairs: the recipe failed, see {work}.log"
                    for corpus, budget, kind, work, _ in failed
                )
            )
    for corpus, root in corpora:
        found["runs"] += results_of(parent_work, corpus, budgets, root, found)
    os.makedirs(os.path.dirname(os.path.abspath(record)), exist_ok=True)
    with open(record, "w") as f:
        json.dump(found, f, indent=1)
    return found


def works_of(root: str, budget: str) -> Dict[str, str]:
    """The WORK of each kind of run at ``budget`` under ``root``."""
    return {kind: os.path.join(root, budget, kind.replace(" ", "_")) for kind in KINDS}


def results_of(parent_work, child: Corpus, budgets, work_root, found) -> List[dict]:
    """The runs of one corpus at each budget, as run; ``found`` gets the parent's scores alone and on its own test
    set."""
    results = []
    pairs = child.pairs()
    for budget in budgets:
        works = works_of(work_root, budget)
        for kind, work in works.items():
            result = {"pairs": pairs, "budget": budget, "kind": kind, "updates": updates_of(work), **read_run(work)}
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
                with open(os.path.join(work, "results", "scores.test.json")) as f:
                    result["against_parent"] = json.load(f).get("against")
                result["against_from_nothing"] = against(work, works["from nothing"], child)
            results.append(result)
    return results


def against(work: str, baseline_work: str, child: Corpus) -> dict:
    """The paired bootstrap of ``work``'s test hypotheses against ``baseline_work``'s, on the child's test set
    (vaswani-evaluate's, sacreBLEU's resamplings)."""
    from transformer_plugin_cli.tools.evaluate import paired_bootstrap

    def lines(path):
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]

    hypotheses = os.path.join("results", "hypotheses.test.txt")
    references = lines(child.files["TEST"] + "." + child.tgt)
    return paired_bootstrap(
        lines(os.path.join(work, hypotheses)), lines(os.path.join(baseline_work, hypotheses)), references
    )


def gain(found: Optional[dict]) -> str:
    """sacreBLEU's difference and its 95% interval, marked "n.s." (not significant) where the interval spans 0."""
    if not found:
        return "-"
    d = found["sacrebleu"]
    return f"{d['difference']:+.2f} ({d['low']:+.2f} to {d['high']:+.2f}){'' if d['significant'] else ', n.s.'}"


def table(found: dict) -> str:
    alone, own = found["parent_alone"], found["parent_on_its_test"]
    lines = [
        "| pairs | TIME (one core) | model | updates | child test BLEU | chrF | BLEU against from nothing (95%) | "
        "against the parent (95%) | parent's test BLEU | chrF |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| - | 0 | the parent alone | 0 | {alone['bleu']:.2f} | {alone['chrf']:.2f} | - | - | {own['bleu']:.2f} | "
        f"{own['chrf']:.2f} |",
    ]
    for r in found["runs"]:
        theirs = r.get("parent_test")
        lines.append(
            f"| {r.get('pairs', 0):,} | {r['budget']} | {r['kind']} | {r['updates']:,} | {r['bleu']:.2f} | "
            f"{r['chrf']:.2f} | {gain(r.get('against_from_nothing'))} | {gain(r.get('against_parent'))} | "
            + (f"{theirs['bleu']:.2f} | {theirs['chrf']:.2f} |" if theirs else "- | - |")
        )
    return "\n".join(lines)


def figure(found: dict, path: str) -> None:
    """sacreBLEU against the child's training pairs (one line for each model and budget), beside the parent's own
    test set after fine-tuning and the parent alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    runs = found["runs"]
    for budget in dict.fromkeys(r["budget"] for r in runs):
        for kind, marker in zip(KINDS, ("o", "s")):
            drawn = sorted((r.get("pairs", 0), r["bleu"]) for r in runs if r["budget"] == budget and r["kind"] == kind)
            ax.plot(*zip(*drawn), marker + "-" if kind == KINDS[0] else marker + "--", label=f"{kind}, {budget}")
        after = sorted(
            (r.get("pairs", 0), r["parent_test"]["bleu"])
            for r in runs
            if r["budget"] == budget and r["kind"] == "fine-tuned"
        )
        ax.plot(*zip(*after), "^:", label=f"fine-tuned, {budget}, on the parent's test set")
    ax.axhline(found["parent_alone"]["bleu"], color="grey", linestyle="-.", label="the parent alone")
    ax.axhline(found["parent_on_its_test"]["bleu"], color="grey", linestyle=":", label="the parent on its own test set")
    ax.set_xscale("log")
    ax.set_xlabel("the child's training pairs")
    ax.set_ylabel("sacreBLEU (the child's test set, unless said)")
    ax.legend(fontsize=7)
    ax.set_title("Fine-tuning a parent against training from nothing, same TIME of one core", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def guards(ratios: Sequence[float]) -> Dict[str, Dict[str, str]]:
    """The fine-tunings of ``forgetting``, by name: their recipe variables."""
    found = {"no guard": {}}
    for ratio in ratios:
        found[f"replay {ratio:g}"] = {"REPLAY_RATIO": f"{ratio:g}"}  # REPLAY: the parent's training text, set by run
    found["distilled"] = {"REPLAY": "parent", "REPLAY_RATIO": "1"}
    # the parent translating source text of its own domain (REPLAY_SOURCES: its training text's sources, set by run)
    found[f"distilled own text {max(ratios):g}"] = {"REPLAY": "parent", "REPLAY_RATIO": f"{max(ratios):g}"}
    return found


def forgetting(
    parent_work: str,
    child: Corpus,
    size: Optional[int],
    budget: str,
    ratios: Sequence[float],
    cores: List[int],
    work_root: str,
    record: str,
    extra: Dict[str, str],
) -> dict:
    """Each guard of ``guards(ratios)`` fine-tuned at ``budget`` on ``child`` (cut to ``size`` pairs), two at a time
    on ``cores``; what each gains on the child's test set and loses on the parent's (the recipe's PARENT_TEST)."""
    init = os.path.join(parent_work, "hf")
    if not os.path.exists(os.path.join(init, "config.json")):
        raise SystemExit(f"{init}: no MarianMT export of the parent (run its recipe with EXPORT=hf)")
    corpus = subset(child, size, os.path.join(work_root, "data", str(size))) if size else child
    general = {"REPLAY": os.path.abspath(os.path.join(parent_work, "data", "train"))}
    parent_test = {"PARENT_TEST": os.path.abspath(os.path.join(parent_work, "data", "test"))}
    works = {name: os.path.join(work_root, budget, name.replace(" ", "_")) for name in guards(ratios)}
    todo = [name for name, work in works.items() if not os.path.exists(os.path.join(work, "results", "report.md"))]
    for start in range(0, len(todo), len(cores)):
        running = []
        for name, core in zip(todo[start : start + len(cores)], cores):
            settings = {**guards(ratios)[name]}
            if name.startswith("replay"):
                settings.update(general)
            if name.startswith("distilled own text"):
                settings["REPLAY_SOURCES"] = general["REPLAY"]
            os.makedirs(works[name], exist_ok=True)
            env = child_env(corpus, works[name], budget, init, {**extra, **parent_test, **settings})
            header = f"{corpus.pairs()} pairs, TIME={budget}, {name}: " + " ".join(
                f"{k}={v}" for k, v in settings.items()
            )
            running.append((name, start_recipe(env, works[name] + ".log", header, core)))
        failed = [name for name, proc in running if proc.wait() != 0]  # every run ended, none left behind
        if failed:
            raise SystemExit("; ".join(f"{name}: the recipe failed, see {works[name]}.log" for name in failed))
    found = {
        "parent": parent_work,
        "child": {"prefix": corpus.prefix, "src": corpus.src, "tgt": corpus.tgt, "pairs": corpus.pairs()},
        "budget": budget,
        "runs": [],
    }
    for name, work in works.items():
        scores = {
            key: read_json(os.path.join(work, "results", f"scores.{key}.json"))
            for key in ("test", "parent", "parent_test", "parent_test.before")
        }
        planned = read_json(os.path.join(work, "plan.json"))["budget"]["max_update"]
        found["parent_alone"] = {"bleu": scores["parent"]["sacrebleu"], "chrf": scores["parent"]["chrf"]}
        found["parent_on_its_test"] = {
            "bleu": scores["parent_test.before"]["sacrebleu"],
            "chrf": scores["parent_test.before"]["chrf"],
        }
        found["runs"].append(
            {
                "guard": name,
                "settings": guards(ratios)[name],
                "updates": updates_of(work),
                "planned_updates": planned,
                **read_run(work),
                "against_parent": scores["test"].get("against"),
                "parent_test": {"bleu": scores["parent_test"]["sacrebleu"], "chrf": scores["parent_test"]["chrf"]},
                "parent_test_change": scores["parent_test"].get("against"),
            }
        )
    os.makedirs(os.path.dirname(os.path.abspath(record)), exist_ok=True)
    with open(record, "w") as f:
        json.dump(found, f, indent=1)
    return found


def forgetting_table(found: dict) -> str:
    alone, own = found["parent_alone"], found["parent_on_its_test"]
    lines = [
        f"{found['child']['pairs']:,} in-domain pairs, TIME={found['budget']} of one core each",
        "",
        "| model | updates | child test BLEU | chrF | against the parent (95%) | parent's test BLEU | chrF | "
        "change on the parent's test (95%) |",
        "|---|---|---|---|---|---|---|---|",
        f"| the parent alone | 0 | {alone['bleu']:.2f} | {alone['chrf']:.2f} | - | {own['bleu']:.2f} | "
        f"{own['chrf']:.2f} | - |",
    ]
    for r in found["runs"]:
        theirs = r["parent_test"]
        lines.append(
            f"| fine-tuned, {r['guard']} | {r['updates']:,} | {r['bleu']:.2f} | {r['chrf']:.2f} | "
            f"{gain(r.get('against_parent'))} | {theirs['bleu']:.2f} | {theirs['chrf']:.2f} | "
            f"{gain(r.get('parent_test_change'))} |"
        )
    return "\n".join(lines)


def forgetting_figure(found: dict, path: str) -> None:
    """Each fine-tuning as a point: its BLEU on the child's test set against its BLEU on the parent's, the parent
    alone among them; up and to the right is better."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.5))
    alone, own = found["parent_alone"], found["parent_on_its_test"]
    ax.plot([alone["bleu"]], [own["bleu"]], "k*", markersize=12, label="the parent alone")
    for r, marker in zip(found["runs"], "osD^vP"):
        ax.plot([r["bleu"]], [r["parent_test"]["bleu"]], marker, markersize=8, label=f"fine-tuned, {r['guard']}")
    ax.set_xlabel("sacreBLEU on the child's test set (in-domain)")
    ax.set_ylabel("sacreBLEU on the parent's test set")
    ax.legend(fontsize=8)
    ax.set_title(f"What fine-tuning forgets: {found['child']['pairs']:,} pairs, TIME={found['budget']} of one core")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--parent", required=True, help="the parent's recipe WORK (its hf export and data/test.*)")
    r.add_argument("--child", required=True, help="PREFIX:SRC:TGT of the child's training text (valid, test beside it)")
    r.add_argument("--budgets", nargs="+", default=["10m", "30m"])
    r.add_argument("--sizes", type=int, nargs="+", help="the child's training text cut to these numbers of pairs")
    r.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="the two runs of a budget, side by side")
    r.add_argument("--work", required=True)
    r.add_argument("--record", required=True)
    r.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a recipe variable for every run (TOY=1)"
    )
    t = sub.add_parser("table")
    t.add_argument("--record", required=True)
    t.add_argument("--figure")
    g = sub.add_parser("forgetting", help="no guard, replay at --ratios and distillation: gains and losses")
    g.add_argument("--parent", required=True, help="the parent's recipe WORK (its hf export, data/train, data/test)")
    g.add_argument("--child", required=True, help="PREFIX:SRC:TGT of the child's training text (valid, test beside it)")
    g.add_argument("--size", type=int, help="the child's training text cut to this number of pairs")
    g.add_argument("--budget", default="10m")
    g.add_argument("--ratios", type=float, nargs="+", default=[1.0, 3.0], help="REPLAY_RATIO of each replay run")
    g.add_argument("--cores", type=int, nargs="+", default=[0, 1], help="runs side by side, one on each")
    g.add_argument("--work", required=True)
    g.add_argument("--record", required=True)
    g.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a recipe variable for every run")
    g.add_argument("--figure", help="draw the gains against the losses here (PNG)")
    f = sub.add_parser("forgetting-table")
    f.add_argument("--record", required=True)
    f.add_argument("--figure")
    a = p.parse_args(argv)
    if a.command in ("forgetting", "forgetting-table"):
        if a.command == "forgetting":
            prefix, src, tgt = a.child.rsplit(":", 2)
            found = forgetting(
                a.parent,
                Corpus("child", os.path.abspath(prefix), src, tgt),
                a.size,
                a.budget,
                a.ratios,
                a.cores,
                a.work,
                a.record,
                dict(item.split("=", 1) for item in a.set),
            )
        else:
            with open(a.record) as f:
                found = json.load(f)
        if a.figure:
            forgetting_figure(found, a.figure)
        print_table(forgetting_table(found))
        return 0
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
            a.sizes or (None,),
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
