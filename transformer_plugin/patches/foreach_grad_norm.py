"""The gradient norm in multi-tensor calls where fairseq has no fused kernel for it.

Without the ``amp_C`` extension (apex's; fairseq-fixed's wheels and a build without CUDA extensions have
none), ``fairseq.utils.clip_grad_norm_`` takes one norm per gradient tensor and stacks them: 195 operator
calls that compute for a 6+6-layer model every update (counted by benchmarks/step_profile.py), each a
kernel launched from the host on a GPU, where it also warns at every update. This patch computes the same
total norm with torch's ``get_total_norm(foreach=True)`` (one multi-tensor call per device and dtype) and
clips with fairseq's coefficient. It does so only where every
gradient is float32 (fairseq takes the norms in float32) on a CPU or a CUDA device and no parameter is a
mixture-of-experts' expert; anything else goes to fairseq's own code, as does everything where ``amp_C``
is there.
"""

import torch
from fairseq import utils

from ._patching import replace

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _foreach(original):
    def clip_grad_norm_(params, max_norm, aggregate_norm_fn=None) -> torch.Tensor:
        if isinstance(params, torch.Tensor):
            params = [params]
        params = list(params)
        grads = [p.grad.detach() for p in params if p is not None and getattr(p, "grad", None) is not None]
        if (
            utils.multi_tensor_l2norm_available
            or len(grads) < 2
            or any(hasattr(p, "expert") for p in params)
            or any(g.dtype != torch.float32 or g.device.type not in ("cpu", "cuda") for g in grads)
        ):
            return original(params, max_norm, aggregate_norm_fn)
        total_norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)
        if aggregate_norm_fn is not None:
            total_norm = aggregate_norm_fn(total_norm)
        if max_norm > 0:
            clip_coef = (float(max_norm) / (total_norm + 1e-6)).clamp_(max=1)
            torch._foreach_mul_(grads, clip_coef)
        return total_norm

    clip_grad_norm_.__wrapped__ = original
    return clip_grad_norm_


def apply() -> None:
    replace(utils, "clip_grad_norm_", _foreach)
