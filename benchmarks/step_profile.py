"""Where a training step's time goes: data loading, forward and backward, gradient norm, optimizer step.

fairseq's own Trainer runs the same training as ``benchmarks.speed`` (same flags, same data), and each
phase of an update is timed with the device synchronised at its edges: the data loader's ``next``,
the task's ``train_step`` (forward and backward), the trainer's ``clip_grad_norm`` and the optimizer's
``step`` (in half precision: fairseq's FP16Optimizer, which keeps float32 master weights). What is
left is the trainer's own bookkeeping. Then as many updates again under torch's profiler, which counts
the operator calls that compute in each phase (on a GPU, each launches a kernel or more from the host),
and on CUDA sorts the GPU's kernel time into attention (the fused kernels), matrix products,
multi-tensor kernels and everything else, and names the kernels that took longest.

    python -m benchmarks.step_profile --size big --train-args=--bf16 --out profile.md
    python -m benchmarks.step_profile --impl fairseq --size big --train-args=--bf16
    python -m benchmarks.step_profile --size big --train-args=--bf16 --flat-bf16-master-weights   # a lever

Synchronising at the phases' edges costs the overlap of host and device between them, so a step
here is a little slower than in ``benchmarks.speed``; the shares are what this measures. Kernel time
well under the step's means the GPU waits for the host.
"""

import argparse
import collections
import shlex
import time
import types

from benchmarks.common import print_table
from benchmarks.speed import SIZES, prepare_data, train_args

PHASES = ("data loading", "forward and backward", "gradient norm", "optimizer step")

# kernel names, lower-cased, by what they compute (cuDNN's attention kernels carry "sdpa" or "fmha")
KERNEL_KINDS = (
    ("attention", ("flash", "fmha", "sdpa", "attention", "mha")),
    ("matrix products", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul")),
    ("multi-tensor (optimizer, gradient norm)", ("multi_tensor", "adam", "foreach")),
)


def kernel_kind(name: str) -> str:
    """What a GPU kernel computes, from its name: one of KERNEL_KINDS' names, or "other"."""
    name = name.lower()
    for kind, marks in KERNEL_KINDS:
        if any(mark in name for mark in marks):
            return kind
    return "other"


def synchronised(times, phase, fn, sync):
    """``fn``, with the device synchronised before and after, its seconds added to ``times[phase]``, and
    marked for torch's profiler as ``phase: <phase>``."""
    import torch

    def timed(*args, **kwargs):
        sync()
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(f"phase: {phase}"):
                return fn(*args, **kwargs)
        finally:
            sync()
            times[phase] += time.perf_counter() - start

    return timed


def computes(event) -> bool:
    """Whether a call of a torch operator computes something: not a gradient detached, nor a tensor moved
    where it already is (``aten::to`` without a copy)."""
    if event.name == "aten::detach":
        return False
    return event.name != "aten::to" or any(child.name == "aten::_to_copy" for child in event.cpu_children)


def generated_kernel(event) -> bool:
    """Whether a profiler event is a call of a kernel that TorchInductor generated for a compiled region
    (``--compile-layers``): on a CPU, named ``graph_<n>_cpp_fused_<what it fuses>_<n>`` (with
    ``torch._inductor.config.cpp.enable_kernel_profile``, which ``profile`` sets)."""
    return "cpp_fused_" in event.name


def operator_calls(events) -> collections.Counter:
    """Calls of torch operators that compute (``aten::``, not those an operator makes itself) and of the kernels
    compiled regions generated, in each phase, from the profiler's events: a compiled region counts as the
    kernels it runs, generated or torch's (its matrix products), so that it cannot hide them. A call belongs to
    the phase whose mark it starts within, on any thread (backward runs in autograd's threads). On a GPU each
    launches a kernel or more from the host."""
    spans = [
        (e.time_range.start, e.time_range.end, e.name[len("phase: ") :]) for e in events if e.name.startswith("phase: ")
    ]
    calls = collections.Counter()
    for e in events:
        if not (e.name.startswith("aten::") or generated_kernel(e)) or (
            e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::")
        ):
            continue
        if not computes(e):
            continue
        for start, end, phase in spans:
            if start <= e.time_range.start <= end:
                calls[phase] += 1
                break
    return calls


def flatten_bf16_master_weights():
    """Make fairseq's FP16Optimizer keep bfloat16 training's float32 master weights in one flat tensor, as
    it does for float16 (for bf16 it keeps one tensor per parameter: "faster on TPUs", fairseq's comment),
    so that Adam and the gradient norm touch one tensor rather than hundreds: a lever measured here, not
    a setting of the plugin. fairseq's flat buffer lives on the current CUDA device (CUDA only)."""
    from fairseq.optim import fp16_optimizer

    original = fp16_optimizer.FP16Optimizer.build_optimizer.__func__

    def build_optimizer(cls, cfg, params, **kwargs):
        bf16, cfg.common.bf16 = cfg.common.bf16, False  # the only thing fairseq's choice to flatten reads
        try:
            return original(cls, cfg, params, **kwargs)
        finally:
            cfg.common.bf16 = bf16

    fp16_optimizer.FP16Optimizer.build_optimizer = classmethod(build_optimizer)


def build_trainer(argv):
    """fairseq-train's Trainer and its batches, one epoch after another, for the command line ``argv``, as
    fairseq_cli.train builds them."""
    from fairseq import options, tasks, utils
    from fairseq.data import iterators
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    # the plugin first: its patches (bf16_is_not_tpu among them) must be in place before the parsing
    utils.import_user_module(argparse.Namespace(user_dir=argv[argv.index("--user-dir") + 1]))
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    cfg = convert_namespace_to_omegaconf(args)
    utils.import_user_module(cfg.common)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    epochs = trainer.get_train_iterator(epoch=1, load_dataset=True)

    def batches():  # epoch after epoch: a large --max-tokens makes few updates of the benchmark's corpus
        while True:
            yield from iterators.GroupedIterator(epochs.next_epoch_itr(shuffle=True), cfg.optimization.update_freq[0])

    return trainer, batches()


def kernel_times(averages, steps: int):
    """GPU seconds per step by kind of kernel, and the kernels that took longest ((name, seconds per step),
    longest first), from the profiler's ``key_averages()``. Ranges marked with ``record_function`` (the
    phases here, fairseq's "forward" and "backward", torch.optim's "Optimizer.step#Adam.step") appear on the
    GPU's timeline too, as user annotations spanning the kernels they hold: they are not kernels, and
    counting them would count their kernels twice (the first GPU run did: "other" came to 84% of kernel
    time, and the "adam" in torch.optim's range made its span a multi-tensor kernel)."""
    import torch

    kinds, kernels = collections.Counter(), []
    for event in averages:
        if event.device_type != torch.autograd.DeviceType.CUDA or getattr(event, "is_user_annotation", False):
            continue
        seconds = event.self_device_time_total / 1e6 / steps
        kinds[kernel_kind(event.key)] += seconds
        kernels.append((event.key, seconds))
    return kinds, sorted(kernels, key=lambda k: -k[1])[:TOP_KERNELS]


TOP_KERNELS = 12


def profile(argv, steps: int, warmup: int) -> dict:
    """Run ``warmup`` updates, then ``steps`` timed ones, then ``steps`` under torch's profiler (which slows a
    step by its own bookkeeping: the phases' times come from the run without it). Returns a dict:
    ``phases`` (seconds per phase per step), ``step`` (seconds per step), ``tokens`` (target tokens per step),
    ``profiled_step`` (seconds per step under the profiler), ``calls`` (operator calls per phase per step),
    ``kernels`` ({kind: GPU seconds per step}) and ``top_kernels``, both None without CUDA."""
    import torch

    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch._inductor.config.cpp.enable_kernel_profile = True  # compiled regions' CPU kernels, named for the profiler
    trainer, batches = build_trainer(argv)
    times = collections.Counter()
    task, optimizer = trainer.task, trainer.optimizer  # the optimizer is built on first use
    task.train_step = synchronised(times, "forward and backward", task.train_step, sync)
    trainer.clip_grad_norm = synchronised(times, "gradient norm", trainer.clip_grad_norm, sync)
    optimizer.step = synchronised(times, "optimizer step", optimizer.step, sync)
    next_batch = synchronised(times, "data loading", lambda: next(batches), sync)

    def update():
        samples = next_batch()
        trainer.train_step(samples)
        return sum(s["ntokens"] for s in samples if s)

    def run(n):
        """(seconds per step, target tokens per step) of n updates"""
        tokens = 0
        sync()
        start = time.perf_counter()
        for _ in range(n):
            tokens += update()
        sync()
        return (time.perf_counter() - start) / n, tokens / n

    for _ in range(warmup):
        update()
    times.clear()
    step, tokens = run(steps)
    phases = {p: times[p] / steps for p in PHASES}
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        profiled_step, _ = run(steps)
    kernels, top = kernel_times(prof.key_averages(), steps) if cuda else (None, None)
    calls = operator_calls(prof.events())
    return {
        "phases": phases,
        "step": step,
        "tokens": tokens,
        "profiled_step": profiled_step,
        "calls": {p: calls[p] / steps for p in PHASES},
        "kernels": kernels,
        "top_kernels": top,
    }


def table(result: dict, title: str) -> str:
    phases, step, tokens, calls = result["phases"], result["step"], result["tokens"], result["calls"]
    rows = [
        f"{title}: {step * 1000:.1f} ms a step, {tokens:,.0f} target tokens, {tokens / step:,.0f} target tokens/s "
        f"(under torch's profiler, which counted the calls and kernels: {result['profiled_step'] * 1000:.1f} ms a "
        "step)",
        "",
        "| phase of a step | ms | share | operator calls |",
        "|---|---|---|---|",
    ]
    for phase in PHASES:
        rows.append(f"| {phase} | {phases[phase] * 1000:.1f} | {phases[phase] / step:.0%} | {calls[phase]:,.0f} |")
    rest = step - sum(phases.values())
    rows.append(f"| the trainer's bookkeeping | {rest * 1000:.1f} | {rest / step:.0%} | |")
    kernels = result["kernels"]
    if kernels is not None:
        busy = sum(kernels.values())
        rows += [
            "",
            f"GPU kernel time: {busy * 1000:.1f} ms a step ({busy / step:.0%} of the step without the profiler)",
            "",
            "| kernels | ms | share of kernel time |",
            "|---|---|---|",
        ]
        for kind, _ in (*KERNEL_KINDS, ("other", ())):
            rows.append(f"| {kind} | {kernels[kind] * 1000:.1f} | {kernels[kind] / busy:.0%} |")
        rows += [
            "",
            f"The {len(result['top_kernels'])} kernels that took longest:",
            "",
            "| kernel | kind | ms a step |",
            "|---|---|---|",
        ]
        for name, seconds in result["top_kernels"]:
            short = name if len(name) <= 90 else name[:87] + "..."
            rows.append(f"| `{short.replace('|', '/')}` | {kernel_kind(name)} | {seconds * 1000:.2f} |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/bench", help="benchmarks.speed's data (made on first use)")
    p.add_argument("--impl", choices=("vaswani", "fairseq"), default="vaswani")
    p.add_argument("--size", choices=sorted(SIZES), default="base")
    p.add_argument("--max-tokens", type=int, default=16384)
    p.add_argument("--steps", type=int, default=10, help="updates timed, then as many profiled")
    p.add_argument(
        "--warmup",
        type=int,
        default=25,
        help="updates before them (as benchmarks.speed leaves out its first 25: new batch shapes cost "
        "the first updates kernel choices and cuDNN's plans)",
    )
    p.add_argument("--train-args", default="", help="extra fairseq-train flags, e.g. --train-args=--bf16")
    p.add_argument(
        "--flat-bf16-master-weights", action="store_true", help=flatten_bf16_master_weights.__doc__.split(",")[0]
    )
    p.add_argument("--train-pairs", type=int, default=30000)
    p.add_argument("--vocab-size", type=int, default=2000)
    p.add_argument("--out", help="write the table here (markdown)")
    a = p.parse_args(argv)
    if a.flat_bf16_master_weights:
        import torch

        if not torch.cuda.is_available():
            p.error("--flat-bf16-master-weights needs CUDA: fairseq makes the flat buffer on the current CUDA device")
    layers, d_model, d_ff, heads = SIZES[a.size]
    sizes = types.SimpleNamespace(
        layers=layers,
        d_model=d_model,
        d_ff=d_ff,
        heads=heads,
        max_tokens=a.max_tokens,
        updates=a.warmup + a.steps + 1,
        log_interval=1000,
        train_args=a.train_args,
    )
    bin_dir = prepare_data(a.work, a.train_pairs, a.vocab_size)
    if a.flat_bf16_master_weights:
        flatten_bf16_master_weights()
    result = profile(train_args(a.impl, bin_dir, sizes), a.steps, a.warmup)
    title = (
        f"{a.impl} at {a.size} size ({layers}+{layers} layers, d_model {d_model}), {a.max_tokens} tokens, "
        f"{shlex.join(shlex.split(a.train_args)) or 'float32'}"
        f"{', flat master weights' if a.flat_bf16_master_weights else ''}, "
        f"{a.steps} updates after {a.warmup}"
    )
    print_table(table(result, title), a.out)


if __name__ == "__main__":
    main()
