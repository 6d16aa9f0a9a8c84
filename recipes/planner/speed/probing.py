"""How long one training update of a model takes on this machine: a probe of a few updates on synthetic
batches (its figures are kept by :mod:`.probe_cache`).

The probe builds the model as fairseq-train would (``--arch`` and its flags, through fairseq's own parser) with a
vocabulary of the given size, and times what an update does: forward, label-smoothed cross entropy and backward
on micro-batches of sentences of ``--length`` pieces (per target token), then the gradients summed over the
workers (gloo, as fairseq's ``legacy_ddp`` does for CPU workers) and an Adam step. An update of
``--tokens-per-update`` target tokens is split over ``--workers`` processes that run side by side with ``--threads``
torch threads each (the recipes' CPU workers), or runs on one CUDA device in fairseq's own micro-batches of
``--max-tokens`` (its update frequency: a device's time is far from proportional to its tokens), where a CPU's
micro-batch of at most MICRO_TOKENS is counted per token. The first of each is not counted (memory, kernels); the
figures are medians. ``seconds_an_update`` (recipes/planner/probe_arithmetic.py) is the arithmetic, apart from the
timing.

What it leaves out: data loading (fairseq's batches come from memory-mapped files, a few percent on CPU),
validation and checkpoints (a tenth of the budget is left for them), and that fairseq's batches, bounded by
``--max-tokens`` on their longer side with its padding, hold fewer target tokens than the probe's. Measured on
2026-11-27 against a real run (docs/benchmarks.md, "Time"): fairseq's updates held 83% of the probe's tokens and
took 2.57 s against the probe's 3.29 s, and the validations took 19% of the training's time.

    vaswani-speed-probe probe --arch vaswani_base \\
        --model-flags "--encoder-layers 3 --decoder-layers 3 --d-model 256 --d-ff 1024 --attention-heads 4" \\
        --vocab-size 8000 --tokens-per-update 4096 --workers 2 --threads 1
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from recipes.planner.probe_arithmetic import seconds_an_update
from recipes.planner.speed import machine

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class ProbeError(RuntimeError):
    pass


@dataclass(frozen=True)
class Probe:
    """What is timed: a model (``--arch`` and its flags), its vocabulary, the batch and the processes."""

    arch: str
    model_flags: str
    vocab_size: int
    tokens_per_update: int
    workers: int = 1
    threads: int = 1
    device: str = "cpu"  # cpu, or cuda
    precision: str = "fp32"  # fp32, bf16, fp16, amp (on a CUDA device: autocast, fp16 for amp as fairseq's --amp)
    length: int = 30
    repeats: int = 2
    max_tokens: int = 0  # on a CUDA device, fairseq's micro-batch (--max-tokens): timed as it runs (micro_batches)

    def key(self) -> str:
        return json.dumps({"machine": machine.machine(self.device), **asdict(self)}, sort_keys=True)


def layout_probe(
    arch: str,
    model_flags: str,
    vocab_size: int,
    tokens_per_update: int,
    gpus: int,
    cpu_workers: int,
    devices: int = 0,
    precision: str = "fp32",
    max_tokens_per_device: int = 4096,
) -> Probe:
    """The probe of a training laid out as the recipes lay it out (GPUS, CPU_WORKERS; DEVICES in all, of which this
    machine's run side by side): on GPUs, one device's share of the batch on one of them, in micro-batches of at
    most ``max_tokens_per_device`` (the recipes' MAX_TOKENS_PER_DEVICE, fairseq's --max-tokens); on CPU, this
    machine's workers side by side, each with its share of the cores (the engine's worker_threads) and of the batch."""
    from recipes.planner.layout import worker_threads

    per_node = gpus if gpus > 0 else cpu_workers
    devices = devices or per_node
    if gpus > 0:
        share = max(1, tokens_per_update // devices)
        return Probe(
            arch, model_flags, vocab_size, share, 1, 1, "cuda", precision, max_tokens=min(share, max_tokens_per_device)
        )
    share = max(1, tokens_per_update * per_node // devices)
    return Probe(arch, model_flags, vocab_size, share, per_node, int(worker_threads(per_node)), "cpu", "fp32")


def measure(probe: Probe) -> float:
    """Seconds per update: ``probe.workers`` processes side by side, the slowest worker's median."""
    from recipes.planner.layout import free_port

    port = free_port()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(probe.threads),
        "MKL_NUM_THREADS": str(probe.threads),
        "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
    }
    spec = json.dumps(asdict(probe))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "recipes.planner.speed.cli",
                "worker",
                spec,
                "--rank",
                str(r),
                "--port",
                str(port),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(probe.workers)
    ]
    results = [w.communicate() for w in workers]
    figures = []
    for r, (w, (out, err)) in enumerate(zip(workers, results)):
        figure = out.split()[-1] if out.split() else ""
        # a worker that printed its figure and then died of a signal at exit (gloo's threads at teardown under load:
        # "terminate called without an active exception", SIGABRT) measured all it had to: its figure counts
        if w.returncode != 0 and not (w.returncode < 0 and re.fullmatch(r"\d+\.\d{6}", figure)):
            last = err.strip().splitlines()[-1] if err.strip() else "no message"
            raise ProbeError(
                f"the speed probe of {probe.arch} {probe.model_flags} failed (worker {r}, exit {w.returncode}): {last}"
            )
        figures.append(float(figure))
    return max(figures)


def build_model(probe: Probe):
    """The model as fairseq-train builds it for ``--arch`` and the flags, with a vocabulary of ``vocab_size``."""
    from fairseq import options
    from fairseq.data import Dictionary

    import transformer_plugin  # noqa: F401  (registers the architectures)

    dictionary = Dictionary()
    for i in range(probe.vocab_size - dictionary.nspecial):
        dictionary.add_symbol(f"p{i}")
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser, ["data-bin", "--arch", probe.arch, "--share-all-embeddings", *shlex.split(probe.model_flags)]
    )

    class Task:
        source_dictionary = target_dictionary = dictionary

    from fairseq.models import ARCH_MODEL_REGISTRY

    return ARCH_MODEL_REGISTRY[probe.arch].build_model(args, Task()), dictionary


def run_worker(probe: Probe, rank: int, port: int) -> float:
    """One worker's seconds per update (seconds_an_update): its micro-batches (micro_batches) and the gradients' sum
    over the workers and the Adam step, timed on this machine's CPU or CUDA device."""
    import torch
    import torch.distributed as dist

    torch.manual_seed(rank)
    device = torch.device("cuda" if probe.device == "cuda" else "cpu")
    if probe.workers > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=probe.workers)
    model, dictionary = build_model(probe)
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    n, eos = len(dictionary), dictionary.eos()
    autocast = {"bf16": torch.bfloat16, "fp16": torch.float16, "amp": torch.float16}.get(probe.precision)

    def clock() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def micro_batch(b: int) -> float:
        src = torch.randint(dictionary.nspecial, n, (b, probe.length), device=device)
        tgt = torch.randint(dictionary.nspecial, n, (b, probe.length), device=device)
        prev = torch.cat([torch.full((b, 1), eos, device=device), tgt[:, :-1]], dim=1)
        lengths = torch.full((b,), probe.length, device=device)
        started = clock()
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None and device.type == "cuda"):
            logits, _ = model(src, lengths, prev)
            lprobs = torch.log_softmax(logits.float(), dim=-1).view(-1, n)
            nll = -lprobs.gather(1, tgt.view(-1, 1)).squeeze(1)
            loss = (0.9 * nll - 0.1 * lprobs.mean(-1)).sum()  # label smoothing 0.1, as the paper's
        loss.backward()
        return clock() - started

    def step() -> float:
        started = clock()
        if probe.workers > 1:  # as fairseq's legacy_ddp: the gradients in one buffer, summed over the workers
            flat = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
            dist.all_reduce(flat)
        optimizer.step()
        optimizer.zero_grad()
        return clock() - started

    seconds = seconds_an_update(probe, micro_batch, step)
    if probe.workers > 1:
        dist.destroy_process_group()
    return seconds
