"""Speed files from FLOPs, where no machine of the kind was measured: seconds an update of each candidate model
(recipes/planner/budget/candidates.py) at each device's share that a speed file times, from 6 FLOPs a parameter a
token at a share of the device's peak. An H100 in bf16 by default: 989 TFLOP/s dense, 30% MFU at a full
micro-batch (half of it at 2,048 tokens), 3 ms of host calls a layer a micro-batch and 10 ms an update (the optimizer's
step). What the docs' table of picks (benchmarks/picks_table.py) and the tests plan with; ``vaswani-speed-probe file``
measures a real machine."""

import math
from typing import Dict

from recipes.planner.budget import candidates
from recipes.planner.model import Model
from recipes.planner.speed.speed_file import write_speed_file

H100_BF16_FLOPS = 989e12


def write(
    path: str,
    device: str = "cuda",
    peak_flops: float = H100_BF16_FLOPS,
    mfu: float = 0.3,
    host_seconds: float = 0.003,
    overhead: float = 0.01,
    max_tokens_per_device: int = 4096,
    half_at: int = 2048,
) -> Dict:
    """The speed file at ``path`` of a device (``cuda``, or ``cpu``) of ``peak_flops``, reaching ``mfu`` of them at a
    large micro-batch (of at most ``max_tokens_per_device`` tokens) and half that at ``half_at`` tokens (0: at every
    micro-batch, as a CPU core's seconds grow with its tokens)."""

    def speed(probe) -> Dict[str, float]:
        m = Model.from_flags(probe.arch, probe.model_flags)
        p, share = m.parameters(probe.vocab_size), probe.tokens_per_update
        micro = min(share, max_tokens_per_device)
        efficiency = mfu * micro / (micro + half_at)
        a_micro_batch = host_seconds * (m.encoder_layers + m.decoder_layers) + micro * 6 * p / (peak_flops * efficiency)
        return {"seconds": math.ceil(share / micro) * a_micro_batch + overhead}

    models = [(arch, flags) for arch, flags, _ in candidates.MODELS]
    precision = "bf16" if device == "cuda" else "fp32"
    return write_speed_file(
        path, models, device, precision, max_tokens_per_device, 32000, None, None, speed=speed, progress=lambda _: None
    )
