"""recipes/lib.sh and its engine (recipes/engine/) from the shell, as the recipes use
them: stamps, what a stage makes, every stage decided before any work, stamps of an older format,
data from node 0, the launcher of data-parallel workers, Ctrl-C and kill, and failures explained."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import BIN, REPO, one_stage, processes_naming, user_env

RECIPE = r"""#!/usr/bin/env bash
# a recipe in miniature: data, vocabulary, training, scoring
set -euo pipefail
source "$LIB"
recipe_options "$0" "$@"
VOCAB=${VOCAB:-300}; STEPS=${STEPS:-10}; CORPUS=${CORPUS:-/dev/null}
[ "$DRY_RUN" = 1 ] || mkdir -p "$WORK"
stage 1 "data" bash -c 'echo data >> "$0/log"' "$WORK" "$CORPUS"
stage 2 "vocabulary of $VOCAB" bash -c 'echo "vocab $1" >> "$0/log"' "$WORK" "$VOCAB"
[ "${TRAIN:-1}" = 0 ] || stage 3 "train" train_workers 1 "$WORK/train.log" bash -c 'echo "train $1" >> "$0/log"; mkdir -p "$0/ckpt"; touch "$0/ckpt/checkpoint_last.pt"; [ -z "${FAIL_TRAIN:-}" ]' "$WORK" "$STEPS" --save-dir "$WORK/ckpt"
stage 4 "score" bash -c 'echo score >> "$0/log"' "$WORK" "$REPO/transformer_plugin" "${VENV_PYTHON:-python}"
run_stages
"""


def recipe(tmp_path, *args, script="recipe.sh", **variables):
    path = tmp_path / script
    path.write_text(RECIPE)
    env = user_env(
        **{"REPO": REPO, "LIB": os.path.join(REPO, "recipes", "lib.sh"), "WORK": tmp_path / "work", **variables}
    )
    proc = subprocess.run(["bash", str(path), *args], env=env, capture_output=True, text=True, timeout=60)
    log = tmp_path / "work" / "log"
    return proc, log.read_text().splitlines() if log.exists() else []


def test_a_rerun_with_the_same_settings_does_nothing(tmp_path):
    proc, log = recipe(tmp_path)
    assert proc.returncode == 0 and log == ["data", "vocab 300", "train 10", "score"], proc.stderr
    proc, log = recipe(tmp_path)
    assert proc.returncode == 0 and proc.stdout.count("done already with these settings: skipping") == 4
    assert log == ["data", "vocab 300", "train 10", "score"]


def test_a_stamp_is_json_naming_the_command_settings_and_inputs(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text("one\n")
    recipe(tmp_path, CORPUS=corpus)
    stamp = json.loads((tmp_path / "work" / ".done" / "1").read_text())
    assert stamp["command"] == ["bash", "-c", 'echo data >> "$0/log"', "$WORK", "$INPUT1"]
    assert stamp["inputs"][0]["path"] == str(corpus) and len(stamp["inputs"][0]["digest"]) == 32
    assert stamp["settings"] == {"CORPUS": str(corpus), "STEPS": "10", "VOCAB": "300"}
    assert not (tmp_path / "work" / ".done" / "1.settings").exists()


def test_a_changed_setting_redoes_its_stage_and_every_later_one(tmp_path):
    recipe(tmp_path, TRAIN="0")
    proc, log = recipe(tmp_path, "--dry-run", TRAIN="0", VOCAB="400")
    assert "a real run redoes this stage: its settings changed since it was done: VOCAB was 300, now 400" in proc.stdout
    assert (
        "a real run redoes this stage: stage 2, whose outputs it may read (it declares none), is redone (VOCAB was "
        "300, now 400)" in proc.stdout
    )
    assert proc.stdout.count("a real run skips this stage") == 1  # stage 1
    proc, log = recipe(tmp_path, TRAIN="0", VOCAB="400")
    assert proc.returncode == 0, proc.stderr
    assert log == ["data", "vocab 300", "score", "vocab 400", "score"]
    assert "redoing it: its settings changed since it was done: VOCAB was 300, now 400" in proc.stdout


def test_a_training_stage_that_would_be_redone_stops_the_recipe_before_any_work(tmp_path):
    recipe(tmp_path)
    for change, why in [
        (
            dict(VOCAB="400"),
            "stage 2, whose outputs it may read (it declares none), is redone (VOCAB was 300, now 400)",
        ),
        (dict(STEPS="20"), "its settings changed since it was done: STEPS was 10, now 20"),
    ]:
        proc, _ = recipe(tmp_path, "--dry-run", **change)
        assert proc.returncode == 0 and f"(a real run stops here: stage 3 (training) was done, but {why}" in proc.stdout
        proc, log = recipe(tmp_path, **change)
        assert proc.returncode == 3 and f"stage 3 (training) was done, but {why}" in proc.stderr
        assert "FAILED: stopped before any work (nothing was changed)" in proc.stderr
        assert log == ["data", "vocab 300", "train 10", "score"]  # nothing redone
        assert proc.stdout == ""  # not even a banner: nothing ran
        check = subprocess.run(
            ["bash", str(tmp_path / "recipe.sh"), "--check"],
            capture_output=True,
            text=True,
            env=user_env(REPO=REPO, LIB=os.path.join(REPO, "recipes", "lib.sh"), WORK=tmp_path / "work", **change),
        )
        assert check.returncode == 3 and f"stage 3 (training) was done, but {why}" in check.stderr
    # to train from scratch: delete the checkpoints and the stamp; to continue deliberately: only the stamp
    assert f"delete {tmp_path / 'work' / 'ckpt'} and {tmp_path / 'work' / '.done' / '3'};" in proc.stderr
    assert "delete " + str(tmp_path / "work" / ".done" / "3") + " only" in proc.stderr
    (tmp_path / "work" / ".done" / "3").unlink()
    proc, log = recipe(tmp_path, STEPS="20")
    assert proc.returncode == 0 and log[-2:] == ["train 20", "score"]


def test_a_training_stopped_before_it_was_done_continues_only_under_its_own_settings(tmp_path):
    """A training that failed or was stopped left its checkpoints and no stamp: with other settings the recipe stops
    before any work (it used to continue those checkpoints under them), with its own it continues them."""
    proc, log = recipe(tmp_path, FAIL_TRAIN="1")
    assert proc.returncode != 0 and log == ["data", "vocab 300", "train 10"]
    assert (tmp_path / "work" / ".done" / "3.begun").exists() and not (tmp_path / "work" / ".done" / "3").exists()
    proc, log = recipe(tmp_path, STEPS="20")
    assert proc.returncode == 3, proc.stderr
    assert (
        "stage 3 (training) was begun and stopped before it was done, but its settings changed since it was "
        "begun: STEPS was 10, now 20"
    ) in proc.stderr
    assert log == ["data", "vocab 300", "train 10"] and proc.stdout == ""  # nothing ran
    proc, log = recipe(tmp_path)
    assert proc.returncode == 0 and log[-2:] == ["train 10", "score"], proc.stderr
    assert (tmp_path / "work" / ".done" / "3").exists() and not (tmp_path / "work" / ".done" / "3.begun").exists()


def test_a_changed_input_outside_work_redoes_its_stage_and_a_copy_of_it_does_not(tmp_path):
    """The stamp records the identity of external inputs (the names, sizes and contents of the files below a
    path outside WORK and the checkout, such as FROM or TREEBANK), not their path or modification times."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text("one\n")
    recipe(tmp_path, TRAIN="0", CORPUS=corpus)
    copy = tmp_path / "elsewhere" / "corpus"
    time.sleep(0.01)
    shutil.copytree(corpus, copy)  # another path and other times: the same input
    proc, log = recipe(tmp_path, TRAIN="0", CORPUS=copy)
    assert proc.returncode == 0 and proc.stdout.count("skipping") == 3, proc.stdout
    (copy / "train.txt").write_text("one\ntwo\n")
    proc, log = recipe(tmp_path, TRAIN="0", CORPUS=copy)
    assert (
        proc.returncode == 0
        and f"redoing it: its inputs changed since it was done: the content of {copy} changed" in proc.stdout
    )
    assert "CORPUS was" not in proc.stdout  # the variable did not change: the files it names did
    assert log == ["data", "vocab 300", "score", "data", "vocab 300", "score"]


def test_the_recipes_do_not_read_the_makefiles_python(tmp_path):
    """`make test PYTHON=python3.12` exports PYTHON, the interpreter that makes the environment, to
    everything make runs; the recipes run the environment's python (VENV_PYTHON, or python on PATH)."""
    proc, log = recipe(tmp_path, PYTHON="/usr/bin/no-such-python3.12")
    assert proc.returncode == 0, proc.stderr
    assert log == ["data", "vocab 300", "train 10", "score"]


def test_a_recipe_outside_the_projects_environment_says_how_to_go_on(tmp_path):
    """No environment activated: the `python` on PATH lacks fairseq. The recipe stops before any stage."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").symlink_to(sys._base_executable)  # a Python without this project's packages
    env = dict(
        user_env(REPO=REPO, LIB=os.path.join(REPO, "recipes", "lib.sh"), WORK=tmp_path / "work"),
        PATH=f"{fake}:/usr/bin:/bin",
    )
    script = tmp_path / "recipe.sh"
    script.write_text(RECIPE)
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and not (tmp_path / "work").exists()
    assert ") cannot import fairseq " in proc.stderr  # the first of what it lacks
    assert "source .venv/bin/activate" in proc.stderr


# ---- stamps of an older format, another checkout, another environment -------------------------------------


def test_a_stamp_of_an_older_format_is_not_read_a_data_stage_is_redone_and_a_training_stops(tmp_path):
    """A stamp that is not JSON (a command line, as older versions of the recipes wrote): a data stage is redone,
    saying why, and a training stops before any work, naming the stamp's format."""
    recipe(tmp_path)
    (tmp_path / "work" / ".done" / "1").write_text('bash -c echo\\ data\\ \\>\\>\\ \\"\\$0/log\\" /w\n')
    proc, _ = recipe(tmp_path, "--dry-run")
    assert (
        proc.returncode == 0
        and "its stamp could not be read: a command line, as older versions of the recipes wrote" in proc.stdout
    ), proc.stdout
    (tmp_path / "work" / ".done" / "3").write_text("bash -c train\n")
    proc, log = recipe(tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (
        "stage 3 (training) was done, but its stamp could not be read: a command line, as older versions of the recipes wrote"
        in proc.stderr
    )
    assert log == ["data", "vocab 300", "train 10", "score"]  # nothing ran


def test_another_checkout_and_environment_continue_the_run(tmp_path):
    """The same WORK from a recipe elsewhere (another clone), run with a python at another path (another
    venv): every stage is done already."""
    recipe(tmp_path)
    (tmp_path / "clone").mkdir()
    venv = tmp_path / "other-venv"
    venv.symlink_to(os.path.dirname(BIN))  # the same environment at another path
    proc, log = recipe(
        tmp_path,
        script="clone/recipe.sh",
        REPO=tmp_path / "clone",
        VENV_PYTHON=venv / "bin" / "python",
        PATH=f"{venv / 'bin'}:{os.environ['PATH']}",
    )
    assert proc.returncode == 0 and proc.stdout.count("skipping") == 4, proc.stdout + proc.stderr


# ---- several machines: stamps, what a stage makes, data from node 0 ---------------------------------------

SPEED_RECIPE = r"""#!/usr/bin/env bash
# data prepared with a number of processes (a speed setting), binarised into a destination that must not exist
set -euo pipefail
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"
WORKERS=${WORKERS:-2}; VOCAB=${VOCAB:-300}; GPUS=${GPUS:-0}; BIN="$WORK/bin"
[ "$DRY_RUN" = 1 ] || mkdir -p "$WORK"
data_stage 1 "data" bash -c 'echo "data $1" >> "$0/log"' "$WORK" "$VOCAB" --workers "$WORKERS"
data_stage --clears "$BIN" 2 "binarise" bash -c 'mkdir "$0/bin" && echo "binarise" >> "$0/log"' "$WORK" --threads "$WORKERS"
run_stages
"""


def speed_recipe(tmp_path, *args, popen=False, **variables):
    script = tmp_path / "speed.sh"
    script.write_text(SPEED_RECIPE)
    env = user_env(REPO=REPO, WORK=tmp_path / "work", **variables)
    if popen:
        return subprocess.Popen(
            ["bash", str(script), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60)


def work_log(tmp_path):
    return (tmp_path / "work" / "log").read_text().splitlines()


def test_a_setting_that_changes_only_speed_redoes_nothing(tmp_path):
    """PREP_WORKERS on another machine (--workers, --threads), like MASTER_ADDR or DIST_TIMEOUT, changes how
    a stage runs, not what it makes."""
    assert speed_recipe(tmp_path, WORKERS="2").returncode == 0
    proc = speed_recipe(tmp_path, WORKERS="1", GPUS="1")
    assert proc.returncode == 0 and proc.stdout.count("done already with these settings: skipping") == 2
    assert work_log(tmp_path) == ["data 300", "binarise"]


def test_the_redo_message_names_only_the_variables_that_changed(tmp_path):
    """VOCAB went from 300 to 1; GPUS went from 0 to 1 too, but is not on the command line: not named,
    although its old and new values are words of the lines that changed."""
    speed_recipe(tmp_path, VOCAB="300", WORKERS="1", GPUS="0")
    proc = speed_recipe(tmp_path, VOCAB="1", WORKERS="0", GPUS="1")
    assert proc.returncode == 0, proc.stderr
    assert "redoing it: its settings changed since it was done: VOCAB was 300, now 1\n" in proc.stdout
    assert "GPUS was" not in proc.stdout and "WORKERS was" not in proc.stdout


def test_a_stage_that_runs_starts_from_an_empty_destination(tmp_path):
    """fairseq-preprocess refuses an existing destination (FileExistsError: dict.en.txt): a redone
    binarisation, or one after a failed run, clears it first; a skipped one leaves it."""
    speed_recipe(tmp_path)
    (tmp_path / "work" / "bin" / "kept").write_text("")
    assert speed_recipe(tmp_path).returncode == 0 and (tmp_path / "work" / "bin" / "kept").exists()
    proc = speed_recipe(tmp_path, VOCAB="400")  # stage 1 redone, so stage 2 too: it would fail on bin/
    assert proc.returncode == 0, proc.stderr
    assert work_log(tmp_path) == ["data 300", "binarise", "data 400", "binarise"]
    assert not (tmp_path / "work" / "bin" / "kept").exists()


def test_node1_waits_for_node0s_data_with_the_same_settings(tmp_path):
    """LAUNCH=torchrun, NODE_RANK=1: every data stage waits for node 0's stamp; node 1 writes none."""
    node1 = dict(LAUNCH="torchrun", NODE_RANK="1", DIST_TIMEOUT="60")
    waiting = speed_recipe(tmp_path, popen=True, **node1)
    try:
        time.sleep(5)
        assert waiting.poll() is None  # still waiting
        assert speed_recipe(tmp_path, WORKERS="4").returncode == 0  # node 0, with a speed setting of its own
        out, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err
    assert "node 1: waiting for node 0 to do this stage" in out and out.count("node 0 has done it") == 2
    assert work_log(tmp_path) == ["data 300", "binarise"]  # node 1 ran nothing
    assert sorted(os.listdir(tmp_path / "work" / ".done")) == ["1", "2"]
    other = speed_recipe(tmp_path, VOCAB="400", **node1)  # node 0 made the data with other settings
    assert other.returncode == 2 and "node 0 did stage 1 with other settings: was 300, now 400" in other.stderr
    (tmp_path / "nowhere").mkdir()
    alone = speed_recipe(tmp_path / "nowhere", **dict(node1, DIST_TIMEOUT="3"))  # node 0 never comes
    assert alone.returncode == 1 and "node 1 waited DIST_TIMEOUT=3 s for node 0's stage 1" in alone.stderr


def test_each_machines_stamps_are_its_own(tmp_path):
    """Node 1's training stamp goes to .done/node1: it never overwrites node 0's (which a re-run of node 0
    after a two-node run would otherwise read, and stop at)."""
    for rank in ("1", "0"):
        proc, _ = recipe(tmp_path, LAUNCH="torchrun", NODE_RANK=rank)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "work" / ".done" / "3").exists() and (tmp_path / "work" / ".done" / "node1" / "3").exists()
    proc, _ = recipe(tmp_path, LAUNCH="torchrun", NODE_RANK="0")
    assert proc.returncode == 0 and proc.stdout.count("skipping") == 4


# ---- processes: one failing worker, Ctrl-C, kill -----------------------------------------------------------

FAKE_WORKER = r"""#!/usr/bin/env bash
# rank 1 fails after a second; rank 0 would run for a minute (a worker left waiting on a dead peer)
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --distributed-rank ] && { j=$((i + 1)); rank=${!j}; }; done
echo "rank $rank started" > "$MARKERS/rank$rank"
if [ "$rank" = 1 ] && [ "$FAIL" = 1 ]; then sleep 1; exit 3; fi
exec sleep "${WORKER_SECONDS:-60}"  # one process, like fairseq-train
"""


def fake_worker(tmp_path):
    worker = tmp_path / "fake-train"
    worker.write_text(FAKE_WORKER)
    worker.chmod(0o755)
    return str(worker)


def test_one_failing_worker_stops_the_others(tmp_path):
    proc = one_stage(
        tmp_path,
        "train_workers",
        "2",
        str(tmp_path / "train.log"),
        fake_worker(tmp_path),
        "--some-flag",
        MARKERS=tmp_path,
        FAIL="1",
    )
    _, err = proc.communicate(timeout=45)  # rank 0 alone would take 60 s: it was stopped, not waited for
    assert proc.returncode == 3, err
    assert "a training worker failed (exit 3)" in err and "FAILED: stage 1: one stage (exit 3)" in err
    assert (tmp_path / "rank0").exists() and (tmp_path / "rank1").exists()
    assert not processes_naming(str(tmp_path / "fake-train"))


def started(tmp_path, ranks=2, timeout=30):
    deadline = time.time() + timeout
    while not all((tmp_path / f"rank{r}").exists() for r in range(ranks)):
        assert time.time() < deadline, "the workers did not start"
        time.sleep(0.1)


@pytest.mark.parametrize("how", ["SIGINT to the process group", "SIGTERM to the recipe", "SIGKILL to the recipe"])
def test_ctrl_c_or_kill_ends_every_process_the_recipe_started(tmp_path, how):
    """CPU workers: what a terminal's Ctrl-C sends (SIGINT to the foreground process group), `kill` of the
    recipe's shell, even `kill -9` of it: within seconds no worker is left, and the recipe says where to resume."""
    proc = one_stage(
        tmp_path, "train_workers", "2", str(tmp_path / "train.log"), fake_worker(tmp_path), MARKERS=tmp_path
    )
    started(tmp_path)
    sent = time.time()
    if how.startswith("SIGINT"):
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGTERM if "SIGTERM" in how else signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    deadline = time.time() + 20
    while processes_naming(str(tmp_path / "fake-train")) and time.time() < deadline:
        time.sleep(0.1)
    assert not processes_naming(str(tmp_path / "fake-train")), f"{how}: workers left behind"
    print(f"{how}: every worker ended {time.time() - sent:.1f} s after the signal")
    assert time.time() - sent < 15
    if how.startswith("SIGINT"):
        assert proc.returncode == 130
        assert (
            "FAILED: stage 1: one stage: stopped by SIGINT; every process it started has ended. Run the same "
            "command again to resume: training continues from the last checkpoint it saved" in err
        )
    assert not (tmp_path / "work" / ".done" / "1").exists()  # not done


def test_a_stage_that_runs_past_its_process_is_ended_with_it(tmp_path):
    """What a stage's process leaves running in its group (a data loader's worker, say) is ended with the
    stage, not left to the machine."""
    proc = one_stage(tmp_path, "bash", "-c", f'sleep 300 & echo $! > "{tmp_path}/left"; exit 0')
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    left = int((tmp_path / "left").read_text())
    deadline = time.time() + 15
    while os.path.exists(f"/proc/{left}") and time.time() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{left}") or open(f"/proc/{left}/stat").read().split()[2] == "Z"


# ---- a failure explained -----------------------------------------------------------------------------


def test_a_failed_launcher_says_why_and_how_to_resume(tmp_path):
    """launch_training: what stopped the launcher, read from its output (this run's only: the log holds an
    earlier run's too), and how to go on. The patterns' cases are unit tests (tests/unit/recipes/test_engine.py)."""
    log = tmp_path / "train.log"
    log.write_text("an earlier run's output: Connection reset by peer [10.9.9.9]:1\n")
    proc = one_stage(
        tmp_path,
        "launch_training",
        str(log),
        "bash",
        "-c",
        'echo "srun: error: node1: task 1: Killed"; exit 1',
        LAUNCH="torchrun",
        NODE_RANK="0",
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert (
        "training stopped: a task failed (node1: task 1: Killed), and srun ended the others. Once the cause is "
        f"gone, run the same command again on every machine: training resumes from checkpoint_last.pt (full log: {log})"
        in err
    )


def test_a_nohup_run_outlives_the_hang_up_of_its_terminal(tmp_path):
    """`nohup bash recipe.sh &`, then the terminal closes (SIGHUP to the recipe's process group): the engine kept
    nohup's ignored SIGHUP, and so did the stage's workers, which finish. Without nohup the same SIGHUP stops it."""
    for nohup in (True, False):
        where = tmp_path / ("nohup" if nohup else "plain")
        where.mkdir()
        script = where / "one_stage.sh"
        script.write_text('set -euo pipefail\nsource "$REPO/recipes/lib.sh"\nstage 1 "one stage" "$@"\nrun_stages\n')
        argv = ["nohup", "bash", str(script)] if nohup else ["bash", str(script)]
        proc = subprocess.Popen(
            [*argv, "train_workers", "2", str(where / "train.log"), fake_worker(where)],
            env=user_env(REPO=REPO, WORK=where / "work", MARKERS=where, WORKER_SECONDS="4"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
        )
        started(where)  # SIGHUP as a terminal leaves it (not as the tests' own process may have it, under nohup)
        os.killpg(proc.pid, signal.SIGHUP)
        _, err = proc.communicate(timeout=60)
        if nohup:
            assert proc.returncode == 0, err
            assert (where / "work" / ".done" / "1").exists()
        else:
            assert proc.returncode == -signal.SIGHUP and "stopped by SIGHUP" in err  # bash itself dies of it
        assert not processes_naming(str(where / "fake-train"))
