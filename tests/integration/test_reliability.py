"""Interrupted training, dying workers and configuration errors, with fairseq-train itself.

A SIGKILL while a checkpoint is being written (the first write, or the copy to checkpoint_last.pt), or
just after one was written, leaves no file half-written under its final name, and re-running the
same command resumes and ends with exactly the parameters of a run that was never interrupted (CPU,
fixed seed: fairseq seeds every update with seed + update number, and checkpoints carry the data
iterator's position)."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from helpers import BIN, PLUGIN, TRAIN_FLAGS, one_stage, parameters, processes_naming, run_tool
from transformer_plugin.patches.checkpoint_allowlist import load_checked

# Runs fairseq-train after arranging for the process to SIGKILL itself at the Nth event of a kind:
#   save: in the middle of writing the Nth checkpoint (half its bytes written to checkpoint_*.pt.tmp)
#   copy: in the middle of the Nth copy to checkpoint_last.pt (checkpoint_*.pt -> checkpoint_last.pt.tmp)
#   after: right after the Nth copy to checkpoint_last.pt finished (between checkpoints)
DYING_TRAIN = r"""
import io, os, shutil, signal, sys
import torch
kind, n = sys.argv[1], int(sys.argv[2])
sys.argv = ["fairseq-train"] + sys.argv[3:]
seen = {"save": 0, "copy": 0}

def die():
    sys.stdout.flush(); sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)

real_save, real_copyfile = torch.save, shutil.copyfile

def save(obj, f, *args, **kwargs):
    seen["save"] += 1
    if kind == "save" and seen["save"] == n and not isinstance(f, str):
        buffer = io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2]); f.flush()
        die()
    return real_save(obj, f, *args, **kwargs)

def copyfile(src, dst, *args, **kwargs):
    if "checkpoint_last" not in os.path.basename(dst):
        return real_copyfile(src, dst, *args, **kwargs)
    seen["copy"] += 1
    if kind == "copy" and seen["copy"] == n:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            data = fin.read(); fout.write(data[: len(data) // 2]); fout.flush()
        die()
    result = real_copyfile(src, dst, *args, **kwargs)
    if kind == "after" and seen["copy"] == n:
        die()
    return result

torch.save, shutil.copyfile = save, copyfile
from fairseq_cli.train import cli_main
cli_main()
"""

RESUME_FLAGS = [
    *TRAIN_FLAGS,
    "--max-update",
    "12",
    "--save-interval-updates",
    "4",
    "--no-epoch-checkpoints",
    "--dropout",
    "0.3",
]


def train_args(data_bin, save_dir):
    return [str(data_bin / "bin"), "--user-dir", PLUGIN, *RESUME_FLAGS, "--save-dir", str(save_dir)]


@pytest.fixture(scope="module")
def uninterrupted(data_bin):
    save_dir = data_bin / "uninterrupted"
    run_tool("fairseq-train", *train_args(data_bin, save_dir))
    return parameters(save_dir / "checkpoint_last.pt")


# Here an epoch is 5 updates. Checkpoints: update 4 (written as checkpoint_1_4.pt, copied to
# checkpoint_last.pt), end of epoch 1 = update 5 (written straight to checkpoint_last.pt), update 8 (copied).
@pytest.mark.parametrize(
    "kind, n, resumes_at",
    [
        ("save", 2, 4),  # killed while writing the end-of-epoch checkpoint_last.pt: the one of update 4 is used
        ("copy", 2, 5),  # killed while copying update 8 to checkpoint_last.pt: the end-of-epoch one is used
        ("after", 2, 8),  # killed just after update 8 was saved
    ],
)
@pytest.mark.e2e
def test_sigkill_then_rerun_ends_like_an_uninterrupted_run(data_bin, uninterrupted, tmp_path, kind, n, resumes_at):
    save_dir = tmp_path / "ckpt"
    args = train_args(data_bin, save_dir)
    proc = subprocess.run(
        [sys.executable, "-c", DYING_TRAIN, kind, str(n), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    finals = sorted(p for p in os.listdir(save_dir) if p.endswith(".pt"))
    assert "checkpoint_last.pt" in finals
    for name in finals:  # every file under a final name is complete
        assert "model" in load_checked(str(save_dir / name))
    if kind != "after":
        assert any(p.endswith(".tmp") for p in os.listdir(save_dir))  # the interrupted write stayed a .tmp

    log = run_tool("fairseq-train", *args)  # the same command again
    assert f"@ {resumes_at} updates" in log
    resumed = parameters(save_dir / "checkpoint_last.pt")
    assert resumed.keys() == uninterrupted.keys()
    different = [k for k in resumed if not torch.equal(resumed[k], uninterrupted[k])]
    assert not different, f"parameters differ from the uninterrupted run: {different[:5]}"


@pytest.mark.e2e
def test_every_interval_state_is_kept_under_its_update_without_epoch_checkpoints(data_bin, tmp_path):
    """Here an epoch is 5 updates, and every save interval of 5 lands on an epoch end: fairseq alone
    writes those states only to checkpoint_last.pt (with --no-epoch-checkpoints); with the plugin each is
    checkpoint_{epoch}_{update}.pt too, and --keep-interval-updates keeps the last 2 of them."""
    from transformer_plugin_cli.tools.average_checkpoints import saved_update

    save_dir = tmp_path / "ckpt"
    run_tool(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        "15",
        "--save-interval-updates",
        "5",
        "--keep-interval-updates",
        "2",
        "--no-epoch-checkpoints",
        "--save-dir",
        str(save_dir),
    )
    numbered = sorted(p for p in os.listdir(save_dir) if p.startswith("checkpoint_") and p[11].isdigit())
    assert numbered == ["checkpoint_2_10.pt", "checkpoint_3_15.pt"]
    assert [saved_update(str(save_dir / p)) for p in numbered] == [10, 15]
    assert not any(p.endswith(".tmp") for p in os.listdir(save_dir))


@pytest.mark.e2e
def test_a_full_disk_stops_a_save_in_one_line_and_the_same_command_resumes(
    data_bin, uninterrupted, tmp_path, small_disk
):
    """--save-dir on a disk that holds five checkpoints, not the copy of update 12's to checkpoint_last.pt
    (an epoch is 5 updates, validated at its end): fairseq-train stops with one line naming the directory, the
    space a save needs and the space free, no traceback and no partial file; the earlier checkpoints load;
    once there is room the same command resumes and ends with the uninterrupted run's parameters."""
    save_dir = tmp_path / "ckpt"
    args = [*train_args(data_bin, save_dir), "--keep-interval-updates", "5"]
    probe = tmp_path / "probe"
    run_tool("fairseq-train", *[a if a != str(save_dir) else str(probe) for a in args[:-2]], "--max-update", "4")
    one = os.path.getsize(probe / "checkpoint_last.pt")
    # checkpoints of updates 4, 8 and 12, the best (of update 10) and the last fit; a copy of the last more does not
    small_disk(save_dir, int(5.5 * one))
    code, out = run_tool("fairseq-train", *args, expect_ok=False)
    assert code == 1 and "Traceback" not in out, out[-3000:]
    [line] = [line for line in out.splitlines() if "no space left" in line]
    assert (
        f"{save_dir}: no space left to save the checkpoint of update 12 (No space left on device): a checkpoint takes"
        in line
        and "is free. Nothing of this save was kept" in line
    )
    assert "training resumes from checkpoint_last.pt, which is intact" in line
    assert not [p for p in os.listdir(save_dir) if p.endswith(".tmp")]
    for name in ("checkpoint_1_4.pt", "checkpoint_2_8.pt", "checkpoint_last.pt"):
        assert "model" in load_checked(str(save_dir / name))
    from transformer_plugin_cli.tools.average_checkpoints import saved_update

    assert saved_update(str(save_dir / "checkpoint_last.pt")) == 10  # the end of epoch 2

    small_disk(save_dir, 10 * one)  # room made
    log = run_tool("fairseq-train", *args)
    assert "@ 10 updates" in log
    resumed = parameters(save_dir / "checkpoint_last.pt")
    assert not [k for k in resumed if not torch.equal(resumed[k], uninterrupted[k])], (
        "parameters differ from the uninterrupted run"
    )


@pytest.mark.e2e
def test_a_dying_worker_stops_the_job_in_bounded_time(data_bin, tmp_path):
    """Two real gloo workers under the recipes' launcher (train_workers); rank 1 is SIGKILLed during
    training. Rank 0 would wait in its next all-reduce (gloo's default timeout is 30 minutes): the launcher
    stops it."""
    save_dir = tmp_path / "ckpt"
    launcher = one_stage(
        tmp_path,
        "train_workers",
        "2",
        str(tmp_path / "train.log"),
        f"{BIN}/fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        "100000",
        "--save-dir",
        str(save_dir),
        "--no-save",
    )
    try:
        rank1 = None
        deadline = time.time() + 120
        while time.time() < deadline:  # wait until both train
            log = (tmp_path / "train.log").read_text() if (tmp_path / "train.log").exists() else ""
            if "num_updates=3" in log:
                found = [
                    p
                    for p in processes_naming(str(save_dir))
                    if b"--distributed-rank\x001\x00" in open(f"/proc/{p}/cmdline", "rb").read()
                ]
                rank1 = found[0] if found else None
                break
            time.sleep(0.5)
        assert rank1, "the two workers did not start training"
        os.kill(rank1, signal.SIGKILL)
        killed_at = time.time()
        _, err = launcher.communicate(timeout=60)
        elapsed = time.time() - killed_at
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert launcher.returncode != 0
    assert "a training worker failed" in err
    print(f"the job stopped {elapsed:.1f} s after rank 1 was killed")
    assert elapsed < 30, f"the job took {elapsed:.0f} s to stop"
    assert not processes_naming(str(save_dir))  # none left


# (the model's own size and dropout checks are tested directly in tests/models; one goes through the CLI here)
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--arch", "vaswani_nope"], "argument --arch/-a: invalid choice: 'vaswani_nope'"),
        (["--arch", "vaswani_tiny", "--d-model", "66"], "--d-model 66 is not divisible by --attention-heads 4"),
        (["--arch", "vaswani_tiny", "DATA=missing"], "No such file or directory"),
    ],
)
def test_configuration_errors_stop_before_training(data_bin, tmp_path, flags, message):
    data = str(tmp_path / "missing") if "DATA=missing" in flags else str(data_bin / "bin")
    flags = [f for f in flags if f != "DATA=missing"]
    base = [f for f in TRAIN_FLAGS if f not in ("--arch", "vaswani_tiny")]
    code, output = run_tool(
        "fairseq-train",
        data,
        "--user-dir",
        PLUGIN,
        *base,
        *flags,
        "--max-update",
        "2",
        "--save-dir",
        str(tmp_path / "ckpt"),
        expect_ok=False,
    )
    assert code != 0 and message in output
    assert "begin training" not in output.lower() and not (tmp_path / "ckpt" / "checkpoint_last.pt").exists()
    if "missing" in data:
        assert str(tmp_path / "missing") in output  # the error names the directory
