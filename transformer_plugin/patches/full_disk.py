"""A full disk while a checkpoint is saved stops training in one line, with nothing half-written left.

fairseq retries a failed ``torch.save`` twice, 2.5 s apart, logs its traceback, and raises; the run then
ends in a second traceback, leaves ``checkpoint_*.pt.tmp`` or ``checkpoint_last.pt.tmp`` behind (the part
written before the disk filled), and says nothing of the space a save needs. With this patch a save that
finds the disk (or a quota) full is not retried; its temporary files are removed; and fairseq-train exits
with status 1 and one line that names the directory, the space a save needs and the space that is free.
The checkpoints saved before are untouched (fairseq removes old ones only after a save succeeded), so the
same command resumes from ``checkpoint_last.pt`` once there is room. Other errors keep fairseq's handling.
"""

import glob
import os
import shutil
import time
import traceback

import torch
from fairseq import checkpoint_utils

from ._patching import replace
from ._units import full_disk_error as full_disk
from ._units import size

UPSTREAM = None  # no upstream issue found
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def state_bytes(trainer) -> int:
    """What a checkpoint of ``trainer`` holds, roughly: its model's and optimizer's tensors."""
    total = sum(t.numel() * t.element_size() for t in trainer.model.state_dict().values() if torch.is_tensor(t))
    try:
        state = trainer.optimizer.state_dict().get("state", {})
    except Exception:  # an optimizer that cannot say: Adam's two moments per parameter
        return 3 * total
    for values in state.values():
        for t in values.values() if isinstance(values, dict) else ():
            if torch.is_tensor(t):
                total += t.numel() * t.element_size()
    return total


class CheckpointDiskFull(SystemExit):
    """fairseq-train's exit when a checkpoint does not fit: status 1, the message on stderr, no traceback."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _not_again_on_a_full_disk(original):
    def _torch_persistent_save(obj, f):
        if isinstance(f, str):
            return original(obj, f)
        for attempt in range(3):  # fairseq's loop, without its retries of a full disk
            try:
                return torch.save(obj, f)
            except Exception as e:
                if full_disk(e) is not None:
                    raise
                if attempt == 2:
                    checkpoint_utils.logger.error(traceback.format_exc())
                    raise
                time.sleep(2.5)

    return _torch_persistent_save


def _one_line_on_a_full_disk(original):
    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        started = time.time()
        try:
            return original(cfg, trainer, epoch_itr, val_loss)
        except Exception as e:
            cause = full_disk(e)
            if cause is None:
                raise
            for partial in glob.glob(os.path.join(glob.escape(cfg.save_dir), "*.tmp")):
                if os.path.getmtime(partial) >= started - 1:  # this save's, not a user's file
                    os.remove(partial)
            last = os.path.join(cfg.save_dir, "checkpoint_last.pt")
            one = os.path.getsize(last) if os.path.exists(last) else state_bytes(trainer)
            free = shutil.disk_usage(cfg.save_dir).free
            resume = (
                "training resumes from checkpoint_last.pt, which is intact"
                if os.path.exists(last)
                else "training starts again from the beginning (no checkpoint was saved yet)"
            )
            message = (
                f"{cfg.save_dir}: no space left to save the checkpoint of update {trainer.get_num_updates()} "
                f"({cause.strerror}): a checkpoint takes {size(one)}, a save needs {size(2 * one)} free while it "
                "copies "
                f"it to checkpoint_last.pt, and {size(free)} is free. Nothing of this save was kept. Make room (or "
                f"give --save-dir another disk) and run the same command again: {resume}."
            )
            raise CheckpointDiskFull(message) from None

    return save_checkpoint


def apply() -> None:
    replace(checkpoint_utils, "_torch_persistent_save", _not_again_on_a_full_disk)
    replace(checkpoint_utils, "save_checkpoint", _one_line_on_a_full_disk)
