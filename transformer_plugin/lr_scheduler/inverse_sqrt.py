"""Section 5.3, Eq. (3): the learning rate of the paper, as a fairseq ``--lr-scheduler``.

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

linear warm-up for the first ``warmup_steps`` (4000) updates, then decay with the inverse square
root of the step number; the peak, at step_num = warmup_steps, is (d_model * warmup_steps)^-0.5
(6.99e-4 for d_model 512, 4.94e-4 for 1024). ``--lr-multiplier`` scales the whole curve (1 in the
paper; for users who train with larger batches).

``--peak-warmup-updates N`` (not in the paper, off by default) is for training budgets too short for
4000 warm-up updates: a shorter ``--warmup-updates`` alone would raise the peak with it, as
warmup_steps^-0.5. With N set, the curve is scaled by (warmup_updates / N)^0.5 so that it still peaks
at (d_model * N)^-0.5, the paper's peak for N warm-up updates, reached after ``--warmup-updates``.

step_num counts from 1: the k-th update is taken with lrate(k). fairseq calls ``step_update(n)``
after n updates, so this sets lrate(n + 1) there.

The paper's optimizer (Section 5.3) is fairseq's ``--optimizer adam --adam-betas '(0.9, 0.98)'
--adam-eps 1e-09``; ``--lr`` is not used by this schedule.
"""

import logging

from fairseq.optim.lr_scheduler import FairseqLRScheduler, register_lr_scheduler
from omegaconf.errors import InterpolationResolutionError

from ..config import VaswaniInverseSqrtConfig

logger = logging.getLogger(__name__)


def paper_lrate(
    step_num: int, d_model: int, warmup_steps: int = VaswaniInverseSqrtConfig.warmup_updates, multiplier: float = 1.0
) -> float:
    """Eq. (3) for step_num >= 1."""
    if step_num < 1:
        raise ValueError(f"Eq. (3) is defined for step_num >= 1, got {step_num}")
    return multiplier * d_model**-0.5 * min(step_num**-0.5, step_num * warmup_steps**-1.5)


def effective_multiplier(warmup_steps: int, multiplier: float = 1.0, peak_warmup_steps=None) -> float:
    """The factor on Eq. (3): ``multiplier``, times (warmup_steps / peak_warmup_steps)^0.5 when the peak
    is held at the one of ``peak_warmup_steps`` warm-up updates (``--peak-warmup-updates``)."""
    if peak_warmup_steps is None:
        return multiplier
    return multiplier * (warmup_steps / peak_warmup_steps) ** 0.5


@register_lr_scheduler("vaswani_inverse_sqrt", dataclass=VaswaniInverseSqrtConfig)
class VaswaniInverseSqrtSchedule(FairseqLRScheduler):
    def __init__(self, cfg: VaswaniInverseSqrtConfig, optimizer):
        super().__init__(cfg, optimizer)
        try:
            d_model = cfg.d_model  # by default the model's (model.d_model)
        except InterpolationResolutionError:  # a model without d_model, in a hydra config
            d_model = None
        if d_model is None:
            raise ValueError(
                "--lr-scheduler vaswani_inverse_sqrt needs d_model for Eq. (3): use a vaswani_* --arch"
                " or give --d-model (lr_scheduler.d_model in a hydra config)"
            )
        if cfg.warmup_updates < 1:
            raise ValueError(f"--warmup-updates must be at least 1, got {cfg.warmup_updates}")
        if cfg.lr_multiplier <= 0:
            raise ValueError(f"--lr-multiplier must be positive, got {cfg.lr_multiplier}")
        peak_warmup = getattr(cfg, "peak_warmup_updates", None)
        if peak_warmup is not None and peak_warmup < 1:
            raise ValueError(f"--peak-warmup-updates must be at least 1, got {peak_warmup}")
        self.d_model, self.warmup_steps = d_model, cfg.warmup_updates
        self.multiplier = effective_multiplier(cfg.warmup_updates, cfg.lr_multiplier, peak_warmup)
        logger.info(
            f"Eq. (3) with d_model={self.d_model}, warmup_steps={self.warmup_steps}, multiplier={self.multiplier}:"
            f" peak lr {self.lrate(self.warmup_steps):.3e} at update {self.warmup_steps} (--lr is not used)"
        )
        self.lr = self.lrate(1)
        self.optimizer.set_lr(self.lr)

    def lrate(self, step_num: int) -> float:
        return paper_lrate(step_num, self.d_model, self.warmup_steps, self.multiplier)

    def step(self, epoch, val_loss=None):
        super().step(epoch, val_loss)
        return self.optimizer.get_lr()

    def step_update(self, num_updates):
        """Called after ``num_updates`` updates: set the rate of update ``num_updates + 1``."""
        self.lr = self.lrate(num_updates + 1)
        self.optimizer.set_lr(self.lr)
        return self.lr
