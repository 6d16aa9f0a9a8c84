"""The choice of attention kernel, by speed; the paper's modules call it and never branch on devices.

``use_fused_attention(q, k, need_weights, training)``: whether Eq. (1) is computed by torch's fused
``F.scaled_dot_product_attention`` or explicitly (multihead_attention.py holds both). Always fused
on a GPU; on a CPU explicit only for short attention in evaluation (generation), where it is faster.
Both compute the function the paper writes; tests/unit/modules/test_fast_paths.py holds them
to it, and what the choice was measured to save is in commit 1f3eb75 (CHANGELOG.md). (The other CPU
speed trick, packed dropout masks, changes P_drop slightly and is a flag in dropout.py.)

``fused_kernels(q)``: which of torch's fused kernels may compute it on q's device. On a CUDA device every one
but cuDNN's (flash, memory-efficient, math), unless ``TRANSFORMER_PLUGIN_CUDNN_ATTENTION=1`` is in the
environment. torch 2.11 prefers cuDNN's kernel on Hopper GPUs, and cuDNN builds an execution graph for every
new shape of its inputs, which torch keeps for the shape: a fixed-shape benchmark builds once, but batches of
real text have a new (batch, source length, target length) almost every update of a first epoch, and beam
search a new key length at every step. On an H200 (commit 7b73f68) an update of
the short budget's model (3+3 layers of 256) on 77k pairs took 0.367 s in fairseq-train, against 0.033 s for
the same update with a fixed shape, and 94% of the host's time went to the attention's forward and backward
calls (about 60 ms a new shape), where flash and memory-efficient kernels build nothing.
"""

import contextlib
import os

from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

EXPLICIT_MAX_SCORES = 64 * 64  # on a CPU without backward pass, T * S up to which Eq. (1) is explicit


def use_fused_attention(q: Tensor, k: Tensor, need_weights: bool, training: bool) -> bool:
    """Whether Eq. (1) on q (B, h, T, d_k), k (B, h, S, d_k) is computed by torch's fused kernel.

    Not when the attention weights are wanted (only the explicit path returns them). On a GPU,
    always. On a CPU, in training (a backward pass follows, and the fused kernel's backward is the
    faster one) or when a head has more than ``EXPLICIT_MAX_SCORES`` query-key pairs; short
    attention in evaluation (validation, the encoder and each step of generation) is faster with two
    matrix products. The choice follows the module's mode, not autograd's: with
    --checkpoint-activations a layer's forward pass runs without autograd and is recomputed with it,
    and both must take the same path, which draws the same attention dropout masks.
    """
    if need_weights:
        return False
    if q.device.type != "cpu":
        return True
    return training or q.size(-2) * k.size(-2) > EXPLICIT_MAX_SCORES


# "1": cuDNN's attention kernel allowed on CUDA devices too (torch then prefers it on Hopper GPUs)
CUDNN_ATTENTION = os.environ.get("TRANSFORMER_PLUGIN_CUDNN_ATTENTION", "") == "1"
WITHOUT_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_kernels(q: Tensor):
    """The context in which torch's fused attention runs on q's device: on a CUDA device, its kernels but
    cuDNN's (unless CUDNN_ATTENTION), which builds a graph for every new shape (the module's docstring);
    elsewhere, torch's own choice."""
    if q.device.type != "cuda" or CUDNN_ATTENTION:
        return contextlib.nullcontext()
    return sdpa_kernel(WITHOUT_CUDNN)
