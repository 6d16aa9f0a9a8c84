"""A fine-tuning starts its clock at zero.

fairseq keeps a run's training time in each checkpoint (``extra_state["previous_training_time"]``) and restores it
whenever a checkpoint is loaded, so that ``--stop-time-hours`` counts a resumed run's whole time. It restores it also
under ``--finetune-from-model`` (and ``--reset-meters``), which starts a new run from another one's weights: a parent
trained for 10 hours stops a fine-tuning of ``--stop-time-hours 1`` after its first update. With this patch a load
that resets the meters resets the clock with them; resuming a run (checkpoint_last.pt, no reset) keeps it.
"""

import time

from fairseq.trainer import Trainer

from ._patching import replace

UPSTREAM = None  # no upstream issue found
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _reset_with_the_meters(original):
    def load_checkpoint(
        self, filename, reset_optimizer=False, reset_lr_scheduler=False, optimizer_overrides=None, reset_meters=False
    ):
        extra_state = original(
            self, filename, reset_optimizer, reset_lr_scheduler, optimizer_overrides, reset_meters=reset_meters
        )
        if reset_meters:
            self._previous_training_time = 0
            self._start_time = time.time()
        return extra_state

    return load_checkpoint


def apply() -> None:
    replace(Trainer, "load_checkpoint", _reset_with_the_meters)
