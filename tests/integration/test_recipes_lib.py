"""recipes/lib.sh: the launcher of data-parallel workers stops all of them when one fails; stamps, what a
stage makes, data from node 0 and failures explained on several machines."""

import os
import shlex
import subprocess
import sys
import time

import pytest

from helpers import REPO

FAKE_WORKER = r"""#!/usr/bin/env bash
# rank 1 fails after a second; rank 0 would run for a minute (a worker left waiting on a dead peer)
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --distributed-rank ] && { j=$((i + 1)); rank=${!j}; }; done
echo "rank $rank started" > "$MARKERS/rank$rank"
if [ "$rank" = 1 ]; then sleep 1; exit 3; fi
exec sleep 60  # one process, like fairseq-train
"""


def test_one_failing_worker_stops_the_others(tmp_path):
    worker = tmp_path / "fake-train"
    worker.write_text(FAKE_WORKER)
    worker.chmod(0o755)
    script = f'set -euo pipefail; WORK="{tmp_path}"; source "{REPO}/recipes/lib.sh"; ' \
             f'train_workers 2 "{tmp_path}/train.log" "{worker}" --some-flag'
    env = dict(os.environ, MARKERS=str(tmp_path), VENV_PYTHON=sys.executable)
    # rank 0 alone would take 60 s: finishing within the timeout means it was stopped, not waited for
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=45)
    assert proc.returncode == 3, proc.stderr
    assert "a training worker failed (exit 3)" in proc.stderr
    assert (tmp_path / "rank0").exists() and (tmp_path / "rank1").exists()


RECIPE = r"""#!/usr/bin/env bash
# a recipe in miniature: data, vocabulary, training, scoring
set -euo pipefail
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"
VOCAB=${VOCAB:-300}; STEPS=${STEPS:-10}; CORPUS=${CORPUS:-/dev/null}
[ "$DRY_RUN" = 1 ] || mkdir -p "$WORK"
stage 1 "data" bash -c 'echo data >> "$0/log"' "$WORK" "$CORPUS"
stage 2 "vocabulary of $VOCAB" bash -c 'echo "vocab $1" >> "$0/log"' "$WORK" "$VOCAB"
[ "${TRAIN:-1}" = 0 ] || stage 3 "train" train_workers 1 "$WORK/train.log" bash -c 'echo "train $1" >> "$0/log"' "$WORK" "$STEPS" --save-dir "$WORK/ckpt"
stage 4 "score" bash -c 'echo score >> "$0/log"' "$WORK"
"""


def recipe(tmp_path, *args, **variables):
    script = tmp_path / "recipe.sh"
    script.write_text(RECIPE)
    env = dict(os.environ, REPO=str(REPO), WORK=str(tmp_path / "work"), VENV_PYTHON=sys.executable, **variables)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # the project's .venv, as after make
    proc = subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60)
    log = tmp_path / "work" / "log"
    return proc, log.read_text().splitlines() if log.exists() else []


def test_a_rerun_with_the_same_settings_does_nothing(tmp_path):
    proc, log = recipe(tmp_path)
    assert proc.returncode == 0 and log == ["data", "vocab 300", "train 10", "score"]
    proc, log = recipe(tmp_path)
    assert proc.returncode == 0 and proc.stdout.count("done already with these settings: skipping") == 4
    assert log == ["data", "vocab 300", "train 10", "score"]


def test_a_changed_setting_redoes_its_stage_and_every_later_one(tmp_path):
    recipe(tmp_path, TRAIN="0")
    proc, log = recipe(tmp_path, "--dry-run", TRAIN="0", VOCAB="400")
    assert "a real run redoes this stage: its settings changed since it was done: VOCAB was 300, now 400" in proc.stdout
    assert "a real run redoes this stage: stage 2, whose outputs it reads, is redone (VOCAB was 300, now 400)" in proc.stdout
    assert proc.stdout.count("a real run skips this stage") == 1  # stage 1
    proc, log = recipe(tmp_path, TRAIN="0", VOCAB="400")
    assert proc.returncode == 0, proc.stderr
    assert log == ["data", "vocab 300", "score", "vocab 400", "score"]
    assert "redoing it: its settings changed since it was done: VOCAB was 300, now 400" in proc.stdout


def test_a_training_stage_that_would_be_redone_stops_the_recipe_before_any_work(tmp_path):
    recipe(tmp_path)
    for change, why in [(dict(VOCAB="400"), "stage 2, whose outputs it reads, is redone (VOCAB was 300, now 400)"),
                        (dict(STEPS="20"), "its settings changed since it was done: STEPS was 10, now 20")]:  # fmt: skip
        proc, _ = recipe(tmp_path, "--dry-run", **change)
        assert proc.returncode == 0 and f"(a real run stops here: stage 3 (training) was done, but {why}" in proc.stdout
        proc, log = recipe(tmp_path, **change)
        assert proc.returncode == 3 and f"stage 3 (training) was done, but {why}" in proc.stderr
        assert "FAILED: stopped before any work (nothing was changed)" in proc.stderr
        assert log == ["data", "vocab 300", "train 10", "score"]  # nothing redone
    # to train from scratch: delete the checkpoints and the stamp; to continue deliberately: only the stamp
    assert f"delete {tmp_path / 'work' / 'ckpt'} and {tmp_path / 'work' / '.done' / '3'};" in proc.stderr
    assert "delete " + str(tmp_path / "work" / ".done" / "3") + " only" in proc.stderr
    (tmp_path / "work" / ".done" / "3").unlink()
    proc, log = recipe(tmp_path, STEPS="20")
    assert proc.returncode == 0 and log[-2:] == ["train 20", "score"]


def test_a_changed_input_outside_work_redoes_its_stage(tmp_path):
    """The stamp records the identity of external inputs (names, sizes and times of the files below a
    path outside WORK and the repository, such as FROM or TREEBANK), not only the command line."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text("one\n")
    recipe(tmp_path, TRAIN="0", CORPUS=str(corpus))
    proc, log = recipe(tmp_path, TRAIN="0", CORPUS=str(corpus))
    assert log == ["data", "vocab 300", "score"]  # unchanged: skipped
    (corpus / "train.txt").write_text("one\ntwo\n")
    proc, log = recipe(tmp_path, TRAIN="0", CORPUS=str(corpus))
    assert proc.returncode == 0 and "redoing it: its settings or inputs changed since it was done" in proc.stdout
    assert "CORPUS was" not in proc.stdout  # the variable did not change: the files it names did
    assert log == ["data", "vocab 300", "score", "data", "vocab 300", "score"]


def test_the_recipes_do_not_read_the_makefiles_python(tmp_path):
    """`make test PYTHON=python3.12` exports PYTHON, the interpreter that makes the environment, to
    everything make runs; the recipes run the environment's python (VENV_PYTHON, or python on PATH)."""
    proc, log = recipe(tmp_path, PYTHON="/usr/bin/no-such-python3.12")
    assert proc.returncode == 0, proc.stderr
    assert log == ["data", "vocab 300", "train 10", "score"]


def test_precision_names_give_fairseq_train_flags():
    script = f'source "{REPO}/recipes/lib.sh"; for p in fp32 fp16 bf16 amp; do precision_args $p; echo "$p:${{PRECISION_ARGS[*]:-}}"; done'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.stdout.split() == ["fp32:", "fp16:--fp16", "bf16:--bf16", "amp:--amp"], proc.stderr


def test_a_recipe_outside_the_projects_environment_says_how_to_go_on(tmp_path):
    """No environment activated: the `python` on PATH lacks fairseq. The recipe stops before any stage."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").symlink_to(sys._base_executable)  # a Python without this project's packages
    env = dict(os.environ, REPO=str(REPO), WORK=str(tmp_path / "work"), PATH=f"{fake}:/usr/bin:/bin")
    env.pop("VENV_PYTHON", None)
    script = tmp_path / "recipe.sh"
    script.write_text(RECIPE)
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and not (tmp_path / "work").exists()
    assert ") cannot import fairseq " in proc.stderr  # the first of what it lacks
    assert "source .venv/bin/activate" in proc.stderr


# ---- several machines: stamps, what a stage makes, data from node 0, a failure explained -------------

SPEED_RECIPE = r"""#!/usr/bin/env bash
# data prepared with a number of processes (a speed setting), binarised into a destination that must not exist
set -euo pipefail
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"
WORKERS=${WORKERS:-2}; VOCAB=${VOCAB:-300}; GPUS=${GPUS:-0}; BIN="$WORK/bin"
[ "$DRY_RUN" = 1 ] || mkdir -p "$WORK"
data_stage 1 "data" bash -c 'echo "data $1" >> "$0/log"' "$WORK" "$VOCAB" --workers "$WORKERS"
data_stage --clears "$BIN" 2 "binarise" bash -c 'mkdir "$0/bin" && echo "binarise" >> "$0/log"' "$WORK" --threads "$WORKERS"
"""


def speed_recipe(tmp_path, *args, timeout=60, **variables):
    script = tmp_path / "speed.sh"
    script.write_text(SPEED_RECIPE)
    env = dict(os.environ, REPO=str(REPO), WORK=str(tmp_path / "work"), VENV_PYTHON=sys.executable, **variables)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=timeout)


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
    script = tmp_path / "speed.sh"
    script.write_text(SPEED_RECIPE)
    env = dict(os.environ, REPO=str(REPO), WORK=str(tmp_path / "work"), VENV_PYTHON=sys.executable, **node1)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    waiting = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    assert sorted(os.listdir(tmp_path / "work" / ".done")) == ["1", "1.settings", "2", "2.settings"]
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


@pytest.mark.parametrize("output, says", [
    ("RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [10.213.0.2]:10903: Connection reset by peer.",
     "the connection to the worker at 10.213.0.2 was lost"),
    ("RuntimeError: [pair.cc:589] Connection closed by peer [10.1.2.3]:62134", "the connection to the worker at 10.1.2.3 was lost"),
    ("RuntimeError: [unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete",
     "no word from the other machines for DIST_TIMEOUT=20 s"),
    ("torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 1/2 clients joined.",
     "not every machine joined torchrun's rendezvous at node0:29500 within DIST_TIMEOUT=20 s"),
    ("torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (10.0.0.1, 29500)",
     "node 0's rendezvous at node0:29500 did not answer within DIST_TIMEOUT=20 s"),
    ("srun: error: node1: task 1: Killed\nsrun: Terminating StepId=12.0", "a task failed (node1: task 1: Killed), and srun ended the others"),
    # the killed task's peer saw its connection close before srun ended it: the death is the cause, in either order
    ("[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [10.213.0.2]:17562\nsrun: error: node0: task 0: Terminated\n"
     "srun: error: node1: task 1: Killed", "a task failed (node1: task 1: Killed), and srun ended the others"),
    # a task that exited on an error of its own (here a timeout) is no signal death: its message says why
    ("RuntimeError: Timed out waiting 20000ms for recv\nsrun: error: node0: task 0: Exited with exit code 1",
     "no word from the other machines for DIST_TIMEOUT=20 s"),
    ("srun: error: node1: task 1: Exited with exit code 1\nsrun: error: node0: task 0: Terminated",
     "a task failed (node1: task 1: Exited with exit code 1), and srun ended the others"),
    ("  exitcode  : -9 (pid: 5303)\n  error_file: <N/A>", "a training process on this machine failed (exitcode : -9 (pid: 5303))"),
    ("Traceback: ValueError: something else", "fairseq-train failed"),
])  # fmt: skip
def test_a_failed_training_says_why(tmp_path, output, says):
    """launch_training: what stopped the launcher, read from its output, and how to go on."""
    log = tmp_path / "train.log"
    log.write_text("an earlier run's output: Connection reset by peer [10.9.9.9]:1\n")  # not this run's
    script = (f'set -euo pipefail; source "{REPO}/recipes/lib.sh"; LAUNCH=torchrun GPUS=0 PER_NODE=1 '
              f'MASTER_ADDR=node0 MASTER_PORT=29500 NNODES=2 DIST_TIMEOUT=20; '
              f'launch_training "{log}" bash -c \'printf "%s\\n" "$0"; exit 1\' {shlex.quote(output)}')  # fmt: skip
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert f"training stopped: {says}" in proc.stderr, proc.stderr
    assert f". Once the cause is gone, run the same command again on every machine: training resumes from " \
           f"checkpoint_last.pt (full log: {log})" in proc.stderr  # fmt: skip
