"""Checkpoints load through an exact allowlist; anything else is refused, naming the file."""

import argparse
import io
import os
import pickle

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils
from omegaconf import OmegaConf

from transformer_plugin.patches import checkpoint_allowlist
from transformer_plugin.patches._patching import MARK
from transformer_plugin.patches.checkpoint_allowlist import CorruptCheckpointError, UnsafeCheckpointError, load_checked


class RunsCode:
    """A pickle payload that would run a shell command when unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "code_was_run"


def test_fairseq_loader_is_wrapped_once():
    checkpoint_allowlist.apply()  # a second call must not wrap the wrapper
    wrapped = checkpoint_utils.load_checkpoint_to_cpu
    assert getattr(wrapped, MARK)
    assert not getattr(wrapped.__wrapped__, MARK, False)


def test_checkpoint_classes_load(tmp_path):
    """What fairseq writes: Namespace args (older fairseq), numpy --eval-bleu counts.

    (Real checkpoints through fairseq's own loader: tests/test_cli.py.)"""
    path = tmp_path / "ok.pt"
    state = {
        "args": argparse.Namespace(arch="vaswani_tiny", lr=[0.1]),
        "cfg": None,
        "model": {"w": torch.ones(2)},
        "extra_state": {
            "metrics": {
                "_bleu_counts": np.array([14, 1, 0, 0], dtype=np.int64),
                "summed": np.array([28.0, 2.0, 0.0, 0.0]),
            }
        },  # as two workers' sum
    }
    torch.save(state, path)
    loaded = load_checked(path)
    assert loaded["args"].arch == "vaswani_tiny"
    assert loaded["extra_state"]["metrics"]["_bleu_counts"].tolist() == [14, 1, 0, 0]
    assert loaded["extra_state"]["metrics"]["summed"].tolist() == [28.0, 2.0, 0.0, 0.0]


def test_distributed_broadcast_payload_loads():
    """Rank 0 re-pickles the loaded state (config as DictConfig, tensors as placeholders)."""
    from fairseq.distributed.utils import _put_tensors_in_obj, _split_tensors_from_obj

    cfg = OmegaConf.create({"model": {"d_model": 64, "any": None}, "lst": [1, 2]}, flags={"allow_objects": True})
    state = {"cfg": cfg, "model": {"w": torch.arange(3.0)}, "counts": np.array([1, 2], dtype=np.int64)}
    tensors = []
    payload = _split_tensors_from_obj(state, tensors)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    buffer.seek(0)
    restored = _put_tensors_in_obj(torch.load(buffer, weights_only=True), tensors)
    assert restored["cfg"].model.d_model == 64
    assert torch.equal(restored["model"]["w"], torch.arange(3.0))


@pytest.mark.parametrize("legacy", [False, True])
def test_code_in_a_checkpoint_is_refused_and_not_run(tmp_path, marker, legacy):
    path = tmp_path / "evil.pt"
    if legacy:  # a plain pickle file, the pre-1.6 torch format
        with open(path, "wb") as f:
            pickle.dump({"model": {}, "x": RunsCode(marker)}, f, protocol=2)
    else:
        torch.save({"model": {}, "x": RunsCode(marker)}, path)
    with pytest.raises(UnsafeCheckpointError, match=str(path)):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    with pytest.raises(UnsafeCheckpointError, match=str(path)):
        load_checked(path)
    assert not marker.exists()


def test_other_classes_are_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"model": {}, "x": argparse.ArgumentParser}, path)
    with pytest.raises(UnsafeCheckpointError, match="other.pt"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_checkpoint_names_the_file(tmp_path, damage):
    good = tmp_path / "good.pt"
    torch.save({"model": {"w": torch.randn(100, 100)}}, good)
    data = good.read_bytes()
    path = tmp_path / f"{damage}.pt"
    path.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"not a checkpoint at all", "empty": b""}[damage])
    with pytest.raises(CorruptCheckpointError, match=str(path)):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    with pytest.raises(CorruptCheckpointError, match=str(path)):
        load_checked(path)


def test_missing_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError):
        checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "nope.pt"))
    for mmap in (False, True):  # not reported as a truncated checkpoint
        with pytest.raises(FileNotFoundError, match="nope.pt"):
            load_checked(str(tmp_path / "nope.pt"), mmap=mmap)
