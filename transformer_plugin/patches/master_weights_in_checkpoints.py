"""Half-precision training resumes with its float32 master weights, not with their rounding.

fairseq's FP16Optimizer (``--bf16``, ``--fp16``) keeps float32 master weights, steps them and copies them into the
model's half-precision parameters. A checkpoint holds the model and the optimizer's moments, not the master
weights, and on resuming fairseq builds them again from the model's half-precision parameters: every weight is
rounded to bfloat16's 8 bits of mantissa (float16's 11) at each resume. A run stopped and resumed then ends with
other parameters than one run straight through (on CPU, a tiny model after 6 + 6 updates of bfloat16: 715 of
the 2,048 embedding weights differ, by up to 0.002).

With this patch the optimizer's state dict (the checkpoint's ``last_optimizer_state``) also holds the master
weights under ``MASTER_WEIGHTS``, and loading it copies them back: a resumed run's parameters are those of the
run straight through. The checkpoint grows by 4 bytes a parameter (the big model's ``checkpoint_last.pt`` from
about 2.6 GB to 3.4 GB). The model in the checkpoint is unchanged: averaging, generation and the exports read
what they read before. A checkpoint without the master weights (saved before, or by fairseq alone) loads as
fairseq loads it, and so does one whose weights do not match the model's shapes (said in the log); with
``--reset-optimizer`` or ``--finetune-from-model`` nothing of the optimizer is loaded, as in fairseq.
"""

import logging

import torch
from fairseq.optim import fp16_optimizer

from ._patching import replace

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

MASTER_WEIGHTS = "fp32_master_weights"  # the key in the optimizer's state dict

logger = logging.getLogger(__name__)

Mixin = fp16_optimizer._FP16OptimizerMixin


def masters(optimizer) -> list:
    """The master weights' tensors: one for each parameter (bfloat16's), or one flat for each device (float16's)."""
    held = optimizer.fp32_params
    if torch.is_tensor(held):
        return [held.data]
    if isinstance(held, dict):
        return [p.data for p in held.values()]
    return [p.data for p in held]


def _saves(original):
    def state_dict(self):
        state = original(self)
        state[MASTER_WEIGHTS] = masters(self)
        return state

    state_dict.__wrapped__ = original
    return state_dict


def _loads(original):
    def load_state_dict(self, state_dict, optimizer_overrides=None):
        saved = state_dict.get(MASTER_WEIGHTS)
        if saved is not None:
            state_dict = {k: v for k, v in state_dict.items() if k != MASTER_WEIGHTS}
        result = original(self, state_dict, optimizer_overrides)
        if saved is None:
            return result
        mine = masters(self)
        if len(saved) != len(mine) or any(a.shape != b.shape for a, b in zip(saved, mine)):
            logger.warning(
                "the checkpoint's float32 master weights (%d tensors) do not match this model's (%d): they are "
                "made again from the model's half-precision parameters, as fairseq makes them",
                len(saved),
                len(mine),
            )
            return result
        with torch.no_grad():
            torch._foreach_copy_(mine, [s.to(m.device) for s, m in zip(saved, mine)])
        return result

    load_state_dict.__wrapped__ = original
    return load_state_dict


def apply() -> None:
    replace(Mixin, "state_dict", _saves)
    replace(Mixin, "load_state_dict", _loads)
