"""A TIME run that measures its machine far slower than its plan early on stops for the model to be picked again
(transformer_plugin/patches/time_repick.py, recipes/planner/repick.py): fairseq-train itself, on one worker and two;
the engine's part and the recipe's start again (tests/unit/recipes/test_repick.py)."""

import json
import os
import re
import subprocess

import pytest
from helpers import free_port
from test_time_that_holds import train

from recipes.planner import repick
from recipes.planner.layout import worker_commands
from transformer_plugin.patches import time_repick

# what the recipes hand over for a plan of TIME=10m whose model holds down to 500 s of the probe's speed
HANDED = {"time_seconds": 600, "start_seconds": 60, "holds_down_to": 500, "within": 0.25, "model": "tiny"}


def handed(seconds_a_token):
    return dict(os.environ, TRANSFORMER_PLUGIN_REPICK=json.dumps({**HANDED, "seconds_a_token": seconds_a_token}))


def test_the_plugin_and_the_planner_agree_on_the_exit_status_and_the_request():
    assert time_repick.EXIT == repick.EXIT and time_repick.REQUEST == repick.REQUEST
    assert time_repick.LEAST_SECONDS == repick.LEAST_SECONDS


def test_a_repick_is_worth_it_only_where_the_time_left_no_longer_buys_the_model():
    given = {**HANDED, "seconds_a_token": 1e-4}
    # 2 s an update of 10,000 tokens: twice the plan's; TIME's 600 s are worth 60 + 540 / 2 = 330 s, under 500
    found = time_repick.worth(given, 2.0, 10_000, 40)
    assert found["factor"] == 2.0 and found["worth_at_the_plan_speed"] == 330 and found["time_left_seconds"] == 560
    # 10% slower: within what the updates' re-plan absorbs, even where the model would hold only down to 580 s
    assert time_repick.worth(given, 1.1, 10_000, 40) is None
    assert time_repick.worth({**given, "holds_down_to": 580}, 1.1, 10_000, 40) is None
    # 1.3 times slower: 60 + 540 / 1.3 = 475 s, still under 500: worth it; with TIME=750 s it is not
    assert time_repick.worth(given, 1.3, 10_000, 40) is not None
    assert time_repick.worth({**given, "time_seconds": 750}, 1.3, 10_000, 40) is None
    # fewer tokens an update than the probe's (fairseq's batches), at the plan's speed a token: no re-pick
    assert time_repick.worth(given, 0.8, 8_000, 40) is None
    # less than the least TIME left: none
    assert time_repick.worth(given, 2.0, 10_000, 490) is None


@pytest.mark.e2e
def test_far_slower_than_its_plan_a_training_stops_at_its_second_interval_for_a_repick(data_bin, tmp_path):
    """The plan's seconds a target token a thousandth of this machine's: at its second logged interval (update 4) the
    run stops, saved and not validated, writes repick.json and exits with status 75; at the plan's speed it trains
    on. Each said in the log."""
    save_dir = tmp_path / "ckpt"
    argv = train(data_bin, save_dir)
    argv[argv.index("--stop-time-hours") + 1] = f"{540 / 3600:.6f}"
    proc = subprocess.run(argv, env=handed(1e-7), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == repick.EXIT, log[-3000:]
    request = json.loads((save_dir / "repick.json").read_text())
    assert request["at_update"] == 4 and request["factor"] > 100 and request["model"] == "tiny"
    assert request["tokens_an_update"] > 0 and request["holds_down_to"] == 500
    assert "time: re-pick at update 4: " in log and "training stops here for the recipe to pick the model again" in log
    assert (save_dir / "checkpoint_last.pt").exists()
    assert '"valid_loss"' not in log and "| valid |" not in log  # no validation of a model set aside
    assert "re-planned" not in log

    calm = tmp_path / "calm"
    argv = train(data_bin, calm)
    argv[argv.index("--max-update") + 1] = "8"
    argv[argv.index("--stop-time-hours") + 1] = f"{540 / 3600:.6f}"
    proc = subprocess.run(argv, env=handed(1.0), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert not (calm / "repick.json").exists() and "re-pick" not in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_two_workers_stop_for_the_repick_together(data_bin, tmp_path):
    argv = train(data_bin, tmp_path / "ckpt")
    argv[argv.index("--stop-time-hours") + 1] = f"{540 / 3600:.6f}"
    procs = [
        subprocess.Popen(command, env=handed(1e-7), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in worker_commands(2, argv, str(free_port()))
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == repick.EXIT, f"rank {rank}:\n{out[-3000:]}"
    assert json.loads((tmp_path / "ckpt" / "repick.json").read_text())["at_update"] == 4


# fairseq-train as the recipe runs it on 2 CPU workers, standing in for a training that measures its machine three
# times slower than the plan at its second interval: where handed a re-pick's figures, each worker exits 75 and the
# first writes the request as the plugin does; handed none (the recipe's second start), each records its arguments
# and fails, ending the test's recipe there
FAKE_TRAINING = """#!{python}
import json, os, sys
from transformer_plugin.patches.time_repick import REQUEST, EXIT, worth
rank = sys.argv[sys.argv.index("--distributed-rank") + 1]
handed = os.environ.get("TRANSFORMER_PLUGIN_REPICK", "")
with open(os.path.join(os.path.dirname(sys.argv[0]), f"calls.{{rank}}.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "handed": handed}}) + "\\n")
if not handed:
    sys.exit(3)
if rank != "0":
    sys.exit(EXIT)
given = json.loads(handed)
found = worth(given, 3 * given["seconds_a_token"] * 2000, 2000, 5.0)
found.update(at_update=40, seconds_an_update=3 * given["seconds_a_token"] * 2000, tokens_an_update=2000)
save_dir = sys.argv[sys.argv.index("--save-dir") + 1]
os.makedirs(save_dir, exist_ok=True)
open(os.path.join(save_dir, "checkpoint_last.pt"), "wb").close()
json.dump(found, open(os.path.join(save_dir, REQUEST), "w"))
sys.exit(EXIT)
"""


@pytest.fixture
def corpus(tmp_path):
    from helpers import corpus as write_corpus
    from helpers import known_speed_figures, real_english_german

    (tmp_path / "corpus").mkdir()
    write_corpus(tmp_path / "corpus", real_english_german(6000))
    known_speed_figures(tmp_path / "cache", vocab=500)  # the full-size models' figures at this corpus's vocabulary
    return tmp_path / "corpus"


@pytest.mark.e2e
def test_a_recipe_whose_training_stops_for_a_repick_starts_again_with_a_smaller_model_for_the_time_left(
    corpus, tmp_path
):
    """TIME=2h on 6,000 pairs picks 6 layers of 512 (d_ff 1024) at these figures, and holds down to about 90 min; its
    training measures the machine 3 times slower and stops: the engine sets its checkpoints aside, the recipe starts
    again (once), and the plan for the time left at that speed picks a smaller model, says why, and hands no re-pick
    on. The second training's command is the new plan's."""
    import sys

    from helpers import BIN, run_recipe

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "fairseq-train").write_text(FAKE_TRAINING.format(python=sys.executable))
    (fake / "fairseq-train").chmod(0o755)
    work = tmp_path / "w"
    variables = dict(TRAIN=str(corpus / "train"), SRC="en", TGT="de", MIN_PAIRS="5000", GPUS="0", TIME="2h")
    proc = run_recipe(
        "parallel_text.sh",
        work,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PATH=f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
        **variables,
    )
    out = proc.stdout + proc.stderr
    calls = [json.loads(line) for line in (fake / "calls.0.jsonl").read_text().splitlines()]
    assert len(calls) == 2 and proc.returncode == 3, out[-4000:]
    others = [json.loads(line) for line in (fake / "calls.1.jsonl").read_text().splitlines()]
    assert [c["handed"] for c in others] == [c["handed"] for c in calls]  # both workers, both times
    first, second = (json.loads(c["handed"]) if c["handed"] else None for c in calls)
    assert first["model"] == "N=6, d_model 512, d_ff 1024" and 0 < first["holds_down_to"] < 7200
    assert second is None  # once: a re-picked plan hands no re-pick on

    def flag(argv, name):
        return argv[argv.index(name) + 1]

    before, after = calls[0]["argv"], calls[1]["argv"]
    assert flag(before, "--encoder-layers" if "--encoder-layers" in before else "--arch") != flag(
        after, "--encoder-layers"
    )
    record = json.loads((work / "repick.json").read_text())
    plan = json.loads((work / "plan.json").read_text())
    assert plan["budget"]["repicked"] == record and plan["budget"]["repick"] is None
    assert record["factor"] == 3.0 and record["training_wall_seconds"] >= 0
    left = 7200 - record["training_wall_seconds"]
    assert flag(after, "--stop-time-hours") == f"{(left - 60) / 3600:.4f}"
    assert (work / "checkpoints.repicked" / "checkpoint_last.pt").exists()
    assert not (work / "checkpoints" / "checkpoint_last.pt").exists()  # the second training starts afresh
    assert "==== the model picked again for the time left ====" in out
    again = proc.stdout.split("==== the model picked again for the time left ====")[1]
    said = [line for line in again.splitlines() if line.startswith("time: ")]
    assert said[0].startswith("time: re-picked after 40 updates (") and said[0].endswith(
        "s, set aside in CHECKPOINTS.repicked): training took 3.00 times the probe's seconds a target token"
    )
    assert re.fullmatch(
        r"time: at that speed TIME is worth 2,440 s of the probe's, under the [\d,]+ s N=6, d_model 512, d_ff 1024 "
        r"needs; the plan is for the time left",
        said[1],
    )
    assert re.search(r"^picked: N=3 x d_model 256, d_ff 1024, P_drop 0\.3", again, re.M)
    assert "training stopped after 40 updates for the model to be picked again" in out
