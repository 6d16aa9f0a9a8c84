"""fairseq's Adam in multi-tensor calls: each operation once for all of a group's parameters.

Without apex's fused Adam (fairseq-fixed's wheels and a build without CUDA extensions have none),
``--optimizer adam`` steps with ``fairseq.optim.adam.Adam``, a Python loop over the parameters: 7 operator
calls that compute for each (1,351 an update for the 194 tensors of a 6+6-layer model, counted by
benchmarks/step_profile.py; on a GPU each launches a kernel from the host). This patch takes the same
update, operation by operation (the same operations in fairseq's order, with its arguments: decoupled weight
decay, its bias correction, amsgrad), in torch's ``_foreach_`` calls: 7 calls a group. The state is fairseq's
(``step`` an int, ``exp_avg`` and ``exp_avg_sq`` a float32 tensor for each parameter), so a checkpoint written
with or without it resumes under either.

It steps this way only where every parameter with a gradient is float32 and dense, and all of a group's sit
on one device: bfloat16 training's float32 master weights (FP16Optimizer), float32 and amp training. The
memory-efficient optimizers' half-precision parameters, and anything else, go to fairseq's loop, as does
everything with ``TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0`` in the environment (the plain path, for a
comparison). On a CPU torch computes each ``_foreach_`` call tensor by tensor with the loop's own kernels (the
tests hold the two to 1e-6 over 50 updates, and a bfloat16 training run of each path to the other's parameters).
On a GPU the multi-tensor kernels may round differently; that has not been compared on a GPU yet.
"""

import collections
import math
import os

import torch
from fairseq.optim import adam

from ._patching import replace

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

OFF = "TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER"  # "0": fairseq's per-tensor loops (this and master_weights)


def enabled() -> bool:
    """Whether the optimizer's multi-tensor steps are on (``TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER`` not "0")."""
    return os.environ.get(OFF, "1") != "0"


def _takes(groups) -> bool:
    """Whether every group's parameters with a gradient are float32, dense and on one device."""
    for group in groups:
        devices = set()
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.dtype != torch.float32 or p.grad.dtype != torch.float32 or p.grad.is_sparse or p.is_sparse:
                return False
            devices.add(p.device)
        if len(devices) > 1:
            return False
    return True


def _state_of(optimizer, p, amsgrad: bool) -> dict:
    """``p``'s state, made as fairseq's loop makes it (zeros, step 0) or moved to ``p``'s device and dtype
    (a state loaded from a checkpoint), as the loop moves it."""
    state = optimizer.state[p]
    if len(state) == 0:
        state["step"] = 0
        state["exp_avg"] = torch.zeros_like(p)
        state["exp_avg_sq"] = torch.zeros_like(p)
        if amsgrad:
            state["max_exp_avg_sq"] = torch.zeros_like(p)
    else:
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq"):
            if state[key].device != p.device or state[key].dtype != p.dtype:
                state[key] = state[key].to(p)
    return state


def step_group(optimizer, group) -> None:
    """One Adam update of ``group``'s parameters with a gradient, as fairseq's loop computes it, in
    ``_foreach_`` calls (parameters whose states count different steps are updated step count by step count)."""
    amsgrad = group.get("amsgrad", False)
    by_step = collections.defaultdict(list)
    for p in group["params"]:
        if p.grad is not None:
            state = _state_of(optimizer, p, amsgrad)
            state["step"] += 1
            by_step[state["step"]].append((p, state))
    beta1, beta2 = group["betas"]
    lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
    for step, held in by_step.items():
        params = [p.data for p, _ in held]
        grads = [p.grad.data for p, _ in held]
        exp_avg = [state["exp_avg"] for _, state in held]
        exp_avg_sq = [state["exp_avg_sq"] for _, state in held]
        torch._foreach_mul_(exp_avg, beta1)
        torch._foreach_add_(exp_avg, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1 - beta2)
        if amsgrad:
            max_exp_avg_sq = [state["max_exp_avg_sq"] for _, state in held]
            torch._foreach_maximum_(max_exp_avg_sq, exp_avg_sq)
            denom = torch._foreach_sqrt(max_exp_avg_sq)
        else:
            denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_add_(denom, eps)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr * math.sqrt(bias_correction2) / bias_correction1
        if weight_decay != 0:
            torch._foreach_add_(params, params, alpha=-weight_decay * lr)
        torch._foreach_addcdiv_(params, exp_avg, denom, value=-step_size)


def _multi_tensor(original):
    def step(self, closure=None):
        if not enabled() or not _takes(self.param_groups):
            return original(self, closure)
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            step_group(self, group)
        return loss

    step.__wrapped__ = original
    return step


def apply() -> None:
    replace(adam.Adam, "step", _multi_tensor)
