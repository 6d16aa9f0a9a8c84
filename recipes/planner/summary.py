"""The lines a recipe prints of its plan: the corpus and the model; what was picked; how long it takes; notes."""

from typing import List

from recipes.planner import finetuning
from recipes.planner.plan import Plan
from recipes.planner.repick import said
from recipes.planner.variables import Variables

# a GPU given fewer tokens an update than this is mostly idle (its matrix products too small to fill it)
SMALL_SHARE = 512


def summary(plan: Plan, v: Variables) -> List[str]:
    """The lines the recipe prints of its plan: the corpus and the model; what was picked; how long it takes."""
    m, b, budget = plan.model, plan.batch, plan.budget
    src, tgt = v.get("SRC"), v.get("TGT")
    pairs, size_class = plan.corpus["pairs"], plan.corpus["size_class"]
    if plan.parent:
        p = plan.parent
        drop = "" if m["dropout"] == p["PARENT_DROPOUT"] else f", P_drop {m['dropout']} here"
        lines = [
            f"{src}-{tgt}: {pairs} lines, fine-tuning {v.get('INIT')}: {p['PARENT_SUMMARY']}{drop}; its vocabulary; "
            f"{b['batch_summary']}",
            f"picked: the parent's model, {budget['max_update']} updates, Eq. (3) warming up over "
            f"{plan.schedule['warmup']} (fine-tuning)",
        ]
        if plan.schedule.get("finetuning"):
            lines[1] = "picked: " + finetuning.FineTuning(**plan.schedule["finetuning"]).picked_line()
    else:
        model = " ".join(filter(None, (m["arch"], m["model_flags"])))
        vocabulary = "a joint vocabulary" if m["joint"] else "a vocabulary per side"
        lines = [
            f"{src}-{tgt}: {pairs} lines, {size_class}: {model} P_drop {m['dropout']}, {vocabulary} of "
            f"{m['vocab_size']}; {b['batch_summary']}"
        ]
        if not v.toy:
            if plan.choice["picked_by_rule"]:
                lines.append(f"picked: {plan.choice['picked_line']}")
            else:
                lines.append(
                    "picked: your settings (ARCH, MODEL_FLAGS, DROPOUT, TOKENS_PER_UPDATE or VOCAB_SIZE given), "
                    f"{budget['max_update']} updates"
                )
    if budget.get("repicked"):
        lines += said(budget["repicked"])
    lines.append(f"time: training {budget['training_short']}")
    if budget.get("whole_run"):
        lines.append(f"time: {budget['whole_run']}")
    lines += [f"note: {n}" for n in plan.choice.get("notes", [])]
    devices = int(b.get("devices") or 1)
    share = b["tokens_per_update"] // devices
    if int(v.get("GPUS") or 0) > 0 and devices > 1 and share < SMALL_SHARE:
        lines.append(
            f"note: each of the {devices} GPUs gets {share:,} tokens an update and computes little: fewer would do"
        )
    if plan.choice.get("busy"):
        lines.append(
            f"speed: measured while this machine was busy ({'; '.join(plan.choice['busy'])}): the plan may be too "
            "short; REPROBE=1 once it is quiet measures again"
        )
    if v.get("EXPLAIN", "0") == "1":
        lines += ["why:", plan.choice["explain"], f"training: about {budget['training_time']}"]
    if int(v.get("GPUS")) == 0 and not v.get("TIME") and not v.toy and int(budget["training_seconds"]) > 8 * 3600:
        lines.append(
            "more than a working day on CPU workers: TIME=8h picks what 8 hours train best here, or a GPU: GPUS=1"
        )
    return lines
