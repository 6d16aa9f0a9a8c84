"""The model picked again for TIME, where the training found the machine slower than the probe early on.

The plan picks the model TIME buys at the probe's speed. A machine loaded after the probe (another run started, a
core taken) trains the same model slower: its run re-plans the updates that fit (transformer_plugin/patches/
training_progress.py), but the model was the pick for the faster machine. For a plan the budget rule picked with
TIME, fairseq-train is handed (:func:`for_training`, ``TRANSFORMER_PLUGIN_REPICK``) the probe's seconds a target
token and the fewest seconds at which the rule still picks this model (``holds_down_to``: a larger budget never
picks a smaller model, so below it the rule picks a smaller one). Where a training, within its first quarter,
measures the machine more than 20% slower and TIME at that speed is worth less than that at the probe's (the rule
would have picked another model, had it known the speed), it stops (transformer_plugin/patches/time_repick.py,
exit status EXIT); the engine sets its checkpoints aside as ``CHECKPOINTS.repicked`` and writes :data:`RECORD` in
WORK with the training's wall time (:func:`set_aside`); the recipe starts again, and this plan is decided for the
time left, every speed figure times the factor measured (:func:`slowed`). Once only: a re-picked plan hands no
re-pick on. Not with INIT (the model is the parent's), a model or batch given, toy runs, or several machines (each
would decide apart).
"""

import json
import os
import shutil
from typing import Dict, List, Optional

from recipes.planner.budget.rule import LEAST_SECONDS
from recipes.planner.model import Model
from recipes.planner.probe_arithmetic import TIME_STARTUP_SECONDS, parse_time
from recipes.planner.variables import Variables

REQUEST = "repick.json"  # in the training's --save-dir, by fairseq-train (transformer_plugin/patches/time_repick.py)
RECORD = "repick.json"  # in WORK, by the engine: the request, the training's wall time and the plan's key
EXIT = 75  # fairseq-train's exit status when it stopped for a re-pick (time_repick.EXIT)
WITHIN = 0.25  # a re-pick only within this share of the training's time: past it, the training has gone far
SET_ASIDE = ".repicked"  # the checkpoints of the training stopped: CHECKPOINTS.repicked (the last such run's)


def for_training(v: Variables, holds_down_to: int, spent: Dict[str, str], decided) -> Optional[Dict]:
    """What fairseq-train is handed (TRANSFORMER_PLUGIN_REPICK) for a plan the rule picked for TIME, or None where
    no re-pick may come (module docstring; ``holds_down_to`` at TIME's least: no smaller model to pick). ``spent``:
    the plan's time figures (SECONDS_PER_UPDATE); ``decided``: its model and batch (decide.Decided)."""
    time_text = v.get("TIME")
    per_update = float(spent.get("SECONDS_PER_UPDATE") or 0)
    if not time_text or v.get("INIT") or v.toy or int(v.get("NNODES") or 1) > 1 or not per_update:
        return None
    seconds = parse_time(time_text)
    if not LEAST_SECONDS < holds_down_to < seconds:
        return None
    return {
        "time_seconds": seconds,
        "start_seconds": TIME_STARTUP_SECONDS,
        "holds_down_to": holds_down_to,
        "seconds_a_token": per_update / decided.tokens_per_update,
        "within": WITHIN,
        "model": Model.from_flags(decided.arch, decided.model_flags).described(),
    }


def asked(save_dir: str, since: float = 0.0) -> Optional[Dict]:
    """The request a training left in ``save_dir`` as it stopped for a re-pick (written after ``since``, a time), or
    None."""
    path = os.path.join(save_dir, REQUEST)
    try:
        if os.path.getmtime(path) < since:
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def set_aside(work: str, save_dir: str, seconds: float) -> Dict:
    """The engine's part, once the training stopped for a re-pick after ``seconds`` of wall time: its checkpoints
    moved to SAVE_DIR.repicked (an earlier one there removed), and the record written in WORK with the plan's key, so
    that the plan decided next (:func:`held`) is the re-pick of this run and of no other."""
    request = asked(save_dir) or {}
    try:
        with open(os.path.join(work, "plan.json"), encoding="utf-8") as f:
            key = json.load(f).get("key")
    except (OSError, ValueError):
        key = None
    record = {**request, "training_wall_seconds": round(seconds), "key": key}
    aside = save_dir.rstrip("/") + SET_ASIDE
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(save_dir, aside)
    with open(os.path.join(work, RECORD), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    return record


def held(work: str, key: Dict) -> Optional[Dict]:
    """The re-pick a training of this plan (``key``) asked for, or None."""
    try:
        with open(os.path.join(work, RECORD), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if record.get("key") == key and record.get("factor") else None


def time_left(v: Variables, record: Dict) -> int:
    """TIME's seconds less the wall time of the training stopped."""
    return parse_time(v.get("TIME")) - int(record["training_wall_seconds"])


def slowed(v: Variables, record: Dict) -> Variables:
    """The variables a re-pick is decided from: TIME the time left (a TIME of its own: fairseq's --stop-time-hours and
    the start it leaves follow)."""
    return Variables({**v.values, "TIME": f"{time_left(v, record)}s"})


def said(record: Dict) -> List[str]:
    """The plan's lines of a re-pick, for people (the picked line names the new model)."""
    return [
        f"time: re-picked after {record['at_update']:,} updates ({record['training_wall_seconds']:,} s, set aside in "
        f"CHECKPOINTS{SET_ASIDE}): training took {record['factor']:.2f} times the probe's seconds a target token",
        f"time: at that speed TIME is worth {record['worth_at_the_plan_speed']:,} s of the probe's, under the "
        f"{record['holds_down_to']:,} s {record['model']} needs; the plan is for the time left",
    ]
