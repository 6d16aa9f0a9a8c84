"""The training machines' speed as the plan reads it: probed here, or read from another machine's speed file
(SPEED_FILE), one figure a probe."""

import dataclasses
from typing import Dict, List, Optional

from recipes.planner.budget import busy_share, candidates
from recipes.planner.model import Model
from recipes.planner.plan import PlanError
from recipes.planner.probe_arithmetic import training_time
from recipes.planner.speed import probe_cache, probing, speed_file
from recipes.planner.variables import Variables

REMEASURE_TRIES = 3  # probes of a model whose speed decides between two close predictions: the fastest kept


# A model not yet probed on CPU is at best this share of a probed one's seconds per FLOP (larger matrix products run
# faster a FLOP, never twice as fast on a CPU): below that it cannot win, and is not probed.
CPU_BEST_SPEEDUP = 0.5


class Speeds:
    """The training machines' speed: probed here (recipes/planner/speed/), or read from another machine's speed
    file (SPEED_FILE); one figure a probe, so that the budget rule's pick and the updates its budget gives read the same
    speed, however the machine's load changes between them."""

    def __init__(self, v: Variables, cap: int):
        self.gpus, self.cpu_workers = int(v.get("GPUS")), int(v.get("CPU_WORKERS"))
        self.nodes = int(v.get("NNODES") or 1)
        per_node = self.gpus if self.gpus > 0 else self.cpu_workers
        self.devices = per_node * self.nodes
        self.precision, self.cap, self.seen = v.get("PRECISION"), cap, {}
        self.file = None
        # the speed a training measured against the plan's, where it re-picks (recipes/planner/repick.py): every
        # figure this machine's or the file's, times this
        self.factor = 1.0
        if v.get("SPEED_FILE"):
            try:
                self.file = speed_file.SpeedFile.read(v.get("SPEED_FILE"))
            except speed_file.SpeedFileError as e:
                raise PlanError(f"error: {e}") from None
            if (self.file.device == "cuda") != (self.gpus > 0):
                raise PlanError(
                    f"error: SPEED_FILE={v.get('SPEED_FILE')} was measured on {self.file.device_name} "
                    f"({self.file.device}), and GPUS={self.gpus}: give the GPUS the machines that train have"
                )
            if self.gpus > 0 and (self.file.precision, self.file.max_tokens_per_device) != (self.precision, cap):
                raise PlanError(
                    f"error: SPEED_FILE={v.get('SPEED_FILE')} was measured in {self.file.precision} with micro-batches "
                    f"of {self.file.max_tokens_per_device:,} tokens, and this run has PRECISION={self.precision} "
                    f"MAX_TOKENS_PER_DEVICE={cap}: give those, or write the file with --precision and "
                    "--max-tokens-per-device as the run trains"
                )

    def measured(self, probe) -> Dict:
        """A probe's figure (probe_cache.seconds_per_update's): from the speed file, else on CPU the model's one probe
        scaled per token (probe_cache.per_token), else measured here; times ``factor`` (a re-pick's)."""
        if self.file:
            share = probe.tokens_per_update
            seconds = self.file.seconds(probe.arch, probe.model_flags, share)
            params = Model.from_flags(probe.arch, probe.model_flags).parameters(probe.vocab_size)
            seconds += self.file.all_reduce_seconds(params, self.devices, self.nodes)
            found = {"seconds": seconds, "said": self.file.said(self.devices, self.nodes), "cached": True}
        else:
            found = probe_cache.per_token(probe, self.exact)
        return found if self.factor == 1.0 else {**found, "seconds": float(found["seconds"]) * self.factor}

    def exact(self, probe) -> Dict:
        """A probe's own figure, measured or read back once a plan. A figure slower than that of a larger model at
        the same tokens, measured in this plan, was disturbed (two recipes probing side by side once gave 2 layers
        of 256 5.27 s and 3 layers 1.29 s): it is measured again, and the faster of the two kept."""
        if probe not in self.seen:
            found = self.measure(probe)
            if self.disturbed(probe, found):
                again = self.measure(probe, fresh=True)
                found = min((found, again), key=lambda f: float(f["seconds"]))
            self.seen[probe] = found
        return self.seen[probe]

    def measure(self, probe, fresh: bool = False, tries: int = 1) -> Dict:
        try:
            return probe_cache.seconds_per_update(probe, fresh=fresh, tries=tries)
        except probing.ProbeError as e:
            raise PlanError(f"error: {e}") from None

    def remeasure(self, rivals, vocab_size: int) -> List[str]:
        """On CPU, the figures of ``rivals``' models (the pick and those predicted within the budget rule's
        TIE_BITS of it, whose ranking the speed decides) measured again one after another, each the fastest of
        REMEASURE_TRIES probes, unless already so measured. One probe of a model varies by 10% or more between runs
        (3 layers of 256 at 2,048 tokens: 1.56 to 1.74 s, against 1.40 s kept from an earlier day), which was enough
        to pick the slower of two models predicted 0.04 bits apart. Returns the models measured again (for people);
        none with a speed file or on a GPU."""
        if self.file or self.gpus > 0 or self.factor != 1.0:  # re-picked: the figures the plan read, slowed
            return []
        again = []
        for candidate in rivals:
            probe = self.model_probe(candidate, vocab_size)
            kept = self.seen.get(probe)
            if kept is not None and int(kept.get("tries", 1)) >= REMEASURE_TRIES:
                continue
            self.seen[probe] = self.measure(probe, fresh=True, tries=REMEASURE_TRIES)
            again.append(candidates.model_words(candidate))
        return again

    def disturbed(self, probe, found: Dict) -> bool:
        """Whether ``found`` is slower than the figure of a model of more parameters at the same tokens."""
        mine = Model.from_flags(probe.arch, probe.model_flags).parameters(probe.vocab_size)
        return any(
            float(f["seconds"]) < float(found["seconds"])
            and Model.from_flags(p.arch, p.model_flags).parameters(p.vocab_size) > mine
            for p, f in self.seen.items()
            if p.tokens_per_update == probe.tokens_per_update and p.device == probe.device
        )

    def probe(self, candidate, vocab_size: int):
        return probing.layout_probe(
            candidate.arch,
            candidate.model_flags,
            vocab_size,
            candidate.tokens_per_update,
            self.gpus,
            self.cpu_workers,
            self.devices,
            self.precision,
            self.cap,
        )

    def model_probe(self, candidate, vocab_size: int):
        """On CPU, the probe whose figure stands for ``candidate``'s model at every batch: at CPU_PROBE_TOKENS,
        scaled per token (probe_cache.per_token)."""
        return dataclasses.replace(self.probe(candidate, vocab_size), tokens_per_update=probe_cache.CPU_PROBE_TOKENS)

    def of(self, candidate, vocab_size: int) -> float:
        """A candidate's seconds an update, laid out as the recipe lays out its training."""
        return float(self.measured(self.probe(candidate, vocab_size))["seconds"])

    def least_share(self, arch: str, model_flags: str) -> int:
        """The fewest tokens an update a device of the training computes a model's update well with
        (budget/busy_share.py): from the speed file, where its seconds a token stop falling steeply; without one, on a
        GPU the paper's share, on CPU workers (whose seconds a token the probe scales as flat) the least share a speed
        file times."""
        if self.file:
            table = self.file.model(arch, model_flags)["seconds"]
            return busy_share.busy_share(
                lambda share: self.file.seconds(arch, model_flags, share), [int(k) for k in table]
            )
        return busy_share.PAPER_SHARE if self.gpus > 0 else min(speed_file.SHARES)

    def on_devices(self, candidate, vocab_size: int, devices: int) -> float:
        """A GPU candidate's seconds an update laid out over ``devices`` GPUs (machines of GPUS each): from the speed
        file, all-reduce included; without one, this layout's figure scaled per token (a device given at least its
        least share computes about as fast a token with more)."""
        if not self.file:
            return self.of(candidate, vocab_size) * self.devices / devices
        arch, flags = candidate.arch, candidate.model_flags
        params = Model.from_flags(arch, flags).parameters(vocab_size)
        nodes = -(-devices // self.gpus)
        share = candidate.tokens_per_update / devices
        return (
            self.file.seconds(arch, flags, share) + self.file.all_reduce_seconds(params, devices, nodes)
        ) * self.factor

    def fewest_devices(self, candidate, vocab_size: int, updates: int, seconds: int, valid_tokens: int) -> int:
        """The fewest GPUs (1, 2, 4, ... up to a machine's GPUS, then whole machines) that train ``updates`` of
        ``candidate`` within ``seconds``, validations included; these machines' where none fewer does."""
        counts = [n for n in (1, 2, 4, 8, 16, 32, 64, 128) if n < self.gpus] + [
            self.gpus * k for k in range(1, self.nodes + 1)
        ]
        for n in counts:
            if n >= self.devices:
                break
            per_update = self.on_devices(candidate, vocab_size, n)
            if training_time(updates, per_update, candidate.tokens_per_update, valid_tokens) <= seconds:
                return n
        return self.devices

    def busy(self) -> List[str]:
        """The figures this plan rests on that a busy machine measured."""
        return sorted({str(f["busy"]) for f in self.seen.values() if f.get("busy")})

    def lower_bound(self, candidate, vocab_size: int) -> Optional[float]:
        """On CPU, the fewest seconds a model not yet probed could take an update: a probed model's seconds per FLOP,
        at best CPU_BEST_SPEEDUP of it; None where it is probed already, or on a GPU (probed in any case)."""
        if self.file or self.gpus > 0:
            return None
        if self.model_probe(candidate, vocab_size) in self.seen:
            return None
        flops = candidates.parameters(candidate, vocab_size)
        known = [  # seconds a million parameters of each model probed, counted as the candidate's are
            float(f["seconds"])
            / candidates.parameters(candidates.Candidate("", p.arch, p.model_flags, 0, 0), p.vocab_size)
            for p, f in self.seen.items()
        ]
        if not known:
            return None
        per_token = candidate.tokens_per_update / probe_cache.CPU_PROBE_TOKENS
        return min(known) * flops * per_token * CPU_BEST_SPEEDUP * self.factor
