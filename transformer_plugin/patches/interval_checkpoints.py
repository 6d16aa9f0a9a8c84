"""Every ``--save-interval-updates`` state under its update's name, epoch end or not, when epoch checkpoints
are off.

fairseq's ``save_checkpoint`` names a save ``checkpoint_{epoch}_{updates}.pt`` only away from an epoch end: a
save interval that lands on an epoch end is written as ``checkpoint{epoch}.pt`` alone, or, with
``--no-epoch-checkpoints``, only as ``checkpoint_last.pt``, which the next save overwrites. Averaging "the
last N checkpoints" (Section 6.1: checkpoints written at fixed intervals) then has to keep every epoch's
checkpoint as well, in case one of them is such a state (N more checkpoints of 2.6 GB each for the big
model), or lose that state.

With ``--no-epoch-checkpoints`` and ``--save-interval-updates K`` this patch also writes that state as
``checkpoint_{epoch}_{updates}.pt`` (an atomic copy of ``checkpoint_last.pt``) and applies
``--keep-interval-updates`` to it as fairseq does between epoch ends: every K updates have their numbered
checkpoint, and a run keeps N of them, the last and the best, and no epoch checkpoint that nothing uses.
With epoch checkpoints on, nothing changes (the state is ``checkpoint{epoch}.pt``).
"""

import os

from fairseq import checkpoint_utils

from ._patching import replace

UPSTREAM = None  # fairseq's own condition: `not end_of_epoch and cfg.save_interval_updates > 0 and ...`
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def applies(cfg, end_of_epoch: bool, updates: int) -> bool:
    """Whether this save is an interval state at an epoch end that fairseq did not write under its name."""
    return bool(
        cfg.no_epoch_checkpoints
        and cfg.save_interval_updates > 0
        and not cfg.no_save
        and not cfg.no_last_checkpoints
        and end_of_epoch
        and updates > 0
        and updates % cfg.save_interval_updates == 0
    )


def _and_the_interval_state_at_an_epoch_end(original):
    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        result = original(cfg, trainer, epoch_itr, val_loss)
        updates = trainer.get_num_updates()
        if not (applies(cfg, epoch_itr.end_of_epoch(), updates) and trainer.should_save_checkpoint_on_current_rank):
            return result
        suffix = trainer.checkpoint_suffix
        last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
        numbered = os.path.join(cfg.save_dir, f"checkpoint_{epoch_itr.epoch}_{updates}{suffix}.pt")
        if os.path.exists(last) and not os.path.exists(numbered):
            checkpoint_utils.PathManager.copy(last, numbered, overwrite=True)
        if cfg.keep_interval_updates > 0 and cfg.keep_interval_updates_pattern == -1:
            kept = checkpoint_utils.checkpoint_paths(cfg.save_dir, pattern=rf"checkpoint_\d+_(\d+){suffix}\.pt")
            for old in kept[cfg.keep_interval_updates :]:  # newest first
                if os.path.lexists(old):
                    os.remove(old)
        return result

    return save_checkpoint


def apply() -> None:
    replace(checkpoint_utils, "save_checkpoint", _and_the_interval_state_at_an_epoch_end)
