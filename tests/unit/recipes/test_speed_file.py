"""A speed file (recipes/planner/speed/speed_file.py: ``vaswani-speed-probe file``) written on the machine that will
train, and a plan made elsewhere from it (recipes/planner/speeds.py: SPEED_FILE=): GPUS, NNODES and the gradients'
all-reduce counted."""

import json
import re

import pytest
from helpers import speed_file

from recipes.planner.budget import candidates

from recipes.planner import model
from recipes.planner.speed import probe_cache
from recipes.planner.speed.speed_file import SHARES, SPEED_FILE_VERSION, SpeedFile, SpeedFileError
from recipes.planner import decide, plan
from recipes.planner.speeds import Speeds
from recipes.planner.variables import Variables, check_settings


def test_a_speed_file_holds_every_candidate_model_at_every_share_and_says_its_bandwidth_is_defaulted(tmp_path):
    data = speed_file(tmp_path / "speeds.json")
    assert data["version"] == SPEED_FILE_VERSION and data["bandwidth_said"].startswith("defaulted")
    assert [(m["arch"], m["model_flags"]) for m in data["models"]] == [(a, f) for a, f, _ in candidates.MODELS]
    assert all(sorted(map(int, m["seconds"])) == list(SHARES) for m in data["models"])


def test_the_seconds_between_and_beyond_the_shares_timed_and_the_all_reduce(tmp_path):
    speed_file(tmp_path / "speeds.json")
    f = SpeedFile.read(str(tmp_path / "speeds.json"))
    at = {s: f.seconds("vaswani_big", "", s) for s in (100, 256, 3072, 25000, 50000)}
    assert at[100] == at[256] and at[256] < at[3072] < at[25000] and at[50000] == pytest.approx(2 * at[25000])
    # 213M bf16 gradients over 64 devices on 8 machines at 12.5 GB/s: 2 * 63/64 * 426 MB / 12.5 GB/s
    params = model.Model.from_flags("vaswani_big", "").parameters(32000)
    assert f.all_reduce_seconds(params, 64, 8) == pytest.approx(2 * 63 / 64 * params * 2 / 12.5e9)
    assert f.all_reduce_seconds(params, 8, 1) < f.all_reduce_seconds(params, 8, 2)
    assert f.all_reduce_seconds(params, 1, 1) == 0


@pytest.mark.parametrize(
    "text, said",
    [
        ("not json", "not JSON"),
        (json.dumps({"version": 0}), "not a speed file of version 1"),
        (json.dumps({"version": 1, "device": "cuda"}), "missing"),
    ],
)
def test_a_bad_speed_file_is_named_with_what_is_wrong(tmp_path, text, said):
    (tmp_path / "speeds.json").write_text(text)
    with pytest.raises(SpeedFileError, match=f"SPEED_FILE={tmp_path / 'speeds.json'}: .*{said}"):
        SpeedFile.read(str(tmp_path / "speeds.json"))


def variables(tmp_path, **given):
    from helpers import corpus, many

    prefix = corpus(tmp_path, many(12_000))
    values = {"TRAIN": prefix, "SRC": "en", "TGT": "de", "CPU_WORKERS": "2", "GPUS": "0", "WORK": str(tmp_path / "w")}
    return Variables({**values, **given})


def test_a_plan_made_on_a_machine_without_gpus_plans_as_the_speed_file_machine_would(tmp_path):
    """GPUS=8 NNODES=2 TIME=8h with a speed file, on this CPU machine: no probe here, every candidate's seconds from
    the file over 16 devices with the all-reduce between machines, and the time line names the file."""
    speed_file(tmp_path / "speeds.json")
    v = variables(
        tmp_path,
        SPEED_FILE=str(tmp_path / "speeds.json"),
        GPUS="8",
        NNODES="2",
        PRECISION="bf16",
        TIME="8h",
        LAUNCH="torchrun",
        MASTER_ADDR="10.0.0.1",
        MASTER_PORT="29500",
        DRY_RUN="1",
    )
    check_settings(v)  # TIME with NNODES>1: allowed, since every machine reads the same file

    def no_probe(probe, fresh=False, tries=1):
        raise AssertionError("probed here")

    speeds = Speeds(v, 4096)
    kept_seconds, probe_cache.seconds_per_update = probe_cache.seconds_per_update, no_probe
    try:
        found = decide.corpus_settings(v, speeds)
        decided = decide.decide(v)
    finally:
        probe_cache.seconds_per_update = kept_seconds
    assert speeds.devices == 16 and found.plan["devices"] == 16
    f = speeds.file
    for o in found.plan["options"]:
        c = candidates.Candidate(o["name"], o["arch"], o["model_flags"], o["dropout"], o["tokens_per_update"])
        expected = f.seconds(c.arch, c.model_flags, c.tokens_per_update / 16) + f.all_reduce_seconds(
            model.Model.from_flags(c.arch, c.model_flags).parameters(found.vocab_size), 16, 2
        )
        assert o["seconds_per_update"] == pytest.approx(expected, abs=1e-4)
    assert any(line.startswith("time: training about ") for line in decided.lines)
    assert f"SPEED_FILE {tmp_path / 'speeds.json'}" in decided.budget["training_time"]
    assert "at 12.5 GB/s between machines, defaulted" in decided.budget["training_time"]


def test_time_on_several_machines_without_a_speed_file_is_refused_saying_what_to_give(tmp_path):
    v = variables(tmp_path, GPUS="8", NNODES="2", TIME="8h")
    with pytest.raises(plan.PlanError, match="give MAX_UPDATE, or SPEED_FILE"):
        check_settings(v)


def test_a_speed_file_of_another_precision_or_micro_batch_is_refused(tmp_path):
    """A file timed in bf16 (its default) does not plan a run in fp32 (the recipe's), nor one of other micro-batches."""
    speed_file(tmp_path / "speeds.json")
    given = dict(SPEED_FILE=str(tmp_path / "speeds.json"), GPUS="8")
    with pytest.raises(plan.PlanError, match="measured in bf16 with micro-batches of 4,096 tokens, .* PRECISION=fp32"):
        Speeds(variables(tmp_path, **given), 4096)
    with pytest.raises(plan.PlanError, match="MAX_TOKENS_PER_DEVICE=8192: give those"):
        Speeds(variables(tmp_path, PRECISION="bf16", **given), 8192)
    assert Speeds(variables(tmp_path, PRECISION="bf16", **given), 4096).file.precision == "bf16"


def test_a_cpu_speed_file_for_gpus_is_refused(tmp_path):
    speed_file(tmp_path / "speeds.json")
    with pytest.raises(plan.PlanError, match="measured on .* \\(cuda\\), and GPUS=0"):
        Speeds(variables(tmp_path, SPEED_FILE=str(tmp_path / "speeds.json"), GPUS="0"), 4096)


def test_the_recipe_plans_a_gpu_cluster_from_a_speed_file_on_a_million_pairs(tmp_path):
    """recipes/parallel_text.sh itself, at GPU scale: 1,000,000 pairs of 24 words, a GPU machine's speed file, 2
    machines of 8 GPUs and TIME=8h, planned on this machine without a GPU: the paper's base or big, and the two lines
    agree on the updates (a few seconds: the dry run counts the lines and samples 10,000 of them). 8 hours of 16 GPUs
    repeat so small a corpus some 25 times, where a model of 176M parameters nears its turn
    (recipes/planner/budget/), so the pick takes a third of the paper's batch, which learns more from each
    repeated token (8,192 tokens, 512 a GPU: its speed file says what that costs)."""
    from helpers import run_recipe

    words = " ".join(f"w{i}" for i in range(24))
    for lang in ("en", "de"):
        with open(tmp_path / f"train.{lang}", "w") as f:
            f.writelines(f"{lang} {i} {words}\n" for i in range(1_000_000))
    speed_file(tmp_path / "speeds.json")
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(tmp_path / "train"),
        SRC="en",
        TGT="de",
        SPEED_FILE=str(tmp_path / "speeds.json"),
        GPUS="8",
        NNODES="2",
        PRECISION="bf16",
        LAUNCH="torchrun",
        MASTER_ADDR="node1",
        TIME="8h",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    picked = next(line for line in proc.stdout.splitlines() if line.startswith("picked: "))
    said = next(line for line in proc.stdout.splitlines() if line.startswith("time: "))
    assert picked.startswith(("picked: N=6 x d_model 512, d_ff 2048", "picked: N=6 x d_model 1024, d_ff 4096")), picked
    tokens, updates = (
        int(x.replace(",", "")) for x in re.search(r"([\d,]+) tokens x ([\d,]+) updates", picked).groups()
    )
    assert tokens >= 8192 and f"({updates:,} updates of " in said and "on the speed file's machines" in said
    assert f"--max-update {updates} " in proc.stdout


def test_a_plan_resting_on_a_busy_machines_figure_says_so(tmp_path, monkeypatch):
    """A figure measured while the machine was busy (the best of busy_cores.BUSY_TRIES probes) is not taken as the
    machine's speed without saying so: the plan's lines name the load and how to measure again."""
    figure = {"seconds": 1.0, "measured": "2026-12-02 10:00", "cached": False, "busy": "cores 0,1 80% busy"}
    monkeypatch.setattr(probe_cache, "seconds_per_update", lambda probe, fresh=False, tries=1: dict(figure))
    decided = decide.decide(variables(tmp_path, TIME="1h", DRY_RUN="1"))
    [said] = [line for line in decided.lines if line.startswith("speed: ")]
    assert "busy (cores 0,1 80% busy)" in said and "REPROBE=1" in said
    assert decided.choice["busy"] == ["cores 0,1 80% busy"]


def test_a_figure_slower_than_a_larger_models_is_measured_again_and_the_faster_kept(tmp_path, monkeypatch):
    """Two recipes probing side by side once kept 5.27 s an update for 2 layers of 256 and 1.29 s for 3, measured a
    minute apart: a model slower than a larger one at the same tokens is measured again, once, and the faster kept."""
    asked = []

    def seconds_per_update(probe, fresh=False, tries=1):
        asked.append((probe.model_flags.split()[1], fresh))
        if "--encoder-layers 3" in probe.model_flags:
            return {"seconds": 1.29, "measured": "now", "cached": False}
        return {"seconds": 5.27 if not fresh else 1.05, "measured": "now", "cached": False}

    monkeypatch.setattr(probe_cache, "seconds_per_update", seconds_per_update)
    speeds = Speeds(variables(tmp_path), 4096)
    three, two = (
        candidates.Candidate("", "vaswani_base", candidates.SHORT_FLAGS.format(n=n), 0.1, 4096) for n in (3, 2)
    )
    assert speeds.of(three, 8000) == 1.29 and speeds.of(two, 8000) == 1.05
    assert asked == [("3", False), ("2", False), ("2", True)]
    assert speeds.of(two, 8000) == 1.05 and len(asked) == 3  # one figure a probe, once measured


def test_a_cpu_lower_bound_is_half_a_probed_models_seconds_per_parameter(tmp_path, monkeypatch):
    """On CPU a model not yet probed could at best take CPU_BEST_SPEEDUP of a probed one's seconds a parameter: the
    bound the rule leaves a model unprobed by. None before any probe, for a model probed, and on GPUs."""
    monkeypatch.setattr(
        probe_cache,
        "seconds_per_update",
        lambda probe, fresh=False, tries=1: {"seconds": 2.0, "measured": "now", "cached": 0},
    )
    speeds = Speeds(variables(tmp_path), 4096)
    small = candidates.Candidate("", "vaswani_base", candidates.SHORT_FLAGS.format(n=2), 0.1, 4096)
    big = candidates.Candidate("", "vaswani_big", "", 0.3, 8192)
    assert speeds.lower_bound(big, 8000) is None  # nothing probed yet
    speeds.of(small, 8000)
    per_parameter = 2.0 / candidates.parameters(small, 8000)
    assert speeds.lower_bound(big, 8000) == pytest.approx(per_parameter * candidates.parameters(big, 8000) * 2 * 0.5)
    assert speeds.lower_bound(small, 8000) is None
    assert Speeds(variables(tmp_path, GPUS="1"), 4096).lower_bound(big, 8000) is None


def test_close_models_on_cpu_are_measured_again_best_of_three_once(tmp_path, monkeypatch):
    """remeasure: the models whose predictions are close to the pick's are probed again afresh, each the fastest of
    REMEASURE_TRIES probes, and only once (a figure already the best of three, read back, is not); never from a
    speed file or on GPUs."""
    asked = []

    def seconds_per_update(probe, fresh=False, tries=1):
        asked.append((probe.model_flags.split()[1], fresh, tries))
        return {"seconds": 1.0, "measured": "now", "cached": False, "tries": tries}

    monkeypatch.setattr(probe_cache, "seconds_per_update", seconds_per_update)
    speeds = Speeds(variables(tmp_path), 4096)
    three, two = (
        candidates.Candidate("", "vaswani_base", candidates.SHORT_FLAGS.format(n=n), 0.1, 2048) for n in (3, 2)
    )
    speeds.of(three, 8000), speeds.of(two, 8000)
    assert speeds.remeasure([three, two], 8000) == ["N=3, d_model 256, d_ff 1024", "N=2, d_model 256, d_ff 1024"]
    assert asked == [("3", False, 1), ("2", False, 1), ("3", True, 3), ("2", True, 3)]
    assert speeds.remeasure([three, two], 8000) == [] and len(asked) == 4
    assert Speeds(variables(tmp_path, GPUS="1"), 4096).remeasure([three], 8000) == []
