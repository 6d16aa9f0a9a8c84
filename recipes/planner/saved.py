"""The plan held in WORK: written once for a run, read back while the run goes on under the same settings, and
compared with what a dry run would decide now."""

import hashlib
import json
import os
import time
from dataclasses import asdict
from typing import Dict, List, Optional

from preprocess.corpora import count_lines, find_corpus
from recipes.planner import repick
from recipes.planner.after_training import check_export, decoding
from recipes.planner.decide import batch_layout, decide
from recipes.planner.plan import PLAN_VERSION, Plan
from recipes.planner.summary import summary
from recipes.planner.variables import SETTINGS, Variables
from transformer_plugin_cli.files import write_json


def decision_key(v: Variables) -> Dict:
    """What a plan is decided from, beside the speed this machine is measured at: the recipe's settings and the
    size of each corpus read. A plan held in WORK is read back while this is the same."""
    train = v.words("TRAIN")
    given = {
        name: v.given(name) for name in sorted(v.values) if name in SETTINGS and name not in ("TRAIN", "VALID", "TEST")
    }
    lines = {
        t: count_lines(c.tsv or c.source) for t, c in ((t, find_corpus(t, v.get("SRC"), v.get("TGT"))) for t in train)
    }
    return {"train": lines, "valid": v.words("VALID"), "test": v.words("TEST"), "settings": given}


def plan_file(work: str) -> str:
    return os.path.join(work, "plan.json")


def begun(work: str) -> bool:
    """Whether a run has begun in WORK: a stage of it is done (a stamp in WORK/.done)."""
    done = os.path.join(work, ".done")
    return os.path.isdir(done) and any(name[:1].isdigit() for name in os.listdir(done))


def kept_file(work: str, key: Dict) -> str:
    """Where WORK keeps the plan decided from ``key``: every plan a run in WORK was given, by what it was decided
    from, so that a run resumed with the settings it began with finds its own plan after another was tried."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(work, ".plans", f"{digest}.json")


def held(path: str) -> Optional[Plan]:
    """The plan in the file at ``path``, or None (none, or one this version does not read)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("version") != PLAN_VERSION:
            return None
        return Plan(**data)
    except (OSError, ValueError, TypeError):
        return None


def differences(before: Plan, now: Plan) -> List[str]:
    """What ``now`` would change of the plan ``before``: 'model.dropout: 0.1 -> 0.3', one a line."""
    found = []
    for part in ("corpus", "model", "batch", "budget", "schedule", "parent", "flags"):
        old, new = getattr(before, part) or {}, getattr(now, part) or {}
        for name in sorted(set(old) | set(new)):
            if name in ("training_time", "training_short", "training_seconds", "seconds_per_update"):
                continue  # how long it takes here: measured again, not the plan
            if old.get(name) != new.get(name):
                found.append(f"{part}.{name}: {old.get(name)!r} -> {new.get(name)!r}")
    return found


def plan_for(v: Variables, work: str, dry_run: bool, fresh: bool) -> Plan:
    """The plan of a run in WORK (module docstring): the one WORK keeps for the same key once the run has begun,
    else decided now and written (by a dry run only while no run has begun there)."""
    key = decision_key(v)
    latest, own = held(plan_file(work)), held(kept_file(work, key))
    # a training of this plan stopped for its model to be picked again, not yet decided (recipes/planner/repick.py)
    repicked = repick.held(work, key) if not dry_run else None
    if repicked and own is not None and own.budget.get("repicked") == repicked:
        repicked = None  # decided already: the run goes on with it
    if own is not None and own.key == key and not fresh and begun(work) and not repicked:
        # what only this machine tells is checked again (its CUDA devices, the SLURM allocation), and what comes after
        # training is read afresh
        batch_layout(v, own.batch["tokens_per_update"], own.batch["max_tokens_per_device"])
        parent = own.parent or {}
        check_export(v, own.model["model_flags"], "m2m100" if parent.get("PARENT_TGT_CODE") else "")
        own.flags["decoding"] = decoding(v, parent)
        if not dry_run and (latest is None or latest.key != key):
            write_json(plan_file(work), asdict(own))  # WORK's plan is again the one the run goes on with
        own.lines = [*summary(own, v), f"plan: the plan this run holds ({plan_file(work)}, decided {own.decided})"]
        return own
    plan = decide(v, repicked)
    plan.key, plan.decided = key, time.strftime("%Y-%m-%d %H:%M")
    if dry_run and begun(work):  # the plan of the run begun stays as it is
        changes = differences(latest, plan) if latest else ["(it holds no plan this version reads)"]
        plan.lines.append(
            f"plan: {plan_file(work)} holds the plan of the run begun in {work}, left as it is (a dry run); "
            + ("this would change: " + "; ".join(changes) if changes else "nothing of it would change")
        )
        return plan
    os.makedirs(work, exist_ok=True)
    write_json(plan_file(work), asdict(plan))
    if not dry_run:  # every plan a run is given, by its key
        os.makedirs(os.path.dirname(kept_file(work, key)), exist_ok=True)
        write_json(kept_file(work, key), asdict(plan))
    return plan
