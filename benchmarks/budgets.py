"""The parallel-text recipe's pick for a budget in time, against the candidates beside it.

For each corpus and each budget (a ``TIME`` of one core), every candidate runs through
``recipes/parallel_text.sh`` as a user would run it, with the candidate's settings and the updates that the
budget gives that candidate on one core here (``vaswani-speed-probe budget --time``: the recipe's own
conversion, from a probe of one worker of one thread). The run is given those updates as ``MAX_UPDATE`` and
pinned to a core of its own, so that two runs go side by side: a busy neighbour changes how long a run takes,
not what it trains. Each is scored as the recipe scores it (averaged checkpoints, beam 4, sacreBLEU and chrF
on the test set) and its validation nll (bits per token) is read from its log.

The candidates: the rule's pick (what ``TIME`` picks here, preprocess/parallel_text.py), the size class's
settings, and the short budget's settings with one thing changed at a time, where the change makes an update
faster (2 layers, a vocabulary of 2,000, half the batch), and two of those changes joined (``JOINED``); ``--only``
adds those the ablation at 1,200 updates already ruled out (6 layers, d_model 512, P_drop 0.3:
``DEFAULT_CANDIDATES``). Successive halving prunes them:
every candidate at the first budget, then at each next budget the better half of those measured at the one
before (by BLEU), the rule's pick, and those too slow for the budget before. A candidate given fewer updates
than the recipe's floor (100) is not run: the recipe refuses such a TIME too.

    python -m benchmarks.budgets corpora --out runs/budgets/data [--debs DIR]
    python -m benchmarks.budgets run --corpus de_77k=runs/budgets/data/de_77k/train:en:de \
        --budgets 20m 1h 200m --jobs 2 \
        --record benchmarks/records/budgets/de_77k.json
    python -m benchmarks.budgets table --work benchmarks/records/budgets/de_77k.json --out runs/budgets/budgets.md \
        --figure docs/budgets.png

Two corpora side by side, one core each: ``run --corpus A=... --cores 0 --work runs/budgets/a`` and ``run --corpus
B=... --cores 1 --work runs/budgets/b``, then ``table --work runs/budgets/a runs/budgets/b`` (``make bench-budgets``).

Each run is a recipe's ``WORK`` (``WORK_ROOT/CORPUS/BUDGET/CANDIDATE``), and the recipe resumes: the same command
again picks up where the runs stopped (a session that ended, a machine that restarted), and a finished run is read
back from the record (``--record``, kept in git: benchmarks/records/budgets/), not trained again, even on another
machine, whose core is matched to the record's by compute (``calibrated``; a budget new to the record, as its longest
is). ``CORPUS=PREFIX:SRC:TGT`` takes ``PREFIX.{SRC,TGT}`` for training and, beside it, ``valid`` and ``test`` (the
layout ``preprocess.debian_l10n prepare`` writes).
"""

import argparse
import concurrent.futures
import functools
import json
import math
import os
import queue
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from recipes.planner.budget.size_classes import SHORT_BUDGET, class_settings  # noqa: E402
from recipes.planner.model import Model  # noqa: E402
from benchmarks.budget_record import Result, figure, load, read_run, save, table  # noqa: E402
from benchmarks.common import recipe_env, start_recipe  # noqa: E402
from recipes.planner.probe_arithmetic import parse_time  # noqa: E402
from recipes.planner.speed.probing import layout_probe  # noqa: E402
from recipes.planner.speed.probe_cache import per_token  # noqa: E402

PICK = "pick"
SHORT_FLAGS = SHORT_BUDGET["model_flags"]
SHORT = Model.from_flags("vaswani_base", SHORT_FLAGS)


# name -> (what it is, the recipe's variables). Each is the short budget's settings with one thing changed.
CHANGES = {
    # the rule's own layers in time: the same flags
    "N=2": ("2+2 layers", {"MODEL_FLAGS": SHORT.with_sizes(encoder_layers=2, decoder_layers=2).flag_text()}),
    "N=6": ("6+6 layers", {"MODEL_FLAGS": SHORT.with_sizes(encoder_layers=6, decoder_layers=6).flag_text()}),
    "d512": ("d_model 512", {"MODEL_FLAGS": SHORT.with_sizes(d_model=512).flag_text()}),
    "P0.3": ("P_drop 0.3", {"DROPOUT": "0.3"}),
    "BPE2k": ("a vocabulary of 2,000", {"VOCAB_SIZE": "2000"}),
    "2k-tokens": ("2,048 tokens an update", {"TOKENS_PER_UPDATE": "2048"}),
    # no dropout: the point the rule's repetition without dropout (R* at P_drop 0) is fitted to (budget_fit.py)
    "P0": ("P_drop 0", {"DROPOUT": "0.0"}),
}
# name -> the changes it joins: where two changes each gained at a budget, whether they add up (at TIME=1h on EN-RU
# 2 layers gained most, and 2,048 tokens an update next, docs/benchmarks.md).
JOINED = {"N=2+2k-tokens": ("N=2", "2k-tokens"), "N=2+2k-tokens+P0": ("N=2", "2k-tokens", "P0")}
# Run by default: those a budget in time could favour, each faster an update than the short budget's or the class's
# own. The others lose at these budgets by the ablation at 1,200 updates (docs/benchmarks.md): N=6 and d_model 512
# learn no faster an update (N=6 slower) at 1.6 and 2.1 times the time an update here, and P_drop 0.3 cost 4.4 BLEU.
DEFAULT_CANDIDATES = ["short", "class", "N=2", "BPE2k", "2k-tokens", "N=2+2k-tokens"]

# The corpora of docs/benchmarks.md, from the gettext catalogues of Debian 12's packages (preprocess.debian_l10n):
# the learning benchmark's 77k English-German pairs, and 22k English-Russian pairs of fewer packages (a game's
# campaigns and help, and tools' messages), a vocabulary a side.
WESNOTH = ["wesnoth-1.16-data"] + [
    f"wesnoth-1.16-{c}" for c in "did dm dw ei httt l low nr sof sota sotbe thot trow tsg ttb utbs".split()
]
CORPORA = {
    "de_77k": ("de", []),
    "ru_22k": ("ru", [*WESNOTH, "freeciv-data", "git", "gnupg-l10n", "aptitude-common", "mc-data", "pidgin-data"]),
}


@dataclass
class Corpus:
    name: str
    prefix: str
    src: str
    tgt: str

    @property
    def files(self) -> Dict[str, str]:
        folder = os.path.dirname(self.prefix)
        return {
            "TRAIN": self.prefix,
            "VALID": os.path.join(folder, "valid"),
            "TEST": os.path.join(folder, "test"),
            "SRC": self.src,
            "TGT": self.tgt,
        }

    def pairs(self) -> int:
        with open(f"{self.prefix}.{self.src}", "rb") as f:
            return sum(1 for _ in f)


def parse_corpus(text: str) -> Corpus:
    name, _, rest = text.partition("=")
    parts = rest.split(":")
    if not name or len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"--corpus {text!r}: expected NAME=PREFIX:SRC:TGT")
    return Corpus(name, *parts)


def recipe_settings(variables: Dict[str, str]) -> Dict[str, str]:
    """The settings that decide a training, from the budget rule's (upper-cased) or given variables."""
    return {k: str(variables[k]) for k in ("ARCH", "MODEL_FLAGS", "DROPOUT", "VOCAB_SIZE", "TOKENS_PER_UPDATE")}


def candidates(corpus: Corpus) -> Dict[str, Dict[str, str]]:
    """Every candidate's settings except the pick (asked of the recipe's rule per budget)."""
    full = class_settings(
        corpus.pairs(), ("", "")
    )  # the corpus's vocabulary, every candidate's but BPE2k (8,000 from 10k pairs)
    short = {
        "ARCH": "vaswani_base",
        "MODEL_FLAGS": SHORT_FLAGS,
        "DROPOUT": str(SHORT_BUDGET["dropout"]),
        "VOCAB_SIZE": str(full.vocab_size),
        "TOKENS_PER_UPDATE": str(SHORT_BUDGET["tokens_per_update"]),
    }
    found = {
        "short": short,
        "class": {
            "ARCH": full.arch,
            "MODEL_FLAGS": full.model_flags,
            "DROPOUT": str(full.dropout),
            "VOCAB_SIZE": str(full.vocab_size),
            "TOKENS_PER_UPDATE": str(full.tokens_per_update),
        },
    }
    for name, (_, change) in CHANGES.items():
        found[name] = {**short, **change}
    for name, parts in JOINED.items():
        found[name] = {**short, **{k: v for part in parts for k, v in CHANGES[part][1].items()}}
    return found


def assignments(text: str) -> Dict[str, str]:
    """NAME=value lines (shell-quoted), as the recipe's helpers print them."""
    found = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z_]+)=(.*)$", line)
        if m and not m.group(2).startswith(("(", "$'")):  # not arrays, nor bash's $'...' (AUTO_EXPLAIN)
            found[m.group(1)] = " ".join(shlex.split(m.group(2))) if m.group(2) else ""
    return found


def helper(args: Sequence[str], core: Optional[int]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if core is not None else None,
    )


def rule_pick(corpus: Corpus, budget: str, core: Optional[int]) -> Tuple[Dict[str, str], int]:
    """What the recipe's rule picks for TIME=budget with one CPU worker on ``core``, as its settings, and the dev
    set's target tokens it counted the validations by."""
    f = corpus.files
    done = helper(
        [
            "-m",
            "recipes.planner",
            "rule",
            "--train",
            f["TRAIN"],
            "--valid",
            f["VALID"],
            "--src",
            corpus.src,
            "--tgt",
            corpus.tgt,
            "--time",
            budget,
            "--cpu-workers",
            "1",
        ],
        core,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the rule for TIME={budget} on {corpus.prefix} failed:\n{done.stderr[-2000:]}")
    found = json.loads(done.stdout)
    return recipe_settings({k.upper(): str(v) for k, v in found.items()}), int(found["valid_tokens"])


def updates_for(settings: Dict[str, str], budget: str, core: Optional[int], valid_tokens: int) -> Tuple[int, str]:
    """(updates, why refused) that TIME=budget gives these settings on one worker of one core here, validating
    ``valid_tokens`` target tokens at each checkpoint (as the recipe counts them)."""
    done = helper(
        [
            "-m",
            "recipes.planner.speed.cli",
            "budget",
            "--arch",
            settings["ARCH"],
            "--model-flags",
            settings["MODEL_FLAGS"],
            "--vocab-size",
            settings["VOCAB_SIZE"],
            "--tokens-per-update",
            settings["TOKENS_PER_UPDATE"],
            "--gpus",
            "0",
            "--cpu-workers",
            "1",
            "--time",
            budget,
            "--valid-tokens",
            str(valid_tokens),
            "--per-token",  # the plan's own reading of a CPU's figure
        ],
        core,
    )
    if done.returncode == 2 and "too few to learn" in done.stderr:
        m = re.search(r": (\d+) updates", done.stderr)
        return (int(m.group(1)) if m else 0), done.stderr.strip().removeprefix("error: ")
    if done.returncode != 0:
        raise RuntimeError(f"the speed probe failed:\n{done.stderr[-2000:]}")
    return int(assignments(done.stdout)["MAX_UPDATE"]), ""


def run_recipe(
    corpus: Corpus,
    budget: str,
    name: str,
    settings: Dict[str, str],
    updates: int,
    work_root: str,
    core: Optional[int],
    recipe: str,
) -> Dict[str, Optional[float]]:
    work = os.path.join(work_root, corpus.name, budget, name.replace(" ", "_"))
    done_file = os.path.join(work, "results", "scores.test.json")
    env = recipe_env(
        corpus.files, settings, {"WORK": work, "MAX_UPDATE": str(updates), "CPU_WORKERS": "1", "GPUS": "0"}
    )
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work_root, corpus.name, budget, f"{name.replace(' ', '_')}.log")
    status = start_recipe(env, log, f"{name}, {updates} updates, {settings}", core, recipe).wait()
    if status != 0 or not os.path.exists(done_file):
        raise RuntimeError(f"{name} at {budget} on {corpus.name}: the recipe failed ({status}); see {log}")
    return read_run(work)


def survivors(results: Sequence[Result], keep: float = 0.5) -> List[str]:
    """Who goes on to the next budget: the better ``keep`` share of the candidates measured (by BLEU, at least one),
    the pick, and those too slow to be measured at this budget (the next one may fit them)."""
    measured = sorted((r for r in results if r.bleu is not None), key=lambda r: -r.bleu)
    chosen = [r.candidate for r in measured[: max(1, math.ceil(len(measured) * keep))]]
    others = [r.candidate for r in results if r.is_pick or r.refused]
    return chosen + [name for name in others if name not in chosen]


def calibrated(budget: str, known: Sequence[Result], core: Optional[int], valid_tokens: int) -> str:
    """The TIME of this machine's core that is ``budget`` where ``known`` (the corpus's runs measured already,
    perhaps on another machine, a faster or a slower one) ran: the TIME that gives one of them the updates it was
    given there. Candidates compared at one budget are given the same compute, not the same seconds of different
    machines. Machines differ by more for some models than others (one was 1.87 times as fast as another for 3
    layers and 4,096 tokens an update, 1.48 times for 2,048), so the reference is always the same run: of those
    given ``budget`` itself, the one with the most updates (the fastest, as are the candidates added since).
    A budget first measured here, in a record of runs measured elsewhere, is scaled as the longest budget measured
    there is (TIME=1h there being 2,451 s here, 200m there is 200 / 60 times that): the record's machine stays the
    one whose core the budgets are of. ``budget`` itself where none is known, or where it gives that run its updates."""
    measured = sorted(
        (r for r in known if r.budget == budget and r.bleu is not None and not r.time),
        key=lambda r: (-r.updates, r.candidate),
    )
    if not measured:
        there = sorted({r.budget for r in known if r.bleu is not None and not r.time}, key=parse_time)
        if not there:
            return budget
        here = calibrated(there[-1], known, core, valid_tokens)
        if here == there[-1]:
            return budget
        return f"{round(parse_time(budget) * parse_time(here) / parse_time(there[-1]))}s"
    reference = measured[0]

    @functools.lru_cache(maxsize=None)  # a subprocess each: the bounds are asked twice
    def updates(seconds: int) -> int:
        return updates_for(reference.settings, f"{seconds}s", core, valid_tokens)[0]

    low, high = 120, parse_time(budget)  # TIME's least
    if updates(high) == reference.updates:
        return budget
    if updates(low) >= reference.updates:
        return f"{low}s"
    while updates(high) < reference.updates:
        low, high = high, high * 2
    while high - low > 1:  # the fewest seconds that give at least its updates
        middle = (low + high) // 2
        low, high = (low, middle) if updates(middle) >= reference.updates else (middle, high)
    return f"{high}s"


def probe_all(settings: Sequence[Dict[str, str]], core: int) -> None:
    """Each candidate's seconds per update on one worker of one thread, measured here before any run starts (and
    kept, as the recipe keeps them): in one process, so that one probe's load does not make the next one's machine
    look busy."""
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        for s in settings:
            found = per_token(
                layout_probe(s["ARCH"], s["MODEL_FLAGS"], int(s["VOCAB_SIZE"]), int(s["TOKENS_PER_UPDATE"]), 0, 1)
            )
            print(f"  {found['seconds']:.2f} s an update{' (busy)' if found.get('busy') else ''}: {s}", flush=True)
    finally:
        os.sched_setaffinity(0, everywhere)


def _say_moved(corpus: Corpus, results: Sequence[Result], pairs: int) -> None:
    moved = sorted({r.pairs for r in results if r.corpus == corpus.name and r.pairs not in (None, pairs)})
    if moved:
        print(
            f"{corpus.name}: {pairs} training pairs now; results measured on {', '.join(map(str, moved))} are "
            "kept (the table says which)",
            flush=True,
        )


def _pick_at(corpus: Corpus, budget: str, results: Sequence[Result], core: int) -> Tuple[Dict[str, str], int, str]:
    """The rule's pick at ``budget``, at the compute it gave where the record's runs were measured: the pick, the dev
    set's tokens, and the TIME here."""
    pick, valid_tokens = rule_pick(corpus, budget, core)
    here = calibrated(budget, [r for r in results if r.corpus == corpus.name], core, valid_tokens)
    if here != budget:
        print(
            f"{corpus.name}, TIME={budget}: {here} of this machine's core, the compute that {budget} gave "
            "where the record's runs were measured",
            flush=True,
        )
        pick, valid_tokens = rule_pick(corpus, here, core)
    return pick, valid_tokens, here


def _add_pick(corpus: Corpus, everyone: Dict[str, Dict[str, str]], names: List[str], pick: Dict[str, str]) -> None:
    """The rule's pick among the candidates: where it picks none of those asked for, it runs beside them."""
    if pick in everyone.values():
        return
    known = [k for k, x in candidates(corpus).items() if x == pick]
    model = Model.from_flags(pick["ARCH"], pick["MODEL_FLAGS"])
    name = (
        known[0]
        if known
        else f"rule's N={model.encoder_layers} d{model.d_model} {pick['TOKENS_PER_UPDATE']} P{pick['DROPOUT']}"
    )
    everyone[name] = pick
    names.append(name)


def _todo(
    corpus: Corpus,
    budget: str,
    here: str,
    names: Sequence[str],
    everyone: Dict[str, Dict[str, str]],
    pick: Dict[str, str],
    results: Sequence[Result],
    core: int,
    valid_tokens: int,
    pairs: int,
) -> List[Result]:
    """The runs of ``budget`` not yet measured, each with the updates its TIME gives it (or why it is refused)."""
    todo = []
    for name in names:
        settings = everyone[name]
        if any((r.corpus, r.budget, r.candidate) == (corpus.name, budget, name) for r in results):
            continue  # measured already, its mark set by the caller
        updates, refused = updates_for(settings, here, core, valid_tokens)
        todo.append(
            Result(
                corpus.name,
                budget,
                name,
                settings,
                updates,
                refused,
                is_pick=[PICK] if settings == pick else [],
                measured=time.strftime("%Y-%m-%d"),
                pairs=pairs,
                time="" if here == budget else here,
            )
        )
    if not any(r.is_pick for r in todo) and not any(
        r.is_pick for r in results if (r.corpus, r.budget) == (corpus.name, budget)
    ):
        raise RuntimeError(f"TIME={budget} on {corpus.name} picks {pick}, which is none of the candidates")
    return todo


def _train_side_by_side(
    corpus: Corpus,
    budget: str,
    pending: Sequence[Result],
    cores: "queue.Queue[int]",
    workers: int,
    work_root: str,
    recipe: str,
    results: List[Result],
    record: str,
) -> None:
    """``pending`` trained by the recipe, ``workers`` at a time, each on a core of its own; each result added to
    ``results`` and saved in ``record`` as it comes."""

    def one(r: Result) -> Result:
        core = cores.get()
        try:
            r.__dict__.update(run_recipe(corpus, budget, r.candidate, r.settings, r.updates, work_root, core, recipe))
        finally:
            cores.put(core)
        print(
            f"  {corpus.name} {budget} {r.candidate}: BLEU {r.bleu}, chrF {r.chrf}, valid nll {r.valid_nll}",
            flush=True,
        )
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for r in pool.map(one, pending):
            results.append(r)
            save(record, results)
    save(record, results)


def run(
    corpora: Sequence[Corpus],
    budgets: Sequence[str],
    work_root: str,
    jobs: int,
    recipe: str,
    only: Sequence[str] = (),
    use_cores: Sequence[int] = (),
    record: Optional[str] = None,
) -> List[Result]:
    """Train and score the candidates of each corpus at each budget, ``jobs`` side by side, each on a core of its own
    (``use_cores``, or the first of this process's); what the ``record`` (a .json file, or ``work_root``'s) holds
    already is read back, not trained again, and each result is added to it as it comes. The runs' folders are a
    cache: a record kept apart from them (in git) outlives the machine they were on."""
    record = record or work_root
    cores = queue.Queue()
    mine = list(use_cores) or sorted(os.sched_getaffinity(0))[:jobs]
    for core in mine:
        cores.put(core)
    results = [r for r in load(record) if r.bleu is not None or r.refused]  # what a stopped run finished
    for corpus in corpora:
        pairs = corpus.pairs()
        _say_moved(corpus, results, pairs)
        everyone = candidates(corpus)
        if only:
            everyone = {k: v for k, v in everyone.items() if k in only}
        names = list(everyone)
        print(f"{corpus.name}: the candidates' speed on one core", flush=True)
        probe_all(list(everyone.values()), mine[0])
        for budget in budgets:
            pick, valid_tokens, here = _pick_at(corpus, budget, results, mine[0])
            _add_pick(corpus, everyone, names, pick)
            for r in results:  # the rule's pick now, for every run measured (a rule revised since moves the mark)
                if (r.corpus, r.budget) == (corpus.name, budget):
                    r.is_pick = [PICK] if r.settings == pick else []
            todo = _todo(corpus, budget, here, names, everyone, pick, results, mine[0], valid_tokens, pairs)
            # the pick first: the measurement the rule stands on, should the runs stop before the others
            pending = sorted((r for r in todo if not r.refused), key=lambda r: not r.is_pick)
            results.extend(r for r in todo if r.refused)
            print(
                f"{corpus.name}, TIME={budget}: {len(pending)} to train: "
                + ", ".join(f"{r.candidate} ({r.updates} updates)" for r in pending),
                flush=True,
            )
            _train_side_by_side(corpus, budget, pending, cores, len(mine), work_root, recipe, results, record)
            # of those --only names: a run resumed with fewer candidates finds the others' results too
            names = [
                n
                for n in survivors([r for r in results if (r.corpus, r.budget) == (corpus.name, budget)])
                if n in everyone
            ]
    return results


def prepare_corpora(out: str, debs: Optional[str]) -> None:
    """CORPORA into ``out/NAME/{train,valid,test}.{en,LANG}``, from ``debs`` or apt-get (a corpus made already is
    left as it is: preprocess.debian_l10n's own rule)."""
    for name, (lang, packages) in CORPORA.items():
        cmd = [
            sys.executable,
            "-m",
            "preprocess.debian_l10n",
            "prepare",
            "--out",
            os.path.join(out, name),
            "--lang",
            lang,
        ]
        cmd += ["--debs", debs] if debs else []
        cmd += ["--packages", *packages] if packages else []
        if subprocess.run(cmd, cwd=REPO).returncode != 0:
            raise RuntimeError(f"preparing {name} failed: {' '.join(map(shlex.quote, cmd))}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train and score the candidates (resumes)")
    r.add_argument("--corpus", action="append", type=parse_corpus, required=True, help="NAME=PREFIX:SRC:TGT")
    r.add_argument("--budgets", nargs="+", default=["20m", "1h", "200m"], help="TIMEs of one core, shortest first")
    r.add_argument("--jobs", type=int, default=2, help="runs side by side, each on a core of its own")
    r.add_argument("--cores", type=int, nargs="+", default=[], help="the cores to run on (default: the first JOBS)")
    r.add_argument(
        "--only",
        nargs="+",
        default=DEFAULT_CANDIDATES,
        help=f"the candidates (default {' '.join(DEFAULT_CANDIDATES)}; also: "
        + ", ".join(c for c in CHANGES if c not in DEFAULT_CANDIDATES)
        + ")",
    )
    r.add_argument("--recipe", default=os.path.join(REPO, "recipes", "parallel_text.sh"))
    r.add_argument(
        "--record",
        help="the results' record, a .json file (default: WORK/results.json); what it holds is not trained again",
    )
    c = sub.add_parser("corpora", help="the two corpora of docs/benchmarks.md, from Debian's packages")
    c.add_argument("--out", default="runs/budgets/data")
    c.add_argument("--debs", help="the packages' .deb files are here (default: apt-get download)")
    t = sub.add_parser("table", help="the table and the figure of what was measured")
    t.add_argument("--out", help="write the table here (markdown)")
    t.add_argument("--figure", help="write the figure here (PNG)")
    r.add_argument("--work", nargs=1, default=["runs/budgets"])
    t.add_argument("--work", nargs="+", default=["runs/budgets"], help="one or more runs' folders or records (.json)")
    a = p.parse_args(argv)
    try:
        if a.command == "corpora":
            prepare_corpora(a.out, a.debs)
            return 0
        if a.command == "run":
            for b in a.budgets:
                parse_time(b)
            results = run(a.corpus, a.budgets, a.work[0], a.jobs, a.recipe, a.only, a.cores, a.record)
        else:
            results = [r for work in a.work for r in load(work)]
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = table(results)
    print(text)
    if a.command == "table" and a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    if a.command == "table" and a.figure:
        figure(results, a.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
