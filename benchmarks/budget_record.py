"""The budgets benchmark's record (benchmarks/budgets.py): a run's result, what a finished run's files say, the record
kept in git (benchmarks/records/budgets/), and the table and the figure drawn from it."""

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

from transformer_plugin_cli.fairseq_output import EARLY_STOP, log_records, training_seconds
from recipes.planner.probe_arithmetic import parse_time


@dataclass
class Result:
    corpus: str
    budget: str
    candidate: str
    settings: Dict[str, str]
    updates: int
    refused: str = ""  # why the recipe would not run it
    bleu: Optional[float] = None
    chrf: Optional[float] = None
    valid_nll: Optional[float] = None  # bits per token, the last validation
    train_seconds: Optional[float] = None  # fairseq's wall clock at its last logged update, summed over resumes
    is_pick: List[str] = field(default_factory=list)  # the candidates that are the rule's pick (same settings)
    measured: str = ""  # the day it was trained and scored
    pairs: Optional[int] = None  # the corpus's training pairs then (a corpus rebuilt from Debian's packages moves)
    time: str = (
        ""  # the TIME its updates were asked for, where not ``budget``: ``budget`` on another machine (calibrated)
    )
    note: str = ""
    stopped_at: Optional[int] = (
        None  # the update early stopping (the recipe's --patience) ended it at, before ``updates``
    )


def read_run(work: str) -> Dict[str, Optional[float]]:
    """BLEU, chrF, the last validation nll, fairseq's wall clock at the last logged update (a resumed run's
    process starts its clock again: the last reading before each restart is added) and, where fairseq's early
    stopping ended the run, the update it stopped at (the last validated: the check follows a validation)."""
    with open(os.path.join(work, "results", "scores.test.json")) as f:
        scores = json.load(f)
    with open(os.path.join(work, "train.log"), encoding="utf-8", errors="replace") as f:
        log = f.read()
    valid = log_records(log, "valid")
    walls = [float(r["wall"]) for r in log_records(log, "train_inner") if "wall" in r]
    return {
        "bleu": scores["sacrebleu"],
        "chrf": scores["chrf"],
        "valid_nll": float(valid[-1]["valid_nll_loss"]) if valid else None,
        "train_seconds": training_seconds(walls),
        "stopped_at": int(valid[-1]["valid_num_updates"]) if EARLY_STOP in log and valid else None,
    }


def results_file(where: str) -> str:
    """The results' record: ``where`` itself where it names a .json file (a record kept in git,
    benchmarks/records/budgets/), else ``where/results.json`` (a runs' folder)."""
    return where if where.endswith(".json") else os.path.join(where, "results.json")


def load(where: str) -> List[Result]:
    try:
        with open(results_file(where)) as f:
            return [Result(**r) for r in json.load(f)]
    except FileNotFoundError:
        return []


def save(where: str, results: Sequence[Result]) -> None:
    path = results_file(where)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump([asdict(r) for r in results], f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def table(results: Sequence[Result]) -> str:
    """A markdown table per corpus: a row per candidate, a column per budget (BLEU / chrF / valid nll, updates)."""
    lines = []
    for corpus in dict.fromkeys(r.corpus for r in results):
        rows = [r for r in results if r.corpus == corpus]
        budgets = sorted(dict.fromkeys(r.budget for r in rows), key=parse_time)
        lines += [f"**{corpus}**", ""]
        when = {}  # (training pairs, day) -> runs: a corpus rebuilt from Debian's packages may have moved between them
        for r in rows:
            if r.bleu is not None:
                when[r.pairs, r.measured] = when.get((r.pairs, r.measured), 0) + 1
        if len({pairs for pairs, _ in when}) > 1:
            lines += [
                "Measured on "
                + "; ".join(
                    f"{pairs or 0:,} training pairs ({n} run{'s' if n > 1 else ''}, {day or 'day not kept'})"
                    for (pairs, day), n in sorted(when.items(), key=str)
                )
                + ".",
                "",
            ]
        lines += ["| candidate | " + " | ".join(f"TIME={b}" for b in budgets) + " |", "|---|" + "---|" * len(budgets)]
        for name in dict.fromkeys(r.candidate for r in rows):
            cells = []
            for b in budgets:
                r = next((x for x in rows if (x.candidate, x.budget) == (name, b)), None)
                if r is None:
                    cells.append("")
                elif r.refused:
                    cells.append(f"{r.updates} updates: refused")
                else:
                    done = f"{r.stopped_at:,} of {r.updates:,}, stopped early" if r.stopped_at else f"{r.updates:,}"
                    text = f"{r.bleu:.2f} / {r.chrf:.2f} / {r.valid_nll:.2f} ({done})"
                    cells.append(f"**{text}** (pick)" if r.is_pick else text)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        for b in budgets:
            measured = [x for x in rows if x.budget == b and x.bleu is not None]
            pick = next((x for x in measured if x.is_pick), None)
            if measured and pick:
                best = max(measured, key=lambda x: x.bleu)
                lines.append(
                    f"\nTIME={b}: the pick's BLEU {pick.bleu:.2f}, the best's {best.bleu:.2f} ({best.candidate}): "
                    f"{'within' if best.bleu - pick.bleu <= 0.5 else 'NOT within'} 0.5"
                )
            for given in dict.fromkeys(x.time for x in rows if x.budget == b and x.time):
                if all(x.time for x in rows if x.budget == b):  # none measured there: scaled as its longest budget
                    lines.append(
                        f"\nTIME={b}: measured on another machine than the record's others: {given} of its "
                        f"core, {b} scaled as the compute that the longest budget gave where they ran"
                    )
                    continue
                names = ", ".join(x.candidate for x in rows if (x.budget, x.time) == (b, given))
                lines.append(
                    f"\nTIME={b}: {names} ran on another machine than the others: {given} of its core, the "
                    f"compute that {b} gave them where they ran"
                )
        lines.append("")
    return "\n".join(lines)


def figure(results: Sequence[Result], path: str) -> None:
    """Above, BLEU against the budget, a line per candidate, a panel per corpus, the rule's picks ringed. Below, the
    validation loss against the updates of the runs with a vocabulary of 8,000, and the rule's fitted curve of each
    candidate (recipes/planner/budget/, shifted by the corpus's mean residual): solid where runs measured it,
    dotted where the rule extrapolates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    corpora = list(dict.fromkeys(r.corpus for r in results))
    fig, axes = plt.subplots(2, len(corpora), figsize=(5.5 * len(corpora), 8.4), squeeze=False)
    for ax, corpus in zip(axes[0], corpora):
        rows = [r for r in results if r.corpus == corpus and r.bleu is not None]
        for name in dict.fromkeys(r.candidate for r in rows):
            mine = sorted((r for r in rows if r.candidate == name), key=lambda r: parse_time(r.budget))
            ax.plot([parse_time(r.budget) / 60 for r in mine], [r.bleu for r in mine], marker="o", label=name)
        picks = [r for r in rows if r.is_pick]
        ax.scatter(
            [parse_time(r.budget) / 60 for r in picks],
            [r.bleu for r in picks],
            s=180,
            facecolors="none",
            edgecolors="black",
            linewidths=1.5,
            label="the rule's pick",
            zorder=3,
        )
        ax.set_xscale("log")
        marks = sorted({r.budget for r in rows}, key=parse_time)
        ax.set_xticks([parse_time(b) / 60 for b in marks], marks)
        ax.minorticks_off()
        ax.set_xlabel("TIME of one core (the compute of the record's first machine), log scale")
        ax.set_ylabel("sacreBLEU (test)")
        ax.set_title(corpus)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax, corpus in zip(axes[1], corpora):
        fitted_curves(ax, [r for r in results if r.corpus == corpus])
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def fitted_curves(ax, results: Sequence[Result]) -> None:
    """One corpus's runs (a vocabulary of 8,000) and the rule's curve of each of their candidates."""
    import math

    from benchmarks.budget_fit import EPOCH_TOKENS, FIT_VOCABULARY, record_candidate
    from recipes.planner.budget import candidates, law, predictions

    runs = [r for r in results if r.valid_nll is not None and r.settings.get("VOCAB_SIZE") == str(FIT_VOCABULARY)]
    if not runs or runs[0].corpus not in EPOCH_TOKENS:
        ax.set_visible(False)
        return
    epoch = EPOCH_TOKENS[runs[0].corpus]

    def candidate(r: Result) -> "candidates.Candidate":
        return record_candidate(r.candidate, r.settings)

    floor = law.FLOORS.get(runs[0].corpus, law.FLOOR)

    def predicted(c, updates: float) -> float:
        return predictions.predicted_loss(c, int(updates), epoch, floor)

    shift = sum(r.valid_nll - predicted(candidate(r), r.stopped_at or r.updates) for r in runs) / len(runs)
    shapes = {}
    for r in runs:
        c = candidate(r)
        shapes.setdefault((c.model_flags, c.dropout, c.tokens_per_update), (c, []))[1].append(r)
    for c, mine in shapes.values():
        updates = [r.stopped_at or r.updates for r in mine]
        line = ax.scatter(updates, [r.valid_nll for r in mine], zorder=3)
        grid = [100 * 10 ** (i / 20) for i in range(int(20 * math.log10(30000 / 100)) + 1)]
        measured = [u for u in grid if min(updates) / 1.5 <= u <= max(updates) * 1.5]
        label = f"N={c.model.encoder_layers}, {c.tokens_per_update:,} tokens" + (
            f", P_drop {c.dropout:g}" if c.dropout != 0.1 else ""
        )
        ax.plot(measured, [predicted(c, u) + shift for u in measured], color=line.get_facecolor()[0], label=label)
        ax.plot(grid, [predicted(c, u) + shift for u in grid], color=line.get_facecolor()[0], linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("updates, log scale (dotted: the rule extrapolates)")
    ax.set_ylabel("valid loss, bits a piece of 8,000")
    ax.set_title(f"{runs[0].corpus}: the runs and the rule's curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
