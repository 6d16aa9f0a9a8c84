"""bfloat16 training's float32 master weights copied in multi-tensor calls.

fairseq's FP16Optimizer keeps bfloat16 training's float32 master weights as one tensor per parameter (it
flattens them for float16 only: "faster on TPUs", its comment), and every update copies each gradient to its
master (``_sync_fp16_grads_to_fp32``), each master back to its parameter (``_sync_fp32_params_to_fp16``) and
zeroes each master's gradient (``zero_grad``): three Python loops, about 580 operator calls an update for the
194 tensors of a 6+6-layer model, each a kernel launched from the host on a GPU. This patch makes each loop one
``_foreach_copy_`` or ``_foreach_zero_`` call, with the values fairseq's copies give. The master weights stay
one tensor per parameter, so the optimizer's state and the checkpoints are fairseq's, and the float16 path
(flat already) is fairseq's own.

Taken where every master and its parameter have a gradient on the same device (the case after any backward
pass); a parameter without a gradient, or one not trained, goes through fairseq's loop, as does everything
with ``TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0`` in the environment (multi_tensor_adam.py).
"""

import torch
from fairseq.optim import fp16_optimizer

from ._patching import replace
from .multi_tensor_adam import enabled

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

Mixin = fp16_optimizer._FP16OptimizerMixin


def _pairs(self):
    """(parameter, master) pairs of a non-flat FP16Optimizer, or None where fairseq's loops must run."""
    if not enabled() or self.has_flat_params:
        return None
    pairs = list(zip(self.fp16_params, self.fp32_params))
    for p, p32 in pairs:
        if not p.requires_grad or p.device != p32.device:
            return None
    return pairs


def _grads_to_fp32(original):
    def _sync_fp16_grads_to_fp32(self):
        pairs = _pairs(self) if self._needs_sync else None
        if pairs is None or any(p.grad is None or p32.grad is None for p, p32 in pairs):
            return original(self)
        torch._foreach_copy_([p32.grad.data for _, p32 in pairs], [p.grad.data for p, _ in pairs])
        self._needs_sync = False

    _sync_fp16_grads_to_fp32.__wrapped__ = original
    return _sync_fp16_grads_to_fp32


def _params_to_fp16(original):
    def _sync_fp32_params_to_fp16(self):
        pairs = _pairs(self)
        if pairs is None:
            return original(self)
        torch._foreach_copy_([p.data for p, _ in pairs], [p32.data for _, p32 in pairs])

    _sync_fp32_params_to_fp16.__wrapped__ = original
    return _sync_fp32_params_to_fp16


def _zero_grad(original):
    def zero_grad(self):
        pairs = _pairs(self)
        if pairs is None or any(p32.grad is None for _, p32 in pairs):
            return original(self)
        for p in self.fp16_params:
            p.grad = None
        torch._foreach_zero_([p32.grad for _, p32 in pairs])
        self._needs_sync = False
        if self.scaler is not None:
            self._multiply_factor = 1.0 / float(self.scaler.loss_scale)

    zero_grad.__wrapped__ = original
    return zero_grad


def apply() -> None:
    replace(Mixin, "_sync_fp16_grads_to_fp32", _grads_to_fp32)
    replace(Mixin, "_sync_fp32_params_to_fp16", _params_to_fp16)
    replace(Mixin, "zero_grad", _zero_grad)
