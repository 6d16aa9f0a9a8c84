"""recipes/demo.sh end to end: at reduced size by default, at full size behind the slow marker."""

import json
import os
import subprocess

import pytest
import torch

from helpers import REPO, user_env

SMALL = dict(
    TRAIN_PAIRS="2000",
    VALID_PAIRS="40",
    TEST_PAIRS="60",
    VOCAB_SIZE="300",
    MAX_TOKENS="1500",
    MAX_UPDATE="40",
    WARMUP="20",
    SAVE_INTERVAL_UPDATES="10",
    LOG_INTERVAL="5",
    AVERAGE_LAST="3",
    BLEU_BAR="0",
)


def run_demo(work, DRY="0", **variables):
    return subprocess.run(
        ["bash", os.path.join(REPO, "recipes", "demo.sh"), *(["--dry-run"] if DRY == "1" else [])],
        cwd=REPO,
        env=user_env(WORK=work, **variables),
        capture_output=True,
        text=True,
        timeout=3600,
    )


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    work = tmp_path_factory.mktemp("demo") / "run with spaces"  # paths with spaces must work
    proc = run_demo(work, **SMALL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc.stdout + proc.stderr


@pytest.mark.e2e
def test_every_stage_runs_and_reports(small_demo):
    work, output = small_demo
    for header in (
        "stage 1:",
        "stage 2:",
        "stage 3:",
        "stage 4:",
        "stage 5:",
        "stage 6-last:",
        "stage 6-average:",
        "stage 7-last:",
        "stage 7-average:",
        "stage 8:",
    ):
        assert f"==== {header}" in output
    assert "distributed init (rank 1)" in open(work / "train.log.rank1").read()
    results = work / "results"
    for model in ("last", "average"):
        scores = json.loads((results / f"scores.{model}.json").read_text())
        assert scores["sentences"] == 60  # every test sentence was translated and scored
        assert scores["sacrebleu_signature"].startswith("nrefs:1|case:mixed")
        assert len((results / f"hypotheses.{model}.txt").read_text().splitlines()) == 60
    report = (results / "report.md").read_text()
    for png in ("loss.png", "lr.png", "attention_encoder.png", "attention_decoder.png"):
        assert f"({png})" in report and (results / png).stat().st_size > 10_000
    assert "sacreBLEU" in output and "report:" in output


@pytest.mark.e2e
def test_average_is_of_the_last_checkpoints(small_demo):
    work, _ = small_demo
    from transformer_plugin_cli.tools.average_checkpoints import saved_update
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    averaged = load_checked(work / "checkpoints" / "average.pt")
    updates = [saved_update(p) for p in averaged["averaged_from"]]
    # the last AVERAGE_LAST=3 states saved every 10 updates (SAVE_INTERVAL_UPDATES); the end of epoch 2, at update 28,
    # is no such state, and no epoch checkpoint is kept
    assert updates == [40, 30, 20]
    inputs = [load_checked(p)["model"] for p in averaged["averaged_from"]]
    name = "encoder.layers.0.ffn.w_1.weight"
    torch.testing.assert_close(averaged["model"][name], sum(m[name] for m in inputs) / 3)


@pytest.mark.e2e
def test_rerun_skips_completed_stages(small_demo):
    work, _ = small_demo
    before = (work / "checkpoints" / "average.pt").stat().st_mtime_ns
    proc = run_demo(work, **SMALL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("done already") == 10
    assert (work / "checkpoints" / "average.pt").stat().st_mtime_ns == before


@pytest.mark.e2e
def test_a_changed_vocabulary_stops_before_any_work(small_demo):
    """VOCAB_SIZE=300 then 301 into the same WORK: the vocabulary would be redone, and the trained model
    with it, so the recipe stops before touching anything and says how to go on."""
    work, _ = small_demo
    before = {p: p.stat().st_mtime_ns for p in (work / "data" / "spm.model", work / "checkpoints" / "average.pt")}
    dry = run_demo(work, **dict(SMALL, VOCAB_SIZE="301"), DRY="1")
    assert (
        "a real run redoes this stage: its settings changed since it was done: VOCAB_SIZE was 300, now 301"
        in dry.stdout
    )
    why = (
        "stage 4 (training) was done, but stage 3, whose outputs it reads ($WORK/data-bin), is redone (VOCAB_SIZE was "
        "300, now 301, in stage 2)"
    )
    assert f"(a real run stops here: {why}" in dry.stdout
    proc = run_demo(work, **dict(SMALL, VOCAB_SIZE="301"))
    assert proc.returncode == 3
    assert (
        why in proc.stderr and f"delete '{work / 'checkpoints'}' and '{work / '.done' / '4'}';" in proc.stderr
    )  # quoted: a space
    assert "FAILED: stopped before any work (nothing was changed)" in proc.stderr
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_failing_stage_is_named_and_stops_the_recipe(tmp_path):
    proc = run_demo(tmp_path / "w", **dict(SMALL, TRAIN_PAIRS="0"))
    assert proc.returncode != 0
    assert "FAILED: stage 1: synthetic corpus" in proc.stderr
    assert "==== stage 2" not in proc.stdout


@pytest.mark.slow
def test_demo_reaches_its_bleu_bar(tmp_path):
    """The full demo (about 12 minutes on 2 cores); recipes/demo.sh exits non-zero below BLEU_BAR."""
    proc = run_demo(tmp_path / "demo")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scores = json.loads((tmp_path / "demo" / "results" / "scores.average.json").read_text())
    print(f"averaged model: sacreBLEU {scores['sacrebleu']}, chrF {scores['chrf']}")


def test_a_vocabulary_too_large_for_the_corpus_names_the_variable(tmp_path):
    proc = run_demo(tmp_path / "demo", **dict(SMALL, TRAIN_PAIRS="30", VOCAB_SIZE="5000"))
    assert proc.returncode != 0
    assert "VOCAB_SIZE=5000 is more than the training text" in proc.stderr and "set VOCAB_SIZE lower" in proc.stderr
    assert "FAILED: stage 2" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "demo" / ".done" / "2").exists()
