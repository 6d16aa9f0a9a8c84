"""How long one training update of a model takes on this machine: a probe of a few updates on synthetic
batches, measured once per machine and kept.

The probe builds the model as fairseq-train would (``--arch`` and its flags, through fairseq's own parser) with a
vocabulary of the given size, and times what an update does: forward, label-smoothed cross entropy and backward
on micro-batches of sentences of ``--length`` pieces (per target token), then the gradients summed over the
workers (gloo, as fairseq's ``legacy_ddp`` does for CPU workers) and an Adam step. An update of
``--tokens-per-update`` target tokens is split over ``--workers`` processes that run side by side with ``--threads``
torch threads each (the recipes' CPU workers), or runs on one CUDA device in fairseq's own micro-batches of
``--max-tokens`` (its update frequency: a device's time is far from proportional to its tokens), where a CPU's
micro-batch of at most MICRO_TOKENS is counted per token. The first of each is not counted (memory, kernels); the
figures are medians. ``seconds_an_update`` is the arithmetic, apart from the timing.

What it leaves out: data loading (fairseq's batches come from memory-mapped files, a few percent on CPU),
validation and checkpoints (a tenth of the budget is left for them), and that fairseq's batches, bounded by
``--max-tokens`` on their longer side with its padding, hold fewer target tokens than the probe's. Measured on
2026-11-27 against a real run (docs/benchmarks.md, "Time"): fairseq's updates held 83% of the probe's tokens and
took 2.57 s against the probe's 3.29 s, and the validations took 19% of the training's time.

Figures are kept in ``$XDG_CACHE_HOME/transformer_plugin/speed.json`` (``~/.cache`` by default) under a key of
this machine (processor, cores, torch, fairseq, this plugin, CUDA device) and the probe's settings: a second probe
of the same is read back for MAX_AGE_DAYS. ``--fresh`` measures again (the recipes: ``REPROBE=1``).

    vaswani-speed-probe probe --arch vaswani_base \\
        --model-flags "--encoder-layers 3 --decoder-layers 3 --d-model 256 --d-ff 1024 --attention-heads 4" \\
        --vocab-size 8000 --tokens-per-update 4096 --workers 2 --threads 1
"""

import argparse
import contextlib
import functools
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable, Dict, List, Optional

from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import duration
from recipes.planner.probe_arithmetic import (
    TIME_STARTUP_SECONDS,
    BudgetError,
    parse_time,
    seconds_an_update,
    training_time,
    updates_that_fit,
    validations,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
        return json.dumps({"machine": machine(self.device), **asdict(self)}, sort_keys=True)


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


def cuda_here() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def cuda_devices() -> int:
    import torch

    return torch.cuda.device_count()


def machine(device: str = "cpu") -> Dict[str, object]:
    """What decides the speed besides the probe's settings: processor, cores, torch and the CUDA device. torch's
    version is read from its metadata: a recipe's start imports torch only for a CUDA device's name."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    found = {
        "processor": model,
        "cores": os.cpu_count(),
        "torch": importlib.metadata.version("torch"),
        "fairseq": _version("fairseq-fixed", "fairseq"),
        "plugin": _version("transformer_plugin"),
    }
    if device == "cuda":
        import torch

        found["cuda_device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return found


def _version(*names: str) -> str:
    """The installed version of the first of ``names`` installed, else ''."""
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
    return ""


# A figure older than this is measured again (a machine's other work, its firmware, its thermal state change); so is
# one measured before FRESH_SINCE, seconds since the epoch in the environment (the recipes' REPROBE=1 sets it to
# their start: every probe of that run measures again, once).
MAX_AGE_DAYS = 30
FRESH_SINCE = "TRANSFORMER_PLUGIN_PROBE_FRESH_SINCE"


def _stale(kept: Dict[str, object]) -> bool:
    """Whether a kept figure is too old to read back: MAX_AGE_DAYS, or measured before FRESH_SINCE."""
    try:  # "at": seconds since the epoch; "measured": to the minute, for people (a figure that has no "at")
        measured = (
            float(kept["at"]) if "at" in kept else time.mktime(time.strptime(str(kept["measured"]), "%Y-%m-%d %H:%M"))
        )
    except (KeyError, ValueError, TypeError):
        return True
    since = float(os.environ.get(FRESH_SINCE) or 0)
    return measured < since or time.time() - measured > MAX_AGE_DAYS * 86400


def cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "transformer_plugin", "speed.json")


def _read_cache() -> Dict[str, Dict[str, object]]:
    try:
        with open(cache_file()) as f:
            found = json.load(f)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):  # none yet, or not ours: measured again and written anew
        return {}


def seconds_per_update(probe: Probe, fresh: bool = False, tries: int = 1) -> Dict[str, object]:
    """{"seconds": seconds per update, "measured": when, "cached": bool, "tries": probes it is the best of, and "busy"
    where the machine was}: read back, or measured (the fastest of ``tries`` probes) and kept. A figure measured on a
    busy machine is read back while the machine is busy, and measured again once it is quiet."""
    cache = _read_cache()
    key = probe.key()
    kept = None if fresh else cache.get(key)
    if kept and _stale(kept):
        kept = None
    if kept and not kept.get("busy"):  # a quiet machine's figure, read back without watching the cores
        return {**kept, "cached": True}
    load = busy()
    if kept and load:  # a busy machine's figure: until a quiet one's
        return {**kept, "cached": True}
    # on a busy machine the best of BUSY_TRIES probes: the one the other work disturbed least
    tries = max(tries, BUSY_TRIES if load else 1)
    seconds = min(measure(probe) for _ in range(tries))
    entry = {
        "seconds": seconds,
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "at": time.time(),
        "tries": tries,
        **({"busy": load} if load else {}),
    }
    cache = {**_read_cache(), key: entry}  # another probe may have written meanwhile
    os.makedirs(os.path.dirname(cache_file()), exist_ok=True)
    # whole or not at all, and a name of this process's: two recipes started together may write it at once
    tmp = f"{cache_file()}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, cache_file())
    return {**entry, "cached": False}


# A machine whose cores (this process's) are more than this share busy with other work is busy: a probe there is
# slower than training will be once the other work has ended (measured: 4.9 s an update beside a test run, 3.3 s
# on the quiet machine), so its figure is kept as a busy machine's, and measured again once the machine is quiet.
BUSY_SHARE = 0.5
BUSY_TRIES = 3  # probes on a busy machine, the fastest kept
BUSY_SAMPLE_SECONDS = 0.5  # how long the cores are watched (Linux's /proc/stat), before the first probe of a process
PROC_STAT = "/proc/stat"


def core_times() -> Dict[int, tuple]:
    """{core: (idle, total)} in ticks since boot, from PROC_STAT's cpuN lines (idle and iowait count as idle)."""
    found = {}
    with open(PROC_STAT) as f:
        for line in f:
            m = re.match(r"^cpu(\d+) (.*)$", line)
            if m:
                ticks = [int(x) for x in m.group(2).split()]
                found[int(m.group(1))] = (ticks[3] + (ticks[4] if len(ticks) > 4 else 0), sum(ticks[:8]))
    return found


@functools.lru_cache(maxsize=1)
def busy() -> str:
    """'core 0 93% busy' where the cores this process may run on are busy with other work, else ''. Those cores, not
    the machine: a probe pinned to one core beside a run pinned to another is not slowed by it (a load average would
    say so). Read once a process, before its first probe: the probes of one choice (the candidates of a TIME) do not
    count each other as other work. The load average where PROC_STAT is not there (not Linux)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    try:
        before = core_times()
        time.sleep(BUSY_SAMPLE_SECONDS)
        after = core_times()
        shares = [1 - (after[c][0] - before[c][0]) / max(1, after[c][1] - before[c][1]) for c in cores]
    except (OSError, KeyError, ValueError, IndexError):
        try:
            load = os.getloadavg()[0]
        except OSError:
            return ""
        return f"load {load:.1f} on {len(cores)} cores" if load > BUSY_SHARE * len(cores) else ""
    share = sum(shares) / len(shares)
    named = f"core {cores[0]}" if len(cores) == 1 else f"cores {','.join(map(str, cores))}"
    return f"{named} {share:.0%} busy" if share > BUSY_SHARE else ""


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
                "recipes.planner.speed_probe",
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


# On CPU an update's time grows with its tokens (measured: 1.07 s and 2.18 s for 2 layers of 256 at 2,048 and 4,096
# tokens on one core, 1.48 s and 2.86 s for 3): the plan probes each model once, at this many tokens, and scales it
CPU_PROBE_TOKENS = 4096


def per_token(probe: Probe, figure_of: Callable[[Probe], Dict[str, object]] = None) -> Dict[str, object]:
    """A CPU probe's figure as the plan reads it: the same model's at CPU_PROBE_TOKENS, scaled per token; on a CUDA
    device, its own (a device's time is far from proportional to its tokens)."""
    figure_of = figure_of or seconds_per_update
    if probe.device != "cpu" or probe.tokens_per_update == CPU_PROBE_TOKENS:
        return figure_of(probe)
    found = figure_of(replace(probe, tokens_per_update=CPU_PROBE_TOKENS))
    return {**found, "seconds": float(found["seconds"]) * probe.tokens_per_update / CPU_PROBE_TOKENS}


def measured(found: Dict[str, object]) -> str:
    """When a figure of seconds_per_update was measured, for people: 'measured now', 'measured 2026-11-27 09:29', and
    what a busy machine's figure is worth."""
    said = f"measured {found['measured'] if found['cached'] else 'now'}"
    if found.get("busy"):
        said += f" with the machine busy ({found['busy']}), so likely too slow: measured again once it is quiet"
    return said


def no_cuda(time_text: str) -> BudgetError:
    """A TIME for GPUs on a machine with none (a login node): nothing to measure their speed on."""
    return BudgetError(
        f"TIME={time_text}: this machine has no CUDA device to measure the GPUs' speed on: run where the "
        "GPUs are (a dry run there prints the MAX_UPDATE it gives), or give MAX_UPDATE"
    )


MIN_UPDATES = 100  # a TIME that fits fewer is refused (a cap given beside it, if lower, is enough)


def budget(
    probe: Probe,
    time_text: str = "",
    max_update: int = 0,
    tokens_per_update: int = 0,
    valid_tokens: int = 0,
    interval: int = 0,
    speed: Callable[[Probe], Dict[str, object]] = None,
    here: bool = True,
) -> Dict[str, str]:
    """The recipe's variables for a budget of TIME (``time_text``: updates from this machine's speed) or of
    ``max_update`` updates (with TIME: at most that many, the size class's full run): SECONDS_PER_UPDATE, MAX_UPDATE,
    TRAINING_SECONDS, TRAINING_TIME (said for people) and, for TIME, STOP_TIME_HOURS. The validations are counted
    over a dev set of ``valid_tokens`` target tokens, one every ``interval`` updates (0: the recipe's own), against
    updates of ``tokens_per_update`` (in all; 0: the probe's). A run resumed keeps what its plan decided
    (recipes/planner/plan.py: WORK/plan.json). ``speed``: how the probe's figure is had
    (seconds_per_update, by default); ``here`` False: its figures come from another machine's speed file, so this
    one need not have the devices."""
    tokens_per_update = tokens_per_update or probe.tokens_per_update
    if here and probe.device == "cuda" and not cuda_here():  # a dry run on a login node, say: nothing to measure here
        if time_text:
            raise no_cuda(time_text)
        return {
            "SECONDS_PER_UPDATE": "0",
            "MAX_UPDATE": str(max_update),
            "TRAINING_SECONDS": "0",
            "TRAINING_TIME": f"{max_update:,} updates; how long, the machine with the GPUs says (none here to measure)",
            "TRAINING_SHORT": f"{max_update:,} updates, how long unknown here (no GPU to measure)",
        }
    found = (speed or seconds_per_update)(probe)
    per_update = float(found["seconds"])
    values = {}
    if time_text:
        seconds = parse_time(time_text)
        fit = updates_that_fit(seconds, per_update, tokens_per_update, valid_tokens, interval)
        # too few to learn anything where the time is what stops it; a cap given beside TIME below that (a
        # fine-tuning's epochs of a few hundred pairs: recipes/planner/finetuning.py) is what the run needs, and fits
        if fit < (min(MIN_UPDATES, max_update) if max_update else MIN_UPDATES):
            raise BudgetError(
                f"TIME={time_text}: {fit} updates of {per_update:.1f} s fit here, too few to learn "
                f"anything ({MIN_UPDATES} at least): a longer TIME, or a smaller model"
            )
        max_update = min(fit, max_update) if max_update else fit  # a cap given beside TIME: the size class's own
        values["STOP_TIME_HOURS"] = f"{(seconds - TIME_STARTUP_SECONDS) / 3600:.4f}"
    total = training_time(max_update, per_update, tokens_per_update, valid_tokens, interval)
    source = found.get("said") or f"a probe of this machine, {measured(found)}; kept in {cache_file()}"
    where = "on the speed file's machines" if found.get("said") else "here"
    said = f"{duration(total)} {where}: {max_update:,} updates of {per_update:.2f} s ({source})"
    if valid_tokens:
        said += f", and {validations(max_update, interval)} validations of about {valid_tokens:,} target tokens"
    short = f"about {duration(total)} {where} ({max_update:,} updates of {per_update:.2f} s"
    short += f", {validations(max_update, interval)} validations)" if valid_tokens else ")"
    values.update(
        {
            "SECONDS_PER_UPDATE": f"{per_update:.4f}",
            "MAX_UPDATE": str(max_update),
            "TRAINING_SECONDS": str(int(total)),
            "TRAINING_TIME": said,
            "TRAINING_SHORT": short,
        }
    )
    return values


# ---- a speed file: the machine that will train, measured there, read by a dry run anywhere ---------------------

SPEED_FILE_VERSION = 1
# a device's shares of an update timed (target tokens): the candidates' batches over 1 to 64 devices fall among them
SHARES = (256, 512, 1024, 2048, 4096, 8192, 16384, 25000)
# the gradients' all-reduce, GB/s a device, where not given: NVLink within a machine (NCCL's bus bandwidth on an
# 8-GPU NVLink machine is some hundreds; 100 is a low one), and between machines 100 Gb/s InfiniBand or RoCE
BANDWIDTH_WITHIN_GBS = 100.0
BANDWIDTH_BETWEEN_GBS = 12.5


class SpeedFileError(ValueError):
    pass


@dataclass
class SpeedFile:
    """Seconds an update of each candidate model at a device's share of the batch, measured on the machine that will
    train (``vaswani-speed-probe file``), and the bandwidth its gradients' all-reduce gets."""

    path: str
    device: str  # cuda or cpu
    device_name: str
    devices_here: int
    precision: str
    max_tokens_per_device: int
    vocab_size: int
    bandwidth_within_gbs: float
    bandwidth_between_gbs: float
    bandwidth_said: str  # "given" or "defaulted"
    measured: str
    models: List[Dict]  # {"arch", "model_flags", "seconds": {share: seconds}, "busy": ""}

    @classmethod
    def read(cls, path: str) -> "SpeedFile":
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise SpeedFileError(f"SPEED_FILE={path}: cannot be read ({e.strerror})") from None
        except ValueError:
            raise SpeedFileError(f"SPEED_FILE={path}: not JSON (vaswani-speed-probe file writes it)") from None
        if not isinstance(data, dict) or data.get("version") != SPEED_FILE_VERSION:
            raise SpeedFileError(
                f"SPEED_FILE={path}: not a speed file of version {SPEED_FILE_VERSION}: write it again with "
                "vaswani-speed-probe file"
            )
        try:
            return cls(path, **{k: x for k, x in data.items() if k != "version"})
        except TypeError as e:
            raise SpeedFileError(f"SPEED_FILE={path}: {e}") from None

    def model(self, arch: str, model_flags: str) -> Dict:
        for m in self.models:
            if (m["arch"], m["model_flags"]) == (arch, model_flags):
                return m
        raise SpeedFileError(
            f"SPEED_FILE={self.path} has no figures of {arch} {model_flags}: write it again with vaswani-speed-probe "
            "file (it times every candidate of the budget rule), or give MAX_UPDATE"
        )

    def seconds(self, arch: str, model_flags: str, share: float) -> float:
        """A device's seconds an update at ``share`` target tokens: between the shares timed, linearly; below the
        least, the least's (a device given fewer tokens is hardly faster); above the most, per token."""
        table = sorted((int(k), float(x)) for k, x in self.model(arch, model_flags)["seconds"].items())
        if share <= table[0][0]:
            return table[0][1]
        for (a, sa), (b, sb) in zip(table, table[1:]):
            if share <= b:
                return sa + (sb - sa) * (share - a) / (b - a)
        return table[-1][1] * share / table[-1][0]

    def all_reduce_seconds(self, parameters: int, devices: int, nodes: int) -> float:
        """The gradients' ring all-reduce an update: 2 (D - 1) / D of their bytes through each device's link, at the
        bandwidth between machines when there are several (none counted as overlapping the backward pass)."""
        if devices <= 1:
            return 0.0
        gradient_bytes = parameters * (2 if self.precision in ("bf16", "fp16") else 4)
        bandwidth = self.bandwidth_between_gbs if nodes > 1 else self.bandwidth_within_gbs
        return 2 * (devices - 1) / devices * gradient_bytes / (bandwidth * 1e9)

    def said(self, devices: int, nodes: int) -> str:
        where = "between machines" if nodes > 1 else "within the machine"
        bandwidth = self.bandwidth_between_gbs if nodes > 1 else self.bandwidth_within_gbs
        busy = [m["model_flags"] or m["arch"] for m in self.models if m.get("busy")]
        said = f"SPEED_FILE {self.path}: {self.device_name}, measured {self.measured}"
        if devices > 1:
            said += f", the all-reduce over {devices} devices at {bandwidth:g} GB/s {where}, {self.bandwidth_said}"
        if busy:
            said += f"; measured busy: {', '.join(busy)}"
        return said


def write_speed_file(
    path: str,
    models: List[tuple],
    device: str,
    precision: str,
    max_tokens_per_device: int,
    vocab_size: int,
    within_gbs: Optional[float],
    between_gbs: Optional[float],
    shares=SHARES,
    speed: Callable[[Probe], Dict[str, object]] = None,
    progress: Callable[[str], None] = print,
) -> Dict:
    """Time each of ``models`` ((arch, flags) pairs) at each of ``shares`` on this machine's device and write the speed
    file at ``path``: what a dry run elsewhere reads (SPEED_FILE=) to plan for this machine."""
    speed = speed or (lambda probe: seconds_per_update(probe, fresh=True))
    found = []
    for arch, flags in models:
        seconds, busy_said = {}, ""
        for share in shares:
            if device == "cuda":
                probe = Probe(
                    arch,
                    flags,
                    vocab_size,
                    share,
                    1,
                    1,
                    "cuda",
                    precision,
                    max_tokens=min(share, max_tokens_per_device),
                )
            else:
                probe = Probe(arch, flags, vocab_size, share, 1, os.cpu_count() or 1, "cpu", "fp32")
            figure = speed(probe)
            seconds[str(share)] = round(float(figure["seconds"]), 6)
            busy_said = busy_said or str(figure.get("busy") or "")
            progress(f"{arch} {flags}: {share:,} tokens a device, {seconds[str(share)]:.4f} s an update")
        found.append({"arch": arch, "model_flags": flags, "seconds": seconds, "busy": busy_said})
    here = machine(device)
    data = {
        "version": SPEED_FILE_VERSION,
        "device": device,
        "device_name": here.get("cuda_device") or here["processor"],
        "devices_here": cuda_devices() if device == "cuda" else 1,
        "precision": precision,
        "max_tokens_per_device": max_tokens_per_device,
        "vocab_size": vocab_size,
        "bandwidth_within_gbs": within_gbs or BANDWIDTH_WITHIN_GBS,
        "bandwidth_between_gbs": between_gbs or BANDWIDTH_BETWEEN_GBS,
        "bandwidth_said": "given" if within_gbs or between_gbs else "defaulted, not measured",
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "models": found,
    }
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)
    return data


@console_script
def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="vaswani-speed-probe", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("probe", "budget"):
        p = sub.add_parser(
            name,
            help={
                "probe": "seconds per update of a model here",
                "budget": "the recipe's variables for TIME= or MAX_UPDATE=, for a training's layout",
            }[name],
        )
        p.add_argument("--arch", default="vaswani_base")
        p.add_argument("--model-flags", default="", help="the architecture's flags, as fairseq-train takes them")
        p.add_argument("--vocab-size", type=int, default=8000)
        p.add_argument("--tokens-per-update", type=int, default=4096)
        if name == "probe":
            p.add_argument(
                "--workers", type=int, default=1, help="CPU processes side by side (the recipes' CPU_WORKERS)"
            )
            p.add_argument("--threads", type=int, default=1, help="torch threads of each")
            p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
            p.add_argument("--length", type=int, default=30, help="pieces a sentence, both sides")
            p.add_argument(
                "--repeats", type=int, default=2, help="micro-batches and steps timed, after one not counted"
            )
            p.add_argument("--fresh", action="store_true", help="measure again, even if this was measured before")
        else:
            p.add_argument("--time", default="", help="TIME: 90m, 8h, 1h30m, 2d")
            p.add_argument(
                "--max-update", type=int, default=0, help="the budget in updates; with --time, at most that many"
            )
            p.add_argument(
                "--valid-tokens", type=int, default=0, help="target tokens of the dev set, validated at each checkpoint"
            )
            p.add_argument(
                "--save-interval-updates", type=int, default=0, help="updates between checkpoints (0: the recipe's own)"
            )
            p.add_argument("--gpus", type=int, default=0)
            p.add_argument("--cpu-workers", type=int, default=1)
            p.add_argument("--devices", type=int, default=0, help="devices in all, on every machine (0: this one's)")
            p.add_argument(
                "--max-tokens-per-device", type=int, default=4096, help="a GPU's micro-batch (fairseq's --max-tokens)"
            )
            p.add_argument(
                "--per-token",
                action="store_true",
                help=f"on CPU, the model's figure at {CPU_PROBE_TOKENS:,} tokens scaled per token, as the plan"
                " reads it",
            )
        p.add_argument(
            "--precision",
            choices=["fp32", "bf16", "fp16", "amp"],
            default="fp32",
            help="the recipes' PRECISION (amp: fairseq's --amp, autocast to fp16 on a CUDA device)",
        )
    file = sub.add_parser("file", help="a speed file of every candidate model, for a dry run elsewhere (SPEED_FILE=)")
    file.add_argument("--out", required=True, help="the speed file to write")
    file.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    file.add_argument("--precision", choices=["fp32", "bf16", "fp16", "amp"], default="bf16")
    file.add_argument("--max-tokens-per-device", type=int, default=4096, help="fairseq's --max-tokens")
    file.add_argument("--vocab-size", type=int, default=32000, help="the vocabulary the corpus will get")
    file.add_argument(
        "--bandwidth-within-gbs", type=float, help=f"all-reduce GB/s within a machine ({BANDWIDTH_WITHIN_GBS:g})"
    )
    file.add_argument(
        "--bandwidth-between-gbs", type=float, help=f"all-reduce GB/s between machines ({BANDWIDTH_BETWEEN_GBS:g})"
    )
    worker = sub.add_parser("worker")
    worker.add_argument("spec")
    worker.add_argument("--rank", type=int, default=0)
    worker.add_argument("--port", type=int, default=0)
    a = parser.parse_args(argv)
    if a.command == "worker":
        print(f"{run_worker(Probe(**json.loads(a.spec)), a.rank, a.port):.6f}")
        return 0
    try:
        if a.command == "file":
            from recipes.planner.budget.candidates import MODELS

            if a.device == "cuda" and not cuda_here():
                raise BudgetError("file --device cuda: this machine has no CUDA device: run it where training will run")
            write_speed_file(
                a.out,
                [(arch, flags) for arch, flags, _ in MODELS],
                a.device,
                a.precision if a.device == "cuda" else "fp32",
                a.max_tokens_per_device,
                a.vocab_size,
                a.bandwidth_within_gbs,
                a.bandwidth_between_gbs,
            )
            print(f"wrote {a.out}: give it to a dry run anywhere as SPEED_FILE={a.out}")
            return 0
        if a.command == "budget":
            if not a.time and not a.max_update:
                raise BudgetError("budget: give --time or --max-update (or both: at most that many)")
            probe = layout_probe(
                a.arch,
                a.model_flags,
                a.vocab_size,
                a.tokens_per_update,
                a.gpus,
                a.cpu_workers,
                a.devices,
                a.precision,
                a.max_tokens_per_device,
            )
            for name, value in budget(
                probe,
                a.time,
                a.max_update,
                a.tokens_per_update,
                a.valid_tokens,
                a.save_interval_updates,
                speed=per_token if a.per_token else None,
            ).items():
                print(f"{name}={shlex.quote(value)}")
            return 0
        probe = Probe(
            a.arch,
            a.model_flags,
            a.vocab_size,
            a.tokens_per_update,
            a.workers,
            a.threads,
            a.device,
            a.precision,
            a.length,
            a.repeats,
        )
        found = seconds_per_update(probe, fresh=a.fresh)
    except (BudgetError, ProbeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{found['seconds']:.3f} s per update ({measured(found)}, kept in {cache_file()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
