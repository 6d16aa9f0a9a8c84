"""Checkpoint averaging (Section 6.1): exact means, kept buffers, refused mismatches."""

import os
import subprocess
import sys

import pytest
import torch

from transformer_plugin_cli.tools.average_checkpoints import (
    CheckpointMismatchError,
    average_checkpoints,
    last_checkpoints,
    main,
)
from transformer_plugin.patches.checkpoint_allowlist import load_checked


def fake_checkpoint(path, seed, arch="vaswani_tiny", shapes=None, steps=7):
    g = torch.Generator().manual_seed(seed)
    shapes = shapes or {"w": (3, 4), "b": (4,)}
    model = {name: torch.randn(*shape, generator=g) for name, shape in shapes.items()}
    model["half"] = torch.randn(5, generator=g).half()
    model["num_batches_tracked"] = torch.tensor(steps)
    torch.save({"cfg": {"model": {"_name": arch}}, "model": model, "extra_state": {"seed": seed}}, path)
    return model


def test_average_is_the_exact_elementwise_mean(tmp_path):
    models = [fake_checkpoint(tmp_path / f"c{i}.pt", seed=i) for i in range(3)]
    out = average_checkpoints([str(tmp_path / f"c{i}.pt") for i in range(3)])
    for name in ("w", "b"):
        expected = (models[0][name] + models[1][name] + models[2][name]) / 3
        torch.testing.assert_close(out["model"][name], expected, rtol=0, atol=1e-7)
    half = ((models[0]["half"].float() + models[1]["half"].float() + models[2]["half"].float()) / 3).half()
    assert out["model"]["half"].dtype == torch.float16 and torch.equal(out["model"]["half"], half)
    assert (
        out["model"]["num_batches_tracked"].item() == 7 and not out["model"]["num_batches_tracked"].is_floating_point()
    )
    assert out["extra_state"] == {"seed": 0}  # the rest comes from the first (newest) input
    assert out["averaged_from"] == [str(tmp_path / f"c{i}.pt") for i in range(3)]


@pytest.mark.parametrize(
    "second,match",
    [
        (dict(arch="vaswani_base"), "vaswani_base checkpoint"),
        (dict(shapes={"w": (3, 5), "b": (4,)}), r"w has shape \(3, 5\)"),
        (dict(shapes={"w": (3, 4), "c": (4,)}), "different parameters"),
        (dict(steps=8), "integer buffer num_batches_tracked differs"),
    ],
)
def test_mismatched_inputs_are_refused_naming_the_files(tmp_path, second, match):
    fake_checkpoint(tmp_path / "a.pt", seed=0)
    fake_checkpoint(tmp_path / "b.pt", seed=1, **second)
    with pytest.raises(CheckpointMismatchError, match=match) as info:
        average_checkpoints([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")])
    assert "b.pt" in str(info.value)


def saved_at(path, update, seed=0):
    """A checkpoint as fairseq writes it, saved after ``update`` updates."""
    fake_checkpoint(path, seed=seed)
    state = torch.load(path, weights_only=True)
    state["optimizer_history"] = [{"num_updates": update}]
    torch.save(state, path)


def test_last_update_checkpoints_are_picked_newest_first(tmp_path):
    for epoch, update in [(1, 100), (1, 200), (2, 300), (2, 400), (3, 1000)]:
        (tmp_path / f"checkpoint_{epoch}_{update}.pt").write_bytes(b"")  # the name is enough: never read
    saved_at(tmp_path / "checkpoint_last.pt", 1000)  # the same state as checkpoint_3_1000.pt
    saved_at(tmp_path / "checkpoint3.pt", 1000)
    saved_at(tmp_path / "checkpoint_best.pt", 1100)  # not a "last" state
    chosen = last_checkpoints(str(tmp_path), 3, update_based=True)
    assert [(u, os.path.basename(p)) for u, p in chosen] == [
        (1000, "checkpoint_3_1000.pt"),
        (400, "checkpoint_2_400.pt"),
        (300, "checkpoint_2_300.pt"),
    ]
    bounded = last_checkpoints(str(tmp_path), 2, update_based=True, upper_bound=300)
    assert [os.path.basename(p) for _, p in bounded] == ["checkpoint_2_300.pt", "checkpoint_1_200.pt"]
    with pytest.raises(
        FileNotFoundError, match=r"found 5 \(update 100, update 200, update 300, update 400, update 1000\)"
    ):
        last_checkpoints(str(tmp_path), 6, update_based=True)
    assert [os.path.basename(p) for _, p in last_checkpoints(str(tmp_path), 1, update_based=False)] == [
        "checkpoint3.pt"
    ]
    # a training that stopped early (--patience) saved fewer: all of them, with --or-fewer
    assert [u for u, _ in last_checkpoints(str(tmp_path), 6, update_based=True, fewer=True)] == [
        1000,
        400,
        300,
        200,
        100,
    ]


def test_a_state_saved_only_at_an_epoch_end_is_averaged(tmp_path, capsys):
    """When a save interval lands on an epoch end, fairseq writes that state only as checkpoint{epoch}.pt,
    or with --no-epoch-checkpoints only as checkpoint_last.pt: it is still the newest state."""
    saved_at(tmp_path / "checkpoint_1_50.pt", 50, seed=1)
    saved_at(tmp_path / "checkpoint_2_150.pt", 150, seed=2)
    saved_at(tmp_path / "checkpoint_2_250.pt", 250, seed=3)
    saved_at(tmp_path / "checkpoint_last.pt", 300, seed=4)  # update 300 ended epoch 3
    chosen = last_checkpoints(str(tmp_path), 3, update_based=True)
    assert [(u, os.path.basename(p)) for u, p in chosen] == [
        (300, "checkpoint_last.pt"),
        (250, "checkpoint_2_250.pt"),
        (150, "checkpoint_2_150.pt"),
    ]
    saved_at(tmp_path / "checkpoint3.pt", 300, seed=4)  # without --no-epoch-checkpoints: the same state twice
    assert [u for u, _ in last_checkpoints(str(tmp_path), 4, update_based=True)] == [300, 250, 150, 50]
    assert main(["--inputs", str(tmp_path), "--num-update-checkpoints", "3", "--output", str(tmp_path / "avg.pt")]) == 0
    printed = capsys.readouterr().out
    assert (
        "update 300: " in printed
        and "update 250: " in printed
        and "update 150: " in printed
        and "update 50" not in printed
    )


def test_cli_writes_a_loadable_checkpoint_and_reports_errors(tmp_path, capsys):
    fake_checkpoint(tmp_path / "checkpoint_1_10.pt", seed=0)
    fake_checkpoint(tmp_path / "checkpoint_1_20.pt", seed=1)
    out = tmp_path / "avg.pt"
    assert main(["--inputs", str(tmp_path), "--num-update-checkpoints", "2", "--output", str(out)]) == 0
    assert not os.path.exists(str(out) + ".tmp")
    assert load_checked(out)["averaged_from"][0].endswith("checkpoint_1_20.pt")
    (tmp_path / "broken.pt").write_bytes(b"\x00garbage")
    assert (
        main(
            [
                "--inputs",
                str(tmp_path / "checkpoint_1_10.pt"),
                str(tmp_path / "broken.pt"),
                "--output",
                str(tmp_path / "x.pt"),
            ]
        )
        == 1
    )
    assert "broken.pt" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()


def test_console_script_is_installed(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "vaswani-average-checkpoints")
    proc = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--num-update-checkpoints" in proc.stdout
