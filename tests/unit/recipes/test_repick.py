"""recipes/planner/repick.py: what a plan hands a training for a re-pick, and the record the engine keeps of one (the
whole of it through a recipe: tests/integration/test_time_repick.py)."""

import json
import time
from types import SimpleNamespace

from recipes.planner import repick
from recipes.planner.variables import Variables


def variables(**given):
    return Variables({"TIME": "2h", "GPUS": "0", "CPU_WORKERS": "2", **given})


SPENT = {"SECONDS_PER_UPDATE": "2.0"}
BASE = SimpleNamespace(arch="vaswani_base", model_flags="--d-ff 1024 --attention-heads 4", tokens_per_update=4096)


def test_a_plan_the_rule_picked_for_time_hands_its_figures_to_the_training():
    handed = repick.for_training(variables(), 5400, SPENT, BASE)
    assert handed == {
        "time_seconds": 7200,
        "start_seconds": 60,
        "holds_down_to": 5400,
        "seconds_a_token": 2.0 / 4096,
        "within": repick.WITHIN,
        "model": "N=6, d_model 512, d_ff 1024",
    }


def test_no_repick_where_no_smaller_model_would_be_picked_or_the_model_is_not_the_rules_to_change():
    assert repick.for_training(variables(), 120, SPENT, BASE) is None  # it holds down to the least TIME
    assert repick.for_training(variables(), 7200, SPENT, BASE) is None
    assert repick.for_training(variables(INIT="parent"), 5400, SPENT, BASE) is None  # the parent's model
    assert repick.for_training(variables(TOY="1"), 5400, SPENT, BASE) is None
    assert repick.for_training(variables(NNODES="2"), 5400, SPENT, BASE) is None  # each machine would decide apart
    assert repick.for_training(variables(TIME=""), 5400, SPENT, BASE) is None


def test_the_engine_sets_the_checkpoints_aside_and_keeps_the_record_for_this_plan_only(tmp_path):
    work, checkpoints = tmp_path / "w", tmp_path / "w" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "checkpoint_last.pt").write_bytes(b"x")
    request = {"factor": 3.0, "at_update": 40, "time_left_seconds": 7100}
    (checkpoints / repick.REQUEST).write_text(json.dumps(request))
    key = {"settings": {"TIME": "2h"}}
    (work / "plan.json").write_text(json.dumps({"key": key}))
    (tmp_path / "w" / "checkpoints.repicked").mkdir()  # an earlier re-pick's: replaced
    assert repick.asked(str(checkpoints)) == request
    assert repick.asked(str(checkpoints), since=time.time() + 60) is None  # one left before the stage began
    record = repick.set_aside(str(work), str(checkpoints), 99.6)
    assert record == {**request, "training_wall_seconds": 100, "key": key}
    assert not checkpoints.exists() and (work / "checkpoints.repicked" / "checkpoint_last.pt").exists()
    assert repick.held(str(work), key) == record and repick.held(str(work), {"settings": {}}) is None
    # the plan for the time left: TIME less the training's wall time
    assert repick.slowed(variables(), record).get("TIME") == "7100s"
    assert repick.asked(str(tmp_path / "none")) is None
