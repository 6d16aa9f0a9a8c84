"""A speed seam: each encoder and decoder layer's training forward pass compiled by ``torch.compile``.

The paper's layers (transformer_layer.py) run eagerly as one call of torch per operation: on a GPU each call
launches a kernel from the host, and at big size a training step issued about 3,200 of them (docs/benchmarks.md,
"Operator calls a step"). Compiled, a layer's residual additions, dropouts, LayerNorms, activation and their
backward passes are fused by TorchInductor into a few generated kernels between the matrix products and the fused
attention, which stay library calls. Regional compilation (one layer's function, not the whole model) compiles
each kind of layer once for all N of it: the function is the same and the parameters are its inputs.

``--compile-layers``:

- ``auto`` (the default): compiled on a CUDA device, eager elsewhere. On a CPU (2 cores, base size, 4,096 tokens)
  a compiled step took 5.52 s against the eager 4.18 s, after about 30 s of compilation (docs/benchmarks.md); on
  a GPU, where the host's calls are what a step waits on, the GPU issue measures it.
- ``on``: compiled on any device (how the CPU tests and the step profile hold and count it).
- ``off``: always eager, the plain path.

What is compiled, and what is not:

- only a layer in training mode (``module.train()``), computing every position at once: validation, scoring,
  beam search's incremental steps and a layer asked for its attention weights run eagerly, as before;
- the compiled function is the paper's layer itself (``EncoderLayer.sublayers``, ``DecoderLayer.sublayers``),
  traced whole (``fullgraph``); it computes the same function, and tests/unit/modules/test_compiled_layers.py holds
  its outputs and gradients to the eager layer's;
- dropout inside a compiled layer is torch's (P_drop exactly, drawn by the compiled kernels), whatever
  ``--dropout-masks`` says: packed masks are an eager CPU trick that the compiler's fused masks replace. The masks
  differ from the eager path's, as two seeds' do;
- shapes are dynamic (``dynamic=True``): the batch size and lengths of real text's batches are symbols, so a new
  batch shape does not compile again. A graph is compiled again for a batch of one sentence or one position
  (torch specialises sizes 0 and 1), for a batch with no padding (no mask) and for the forward pass without
  autograd that activation checkpointing runs first: a handful over a whole run (the test counts them over an
  epoch of real text).

Should torch.compile's backend fail (no C++ compiler for a CPU's kernels, a fault of Triton's on a GPU), the
run says so in its log and goes on with that kind of layer eager; an error in tracing the layer is raised.

On a CPU whose kernels are chosen by ``ATEN_CPU_CAPABILITY`` (another processor's numbers, as make test-kernels
computes them), the layers stay eager and the log says so once: TorchInductor's generated code follows that
variable too, and torch 2.13's is wrong under it on an AVX-512 machine with one thread (NaN logits and a
segmentation fault at ``avx2``; a C++ compile error at ``default``).

The criterion's loss goes through the same seam (``--compile-loss``, the criterion's flag, with the same three
modes): criterions/label_smoothed_cross_entropy.py's ``smoothed_loss_from_logits``, in training only.

Modules, state dicts and checkpoints are untouched: a model trained with compiled layers loads, averages and
exports as any other, and the flag can be changed on resume.
"""

import functools
import logging
import os

import torch
from torch import Tensor

logger = logging.getLogger(__name__)

MODES = ("auto", "on", "off")  # --compile-layers


def mode_of(cfg) -> str:
    """``--compile-layers``, "auto" for configurations saved before the flag existed; any other value is refused."""
    mode = getattr(cfg, "compile_layers", None) or "auto"
    if mode not in MODES:
        raise ValueError(f"--compile-layers {mode}: choose from {', '.join(MODES)}")
    return mode


def applies(mode: str, module: torch.nn.Module, x: Tensor) -> bool:
    """Whether ``module`` (a layer in ``mode``) runs its compiled function on input ``x``: in training mode, on a
    CUDA device under "auto", on any device under "on"; never while torch.compile is tracing already (a model
    compiled whole by its user compiles the layers with it)."""
    if mode == "off" or not module.training or torch.compiler.is_compiling():
        return False
    return mode == "on" or x.device.type == "cuda"


def graphs_compiled() -> int:
    """How many graphs torch.compile has compiled in this process."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


class CompiledFunction:
    """``function`` compiled whole with dynamic shapes; each compilation is logged, with the input's shape, so
    that a run's log says how often its layers compiled (tests hold that count to a small bound). Its first tensor
    argument (a layer's input, the loss's logits) is the input whose device and shape count."""

    def __init__(self, function):
        self.function = function
        self.compiled = torch.compile(function, dynamic=True, fullgraph=True)
        self.failed = None  # why the function runs eagerly: the compiler's error, or a CPU's kernel choice

    def __call__(self, *args):
        x = next(a for a in args if isinstance(a, Tensor))
        if self.failed is None and x.device.type == "cpu" and os.environ.get("ATEN_CPU_CAPABILITY"):
            self.failed = f"ATEN_CPU_CAPABILITY={os.environ['ATEN_CPU_CAPABILITY']}"
            logger.warning(
                f"torch.compile: {self.failed} chooses the kernels, and torch.compile's generated code under it "
                f"is not trusted (NaN or a crash seen); {self.function.__qualname__} runs eagerly"
            )
        if self.failed is not None:
            return self.function(*args)
        before = graphs_compiled()
        try:
            out = self.compiled(*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:  # e.g. no C++ compiler, a Triton fault
            self.failed = error
            logger.warning(
                f"torch.compile: its backend failed on {self.function.__qualname__} "
                f"({type(error.inner_exception).__name__}: {str(error.inner_exception).splitlines()[0][:300]}); "
                "it runs eagerly for the rest of the run (--compile-layers off, --compile-loss off say so from the "
                "start)"
            )
            return self.function(*args)
        if graphs_compiled() > before:
            masks = [a for a in args if a is None or (isinstance(a, Tensor) and a.dim() == 4)]  # attention masks
            masks = "; masks: " + ", ".join("none" if mask is None else "a mask" for mask in masks) if masks else ""
            logger.info(
                f"torch.compile: compiled {self.function.__qualname__} for input {tuple(x.shape)} "
                f"({'with' if torch.is_grad_enabled() else 'without'} autograd{masks}), "
                f"{graphs_compiled()} graphs compiled in this process"
            )
        return out


@functools.lru_cache(maxsize=None)
def compiled(function) -> CompiledFunction:
    """``function`` (a layer's unbound ``sublayers``, the criterion's loss) compiled, once for every layer of its
    class."""
    return CompiledFunction(function)
