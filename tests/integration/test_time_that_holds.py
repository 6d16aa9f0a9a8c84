"""fairseq-train with --stop-time-hours, as a recipe's TIME runs it, on a machine slower than its plan: the run
re-plans the updates that fit (transformer_plugin/patches/training_progress.py) and ends at its own last update,
validated and saved, on time; its progress lines never promise an end past the deadline; on two workers both re-plan
alike and end together."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from helpers import BIN, PLUGIN, TRAIN_FLAGS, free_port

from recipes.planner.layout import worker_commands

DEADLINE = 20  # seconds of training: far fewer updates fit than the 100,000 planned


def train(data_bin, save_dir, *extra):
    flags = [
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        "100000",
        "--stop-time-hours",
        f"{DEADLINE / 3600:.6f}",
        "--log-interval",
        "2",
        "--save-interval-updates",
        "40",
        "--save-dir",
        str(save_dir),
        "--no-epoch-checkpoints",
        *extra,
    ]
    return [os.path.join(BIN, "fairseq-train"), *flags]


def ended_as_replanned(log, save_dir):
    """Re-planned from 100,000 to what fits, and ended by its own last update or, within 20% of it, by the clock:
    validated and saved either way; no progress line after the first interval names 100,000."""
    replans = json.loads((save_dir / "time_budget.json").read_text())["replans"]
    assert replans[0]["max_update_before"] == 100000 == replans[-1]["max_update_planned"]
    assert replans[0]["max_update_now"] < 100000 / 1.2
    assert re.search(r"time: re-planned at update [\d,]+: [\d.]+ s an update here, where --max-update 100,000", log)
    stopped = re.findall(r"Stopping training due to (num_updates: (\d+) >= max_update|cumulative_training_time)", log)
    # once, at one update: by the updates, the clock, or both where the last update reaches the deadline (fairseq
    # logs each reason it stops for)
    assert 1 <= len(stopped) <= 2 and len({reason for reason, _ in stopped}) == len(stopped), stopped
    last = replans[-1]["max_update_now"]
    updates = [int(u) for u in re.findall(r"\| progress \| update (\d+) of", log)]
    assert updates and max(updates) <= last
    progress = re.findall(r"\| progress \| (update .*)$", log, flags=re.M)
    assert not [p for p in progress[1:] if "of 100,000" in p]
    assert (save_dir / "checkpoint_last.pt").exists()


@pytest.mark.e2e
def test_a_run_slower_than_its_plan_replans_and_ends_on_time(data_bin, tmp_path):
    began = time.monotonic()
    proc = subprocess.run(train(data_bin, tmp_path / "ckpt"), capture_output=True, text=True, timeout=600)
    took = time.monotonic() - began
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    ended_as_replanned(log, tmp_path / "ckpt")
    assert took < DEADLINE + 30, took  # the training's deadline, and fairseq's start and end around it


@pytest.mark.e2e
def test_two_workers_replan_alike_and_end_together(data_bin, tmp_path):
    argv = train(data_bin, tmp_path / "ckpt")
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in worker_commands(2, argv, str(free_port()))
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank}:\n{out[-3000:]}"
    ended_as_replanned(outputs[0], tmp_path / "ckpt")


@pytest.mark.e2e
@pytest.mark.load
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins the run and its competitor to one core")
def test_a_machine_loaded_partway_through_is_seen_and_the_run_still_ends_on_time(data_bin, tmp_path):
    """The run pinned to one core, alone at first; a busy process pinned to the same core from 12 s on halves its
    speed. The run re-plans at its new speed within a few intervals, ends by its deadline, and says so truly."""
    core = str(sorted(os.sched_getaffinity(0))[-1])
    deadline = 40
    argv = train(data_bin, tmp_path / "ckpt")
    argv[argv.index("--stop-time-hours") + 1] = f"{deadline / 3600:.6f}"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    began = time.monotonic()
    run = subprocess.Popen(["taskset", "-c", core, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(12)
    busy = subprocess.Popen(["taskset", "-c", core, sys.executable, "-c", "while True: pass"])
    try:
        log = run.communicate(timeout=600)[0].decode()
    finally:
        busy.kill()
        busy.wait()
    took = time.monotonic() - began
    assert run.returncode == 0, log[-3000:]
    ended_as_replanned(log, tmp_path / "ckpt")
    replans = json.loads((tmp_path / "ckpt" / "time_budget.json").read_text())["replans"]
    speeds = [r["seconds_an_update_measured"] for r in replans]
    assert max(speeds[1:], default=0) > 1.5 * speeds[0], replans  # the load seen, and planned for
    assert took < deadline + 30, took


@pytest.mark.e2e
@pytest.mark.load
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins both trainings to one core")
def test_two_trainings_on_one_core_each_end_on_time_the_first_slowed_by_the_second(data_bin, tmp_path):
    """Two fairseq-trains with TIME pinned to the same core, as two recipes started on a machine with no core to
    spare: the first alone for 10 s, then the second beside it, each planned for 100,000 updates. Each re-plans at the
    speed it has; the first sees the second come (its seconds an update rise), both end on time, validated and
    saved, and neither's progress line promises past its deadline."""
    core = str(sorted(os.sched_getaffinity(0))[-1])
    deadline = 40
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs, began = [], []
    for name in ("first", "second"):
        argv = train(data_bin, tmp_path / name)
        argv[argv.index("--stop-time-hours") + 1] = f"{deadline / 3600:.6f}"
        began.append(time.monotonic())
        runs.append(
            subprocess.Popen(["taskset", "-c", core, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        )
        if name == "first":
            time.sleep(10)
    logs = [r.communicate(timeout=600)[0].decode() for r in runs]
    ended = time.monotonic()
    for name, run, log, start in zip(("first", "second"), runs, logs, began):
        assert run.returncode == 0, f"{name}:\n{log[-3000:]}"
        ended_as_replanned(log, tmp_path / name)
        lefts = [m for m in re.findall(r"\| progress \| .*\| about (\d+) s left", log)]
        assert all(int(left) <= deadline for left in lefts), (name, lefts)
    assert ended - began[0] < deadline + 30 + 10
    speeds = [
        r["seconds_an_update_measured"]
        for r in json.loads((tmp_path / "first" / "time_budget.json").read_text())["replans"]
    ]
    assert max(speeds[1:], default=0) > 1.5 * speeds[0], speeds  # the second training seen, and planned for
