"""recipes/lib.sh: the launcher of data-parallel workers stops all of them when one fails."""

import os
import subprocess
import sys

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
    env = dict(os.environ, MARKERS=str(tmp_path), PYTHON=sys.executable)
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
    env = dict(os.environ, REPO=str(REPO), WORK=str(tmp_path / "work"), PYTHON=sys.executable, **variables)
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
    env.pop("PYTHON", None)
    script = tmp_path / "recipe.sh"
    script.write_text(RECIPE)
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and not (tmp_path / "work").exists()
    assert ") cannot import fairseq " in proc.stderr  # the first of what it lacks
    assert "source .venv/bin/activate" in proc.stderr
