"""The plan of a run of recipes/parallel_text.sh: every setting decided once, in one process, before any work.

The recipe hands over its variables (what the user set, and the defaults at its top); :func:`decide` turns them
into one :class:`Plan`: the corpus's facts, the budget rule's pick beside every candidate
(:mod:`recipes.planner.budget`), the parent to fine-tune (:mod:`recipes.planner.parent`), the batch's layout
(:mod:`recipes.planner.layout`), the budget at this machine's measured speed (:mod:`recipes.planner.speed`), the
schedule, and the paper's flags. The plan is written as ``WORK/plan.json`` and handed back to the recipe as data
(:func:`fields`: names and values, NUL-separated), which its stages read; nothing is printed as shell code to be
evaluated.

A plan is decided once for a run. While ``WORK/plan.json`` holds the plan of a run begun in that WORK (a stage of it
done), the same settings read it back rather than decide again, so that a run resumed later trains as it began,
however the machine's speed is measured then. A dry run never overwrites such a plan: it shows the plan the run
holds, beside what would change. ``REPROBE=1`` decides again.

    python -m recipes.planner.plan sizes                         # each size class's settings
    python -m recipes.planner.plan decide --work W --fields F    # the recipe's variables on stdin (lib.sh: plan_run)
"""

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Dict, List, Optional, Sequence

from preprocess.corpora import CorpusError, count_lines, find_corpus
from recipes.planner.budget import candidates, rule, size_classes
from recipes.planner.speed import machine, probe_cache, probing, speed_file, time_budget
from recipes.planner import finetuning, layout, parent
from recipes.records import read_records
from recipes.planner.model import Model, shared
from recipes.planner.probe_arithmetic import BudgetError
from transformer_plugin_cli.files import write_json
from transformer_plugin_cli.paper import DECODING, decoding_flags, number, training_flags

PLAN_VERSION = 1
PAPER_WARMUP = 4000  # Section 5.3


class PlanError(ValueError):
    """Settings that cannot work together, or a corpus or parent that cannot be used: the message names them."""


@dataclass
class Plan:
    """Everything a run of the recipe is given, decided before any work. ``model`` holds what fairseq-train is
    given of the model; ``budget`` the updates and how long they take here; ``choice`` the budget rule's pick and
    every candidate beside it; ``parent`` the published model fine-tuned (INIT=), if any."""

    key: Dict  # what the plan was decided from: the same key reads the plan back
    corpus: Dict  # pairs, size class, the dev set's target tokens, the files read
    model: Dict  # arch, model_flags, dropout, vocab_size, joint
    batch: Dict  # tokens_per_update, max_tokens_per_device and the layout (per_node, devices, update_freq, ...)
    budget: Dict  # max_update, time, seconds_per_update, training_seconds, training_time, stop_time_hours
    schedule: Dict  # warmup, peak_warmup, save_interval_updates, average_last, patience
    choice: Dict  # the budget rule's candidates, the pick among them, and why
    parent: Optional[Dict] = None
    flags: Dict[str, List[str]] = field(default_factory=dict)  # the paper's: training, decoding
    lines: List[str] = field(default_factory=list)  # what the recipe says of it, for people
    version: int = PLAN_VERSION
    decided: str = ""


# ---- the recipe's variables ----------------------------------------------------------------------------------


class Variables:
    """The recipe's variables as it hands them over: a value of '' is unset (the plan decides it)."""

    def __init__(self, values: Dict[str, str]):
        self.values = values

    def get(self, name: str, default: str = "") -> str:
        return self.values.get(name) or default

    def number(self, name: str, default: Optional[int] = None, least: int = 0) -> Optional[int]:
        text = self.get(name)
        if not text:
            return default
        if not text.isdigit() or int(text) < least:
            raise PlanError(f"{name}={text}: a whole number{f' of {least} or more' if least else ''}")
        return int(text)

    def decimal(self, name: str) -> Optional[str]:
        """A number as written (the recipes' stamps see flags as the user typed them), or None where unset."""
        text = self.get(name)
        if not text:
            return None
        try:
            return number(text)
        except ValueError:
            raise PlanError(f"{name}={text}: a number") from None

    def words(self, name: str) -> List[str]:
        return [w for w in self.get(name).split(":") if w]

    @property
    def toy(self) -> bool:
        return self.get("TOY", "0") == "1"


# ---- deciding ------------------------------------------------------------------------------------------------


def decision_key(v: Variables) -> Dict:
    """What a plan is decided from, beside the speed this machine is measured at: the recipe's settings and the
    size of each corpus read. A plan held in WORK is read back while this is the same."""
    train = v.words("TRAIN")
    given = {
        name: v.get(name) for name in sorted(v.values) if name in SETTINGS and name not in ("TRAIN", "VALID", "TEST")
    }
    lines = {
        t: count_lines(c.tsv or c.source) for t, c in ((t, find_corpus(t, v.get("SRC"), v.get("TGT"))) for t in train)
    }
    return {"train": lines, "valid": v.words("VALID"), "test": v.words("TEST"), "settings": given}


# every variable that changes the plan's training; the others go to the stages as set (their own: MAX_WORDS, SEED,
# ...), are read afresh from the plan held (after training: BEAM, LENPEN, EXPORT), or tell the machines of one plan
# apart (NODE_RANK)
SETTINGS = tuple(
    "TRAIN VALID TEST SRC TGT TOY INIT TGT_TOKEN REPLAY REPLAY_RATIO REPLAY_SOURCES TIME MAX_UPDATE SPEED_FILE "
    "MIN_PAIRS FINETUNE_MIN_PAIRS VOCAB_SIZE JOINT_VOCAB ARCH MODEL_FLAGS "
    "DROPOUT TOKENS_PER_UPDATE MAX_TOKENS_PER_DEVICE WARMUP FINETUNE_WARMUP SAVE_INTERVAL_UPDATES AVERAGE_LAST "
    "EVAL_BLEU PATIENCE LABEL_SMOOTHING GPUS CPU_WORKERS PRECISION LAUNCH NNODES MASTER_ADDR "
    "MASTER_PORT DIST_TIMEOUT TOY_ARCH TOY_MODEL_FLAGS TOY_VOCAB_SIZE TOY_MAX_UPDATE TOY_WARMUP "
    "TOY_SAVE_INTERVAL_UPDATES TOY_TOKENS_PER_UPDATE TOY_AVERAGE_LAST TOY_MIN_PAIRS".split()
)


def check_settings(v: Variables) -> None:
    time_text = v.get("TIME")
    given = v.get("MAX_UPDATE") or (v.get("TOY_MAX_UPDATE") if v.toy else "")
    if time_text and given:
        raise PlanError(f"TIME={time_text} and MAX_UPDATE={given}: give one budget (TIME is turned into updates here)")
    if time_text and v.get("NNODES", "1") != "1" and not v.get("SPEED_FILE"):
        raise PlanError(
            f"TIME={time_text} is measured on this machine, and NNODES={v.get('NNODES')} machines must agree on the "
            "updates: give MAX_UPDATE, or SPEED_FILE (vaswani-speed-probe file, written on one of them), which all read"
        )
    if v.get("MAX_UPDATE") and not v.get("MAX_UPDATE").isdigit():
        raise PlanError(f"error: MAX_UPDATE={v.get('MAX_UPDATE')}: a number of updates")
    if v.get("REPLAY"):
        if not v.get("INIT"):
            raise PlanError(f"REPLAY={v.get('REPLAY')}: a general corpus replayed is for INIT (fine-tuning)")
        for lang in (v.get("SRC"), v.get("TGT")) if v.get("REPLAY") != "parent" else ():
            if not os.path.isfile(f"{v.get('REPLAY')}.{lang}"):
                raise PlanError(
                    f"REPLAY: {v.get('REPLAY')}.{lang}: no such file (PREFIX.SRC and PREFIX.TGT; or REPLAY=parent, "
                    "the parent's own translations)"
                )
        ratio = v.decimal("REPLAY_RATIO")
        if ratio is not None and float(ratio) <= 0:
            raise PlanError(f"REPLAY_RATIO={ratio}: general pairs an in-domain pair, above 0")
        if v.get("REPLAY") == "parent" and not v.get("REPLAY_SOURCES") and ratio is not None and float(ratio) > 1:
            raise PlanError(
                f"REPLAY_RATIO={ratio} with REPLAY=parent: the parent translates the training sources, each at most "
                "once (at most 1); give it text of its own to translate (REPLAY_SOURCES=PREFIX), or replay a general "
                "corpus (REPLAY=PREFIX), for more"
            )
    if v.get("REPLAY_SOURCES"):
        if v.get("REPLAY") != "parent":
            raise PlanError(
                f"REPLAY_SOURCES={v.get('REPLAY_SOURCES')}: the source text the parent translates, for REPLAY=parent "
                "(distillation)"
            )
        if not os.path.isfile(f"{v.get('REPLAY_SOURCES')}.{v.get('SRC')}"):
            raise PlanError(
                f"REPLAY_SOURCES: {v.get('REPLAY_SOURCES')}.{v.get('SRC')}: no such file (PREFIX.SRC: source text, one "
                "sentence a line)"
            )
    if v.get("PARENT_TEST"):
        if not v.get("INIT"):
            raise PlanError(f"PARENT_TEST={v.get('PARENT_TEST')}: a parent's test set is for INIT (fine-tuning)")
        for lang in (v.get("SRC"), v.get("TGT")):
            path = f"{v.get('PARENT_TEST')}.{lang}"
            if not os.path.isfile(path):
                raise PlanError(f"PARENT_TEST: {path}: no such file (PREFIX.SRC and PREFIX.TGT, a line a sentence)")
        lines = [count_lines(f"{v.get('PARENT_TEST')}.{lang}") for lang in (v.get("SRC"), v.get("TGT"))]
        if lines[0] != lines[1] or not lines[0]:
            raise PlanError(
                f"PARENT_TEST: {v.get('PARENT_TEST')}.{v.get('SRC')} has {lines[0]} lines and "
                f"{v.get('PARENT_TEST')}.{v.get('TGT')} {lines[1]}: a sentence and its translation a line"
            )
    if v.get("INIT"):
        for name in ("ARCH", "MODEL_FLAGS", "VOCAB_SIZE", "JOINT_VOCAB", "SPM_TYPE"):
            if v.get(name):
                raise PlanError(
                    f"INIT={v.get('INIT')} and {name}={v.get(name)}: the model and its vocabulary are the parent's"
                )


def corpus_settings(v: Variables, speeds: "Speeds") -> size_classes.Sized:
    """The budget rule's settings for the corpora, at the budget the variables give (none at toy size)."""
    max_update = None if v.toy or not v.get("MAX_UPDATE") else int(v.get("MAX_UPDATE"))
    time_text = "" if v.toy or v.get("INIT") else v.get("TIME")
    min_pairs = v.number("TOY_MIN_PAIRS", 1000) if v.toy else v.number("MIN_PAIRS", 10000)
    if v.get("INIT"):  # fine-tuning's own lower bound, checked with what is held out (recipes/planner/finetuning.py)
        min_pairs = 0
    speed = None
    if time_text:
        if speeds.gpus > 0 and not speeds.file and not machine.cuda_here():
            raise PlanError(f"error: {time_budget.no_cuda(time_text)}")
        speed = speeds.of
    try:
        return rule.settings(
            v.words("TRAIN"),
            v.get("SRC"),
            v.get("TGT"),
            max_update,
            time_text,
            speed,
            v.words("VALID"),
            min_pairs,
            speeds.devices,
            speeds.cap,
            speeds.lower_bound,
            speeds.remeasure if speed else None,
        )
    except (CorpusError, BudgetError) as e:
        raise PlanError(f"error: {e}") from None


REMEASURE_TRIES = 3  # probes of a model whose speed decides between two close predictions: the fastest kept

# A model not yet probed on CPU is at best this share of a probed one's seconds per FLOP (larger matrix products run
# faster a FLOP, never twice as fast on a CPU): below that it cannot win, and is not probed.
CPU_BEST_SPEEDUP = 0.5


class Speeds:
    """The training machines' speed: probed here (recipes/planner/speed/), or read from another machine's speed
    file (SPEED_FILE); one figure a probe, so that the budget rule's pick and the updates its budget gives read the same
    speed, however the machine's load changes between them."""

    def __init__(self, v: Variables, cap: int):
        self.gpus, self.cpu_workers = int(v.get("GPUS", "0")), int(v.get("CPU_WORKERS", "2"))
        self.nodes = int(v.get("NNODES", "1") or 1)
        per_node = self.gpus if self.gpus > 0 else self.cpu_workers
        self.devices = per_node * self.nodes
        self.precision, self.cap, self.seen = v.get("PRECISION", "fp32"), cap, {}
        self.file = None
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
        scaled per token (probe_cache.per_token), else measured here."""
        if self.file:
            share = probe.tokens_per_update
            seconds = self.file.seconds(probe.arch, probe.model_flags, share)
            params = Model.from_flags(probe.arch, probe.model_flags).parameters(probe.vocab_size)
            seconds += self.file.all_reduce_seconds(params, self.devices, self.nodes)
            return {"seconds": seconds, "said": self.file.said(self.devices, self.nodes), "cached": True}
        return probe_cache.per_token(probe, self.exact)

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
        if self.file or self.gpus > 0:
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
        return min(known) * flops * per_token * CPU_BEST_SPEEDUP


def decide(v: Variables) -> Plan:
    """The plan for the recipe's variables (module docstring); PlanError names what cannot work."""
    check_settings(v)
    src, tgt, toy, init = v.get("SRC"), v.get("TGT"), v.toy, v.get("INIT")
    gpus, cpu_workers, precision = v.get("GPUS", "0"), v.get("CPU_WORKERS", "2"), v.get("PRECISION", "fp32")
    if precision not in ("fp32", "fp16", "bf16", "amp"):
        raise PlanError(f"PRECISION={precision}: use fp32, fp16, bf16 or amp")
    cap = v.number("MAX_TOKENS_PER_DEVICE", 4096, least=1)

    speeds = Speeds(v, cap)
    found = corpus_settings(v, speeds)
    # the variables given beside the budget rule's settings, and the toy size's own
    vocab_size = v.number("VOCAB_SIZE", found.vocab_size, least=1)
    joint = v.get("JOINT_VOCAB", "1" if found.joint else "0") == "1"
    arch, model_flags = found.arch, found.model_flags
    if v.get("ARCH") or v.get("MODEL_FLAGS"):  # the user's model: MODEL_FLAGS change ARCH's (the base model's)
        arch, model_flags = v.get("ARCH", "vaswani_base"), v.get("MODEL_FLAGS")
    dropout = v.get("DROPOUT", str(found.dropout))
    tokens_per_update = v.number("TOKENS_PER_UPDATE", found.tokens_per_update, least=1)
    max_update = v.number("MAX_UPDATE", found.max_update, least=1)
    warmup = v.number("WARMUP")
    save_interval = v.number("SAVE_INTERVAL_UPDATES", least=1)
    average_last = v.number("AVERAGE_LAST", 5, least=1)
    if toy:
        arch, model_flags = v.get("TOY_ARCH", "vaswani_tiny"), v.get("TOY_MODEL_FLAGS")
        vocab_size = v.number("TOY_VOCAB_SIZE", 1000, least=1)
        max_update, warmup = v.number("TOY_MAX_UPDATE", 300, least=1), v.number("TOY_WARMUP", 100)
        save_interval = v.number("TOY_SAVE_INTERVAL_UPDATES", 50, least=1)
        tokens_per_update, cap = v.number("TOY_TOKENS_PER_UPDATE", 3000, least=1), 1500
        average_last = v.number("TOY_AVERAGE_LAST", 3, least=1)
    picked_by_rule = (arch, model_flags, dropout, tokens_per_update, vocab_size) == (
        found.arch,
        found.model_flags,
        str(found.dropout),
        found.tokens_per_update,
        found.vocab_size,
    )
    # INIT: the parent's model, vocabulary and P_drop; fine-tuning's batch, rate and length
    # (recipes/planner/finetuning.py), the budget sizing the updates; optimizer and data start afresh
    the_parent, tuning, held_out = None, None, {"valid": None, "test": None}
    share = list(shared(joint))
    if init:
        held_out = finetuning.held_out(found.pairs, bool(v.words("VALID")), bool(v.words("TEST")))
        try:
            finetuning.check_pairs(
                found.pairs,
                sum(n or 0 for n in held_out.values()),
                v.number("FINETUNE_MIN_PAIRS", finetuning.MIN_PAIRS),
            )
        except finetuning.FineTuningError as e:
            raise PlanError(f"error: {e}") from None
        given_bleu = {"1": True, "0": False}.get(v.get("EVAL_BLEU"))
        if given_bleu is None:  # a small in-domain corpus, whatever is replayed beside it
            given_bleu = found.pairs < finetuning.SMALL
        given = max_update if toy else v.number("MAX_UPDATE", least=1)
        pairs, target_tokens = found.pairs, found.target_tokens
        if v.get("REPLAY"):  # the epochs count the general pairs replayed too, or the parent's translations
            replayed = round(float(v.get("REPLAY_RATIO", "1")) * pairs)
            pool = v.get("REPLAY") if v.get("REPLAY") != "parent" else v.get("REPLAY_SOURCES")
            if pool:
                replayed = min(count_lines(f"{pool}.{src}"), replayed)
            pairs, target_tokens = pairs + replayed, int(target_tokens * (pairs + replayed) / max(pairs, 1))
        tuning = finetuning.decide(pairs, target_tokens, given, None, given_bleu)
        if not toy:  # the toy size keeps its batch
            tokens_per_update = v.number("TOKENS_PER_UPDATE", tuning.tokens_per_update, least=1)
        max_update = tuning.max_update
        try:
            read = parent.read_parent(init, src, tgt, v.get("WORK"), v.get("TGT_TOKEN"))
        except parent.ParentError as e:
            raise PlanError(f"INIT: {e}") from None
        the_parent = read.assignments(src, tgt)
        arch, model_flags = "vaswani_base", the_parent["PARENT_MODEL_FLAGS"]
        dropout = v.get("DROPOUT", the_parent["PARENT_DROPOUT"])
        vocab_size = int(the_parent["PARENT_VOCAB_SIZE"])
        share = the_parent["PARENT_SHARE"].split()
        joint = share == ["--share-all-embeddings"]
        check_export(v, model_flags)
    batch = batch_layout(v, tokens_per_update, cap)
    # how long training takes here, from a probe of this machine (a few seconds, once per machine and model), with
    # the validations over the dev set; with TIME, the updates that fit (the budget rule's own, for its pick: one
    # figure of this machine's speed decides both). fairseq's --stop-time-hours stops training at TIME in any case.
    time_text = v.get("TIME")
    probe = probing.layout_probe(
        arch,
        model_flags,
        vocab_size,
        tokens_per_update,
        int(gpus),
        int(cpu_workers),
        int(batch["DEVICES"]),
        precision,
        cap,
    )
    # beside TIME, a cap of its own (a fine-tuning's epochs, the updates past which the corpus repeats to no use) may
    # stop training before the time does; the rule's own updates for TIME are the time's, and the floor of updates
    # (time_budget.MIN_UPDATES) is theirs: a TIME too short for it is refused as such
    time_cap = max_update
    if time_text and (toy or (tuning is None and not (found.useful_updates and max_update >= found.useful_updates))):
        time_cap = 0
    try:
        spent = time_budget.budget(
            probe,
            time_text,
            time_cap,
            tokens_per_update=tokens_per_update,
            valid_tokens=found.valid_tokens,
            interval=save_interval or 0,
            speed=speeds.measured,
            here=speeds.file is None,
        )
    except BudgetError as e:
        raise PlanError(f"error: {e}") from None
    max_update = int(spent["MAX_UPDATE"])
    if tuning is not None:
        if time_text:  # TIME's updates, at the parent's speed: the ramp is a share of them
            tuning = finetuning.decide(pairs, target_tokens, None, max_update, tuning.by_bleu)
        warmup = v.number("WARMUP", v.number("FINETUNE_WARMUP", tuning.warmup))
        if toy:
            warmup = v.number("TOY_WARMUP", warmup)
    # a short MAX_UPDATE (docs/parallel-text.md): Eq. (3) warms up over the paper's 4000 updates (Section 5.3) when
    # MAX_UPDATE leaves room for it; a shorter budget warms up over a sixth of it, the curve scaled to keep the
    # paper's peak, (d_model * 4000)^-0.5 (--peak-warmup-updates). Checkpoints (and validations) come every 1000
    # updates, or 20 times in all, so that the last 5 span a quarter of it.
    peak_warmup = None
    if warmup is None and max_update // 6 < PAPER_WARMUP:
        warmup, peak_warmup = max(max_update // 6, 1), PAPER_WARMUP
    if save_interval is None:
        save_interval = min(1000, max(max_update // 20, 1))
    if max_update // save_interval < average_last:
        raise PlanError(
            f"AVERAGE_LAST={average_last} checkpoints to average, but MAX_UPDATE={max_update} saves only "
            f"{max_update // save_interval} every SAVE_INTERVAL_UPDATES={save_interval}"
        )
    eval_bleu = tuning.by_bleu if tuning is not None else v.get("EVAL_BLEU", "0") == "1"
    patience = v.number("PATIENCE", tuning.patience if tuning is not None else 10 if eval_bleu else 0)
    label_smoothing = v.decimal("LABEL_SMOOTHING")
    if tuning is not None:
        training = replace(tuning, warmup=warmup).training_flags(label_smoothing)
    else:
        training = training_flags(warmup, label_smoothing)
    training_stop = ["--stop-time-hours", spent["STOP_TIME_HOURS"]] if time_text else []
    plan = Plan(
        key={},
        corpus={
            "pairs": found.pairs,
            "size_class": found.size_class,
            "valid_tokens": found.valid_tokens,
            "input_files": input_files(v),
        },
        model={
            "arch": arch,
            "model_flags": model_flags,
            "dropout": dropout,
            "vocab_size": vocab_size,
            "joint": joint,
            "share": share,
        },
        batch={
            "tokens_per_update": tokens_per_update,
            "max_tokens_per_device": cap,
            **{k.lower(): x for k, x in batch.items()},
        },
        budget={
            "max_update": max_update,
            "time": time_text,
            "stop": training_stop,
            **{k.lower(): x for k, x in spent.items() if k != "MAX_UPDATE"},
        },
        schedule={
            "warmup": warmup,
            "peak_warmup": peak_warmup,
            "save_interval_updates": save_interval,
            "average_last": average_last,
            "patience": patience,
            "eval_bleu": eval_bleu,
            # the model handed over: the checkpoint of the best dev BLEU (a small corpus fine-tuned), or the average
            "handed_over": "best" if tuning is not None and eval_bleu else "average",
            "held_out": held_out,
            "finetuning": asdict(replace(tuning, warmup=warmup)) if tuning is not None else None,
        },
        choice={
            **found.plan,
            "picked_line": found.budget,
            "explain": found.explain,
            "picked_by_rule": picked_by_rule,
            "notes": found.notes if picked_by_rule else [],
            "busy": speeds.busy(),
        },
        parent=the_parent,
        flags={
            "training": training,
            "decoding": decoding(v),
        },
    )
    plan.lines = summary(plan, v)
    return plan


def decoding(v: Variables) -> List[str]:
    """fairseq-generate's flags: the paper's beam search (Section 6.1), BEAM and LENPEN where given."""
    return decoding_flags(v.number("BEAM"), v.decimal("LENPEN"), None, DECODING)


def check_export(v: Variables, model_flags: str) -> None:
    if "ct2" in v.get("EXPORT").split() and "--decoder-start pad" in f" {model_flags} ":
        raise PlanError(
            f"EXPORT={v.get('EXPORT')} and INIT={v.get('INIT')}: the parent decodes from <pad> (MarianMT's start), "
            "which the CTranslate2 export does not hold: EXPORT=hf"
        )


def batch_layout(v: Variables, tokens_per_update: int, cap: int) -> Dict[str, str]:
    """The training's machines, processes and batch (recipes/planner/layout.py) for the recipe's variables."""
    try:
        return layout.layout(
            v.get("LAUNCH", "local"),
            v.get("NNODES", "1"),
            v.get("NODE_RANK", "0"),
            v.get("MASTER_ADDR"),
            v.get("MASTER_PORT"),
            v.get("GPUS", "0"),
            v.get("CPU_WORKERS", "2"),
            v.get("DIST_TIMEOUT", "600"),
            tokens_per_update,
            cap,
            real=v.get("DRY_RUN", "0") != "1",
            slurm_job_id=os.environ.get("SLURM_JOB_ID", ""),
            slurm_job_num_nodes=os.environ.get("SLURM_JOB_NUM_NODES", ""),
            cuda_devices=layout.cuda_devices,
        )
    except layout.LayoutError as e:
        raise PlanError(str(e)) from None


def input_files(v: Variables) -> List[str]:
    """Every file the corpora are read from: the recipe's first stage declares them (an edit redoes it)."""
    src, tgt = v.get("SRC"), v.get("TGT")
    return [
        f
        for spec in (*v.words("TRAIN"), *v.words("VALID"), *v.words("TEST"))
        for f in find_corpus(spec, src, tgt).files
    ]


# a GPU given fewer tokens an update than this is mostly idle (its matrix products too small to fill it)
SMALL_SHARE = 512


def summary(plan: Plan, v: Variables) -> List[str]:
    """The lines the recipe prints of its plan: the corpus and the model; what was picked; how long it takes."""
    m, b, budget = plan.model, plan.batch, plan.budget
    src, tgt = v.get("SRC"), v.get("TGT")
    pairs, size_class = plan.corpus["pairs"], plan.corpus["size_class"]
    if plan.parent:
        p = plan.parent
        drop = "" if m["dropout"] == p["PARENT_DROPOUT"] else f", P_drop {m['dropout']} here"
        lines = [
            f"{src}-{tgt}: {pairs} lines, fine-tuning {v.get('INIT')}: {p['PARENT_SUMMARY']}{drop}; its vocabulary; "
            f"{b['batch_summary']}",
            f"picked: the parent's model, {budget['max_update']} updates, Eq. (3) warming up over "
            f"{plan.schedule['warmup']} (fine-tuning)",
        ]
        if plan.schedule.get("finetuning"):
            lines[1] = "picked: " + finetuning.FineTuning(**plan.schedule["finetuning"]).picked_line()
    else:
        model = " ".join(filter(None, (m["arch"], m["model_flags"])))
        vocabulary = "a joint vocabulary" if m["joint"] else "a vocabulary per side"
        lines = [
            f"{src}-{tgt}: {pairs} lines, {size_class}: {model} P_drop {m['dropout']}, {vocabulary} of "
            f"{m['vocab_size']}; {b['batch_summary']}"
        ]
        if not v.toy:
            if plan.choice["picked_by_rule"]:
                lines.append(f"picked: {plan.choice['picked_line']}")
            else:
                lines.append(
                    "picked: your settings (ARCH, MODEL_FLAGS, DROPOUT, TOKENS_PER_UPDATE or VOCAB_SIZE given), "
                    f"{budget['max_update']} updates"
                )
    lines.append(f"time: training {budget['training_short']}; data and test set not counted")
    lines += [f"note: {n}" for n in plan.choice.get("notes", [])]
    devices = int(b.get("devices") or 1)
    share = b["tokens_per_update"] // devices
    if int(v.get("GPUS", "0") or 0) > 0 and devices > 1 and share < SMALL_SHARE:
        lines.append(
            f"note: each of the {devices} GPUs gets {share:,} tokens an update and computes little: fewer would do"
        )
    if plan.choice.get("busy"):
        lines.append(
            f"speed: measured while this machine was busy ({'; '.join(plan.choice['busy'])}): the plan may be too "
            "short; REPROBE=1 once it is quiet measures again"
        )
    if v.get("EXPLAIN", "0") == "1":
        lines += ["why:", plan.choice["explain"], f"training: about {budget['training_time']}"]
    if int(v.get("GPUS", "0")) == 0 and not v.get("TIME") and not v.toy and int(budget["training_seconds"]) > 8 * 3600:
        lines.append(
            "more than a working day on CPU workers: TIME=8h picks what 8 hours train best here, or a GPU: GPUS=1"
        )
    return lines


# ---- the plan held in WORK ------------------------------------------------------------------------------------


def plan_file(work: str) -> str:
    return os.path.join(work, "plan.json")


def begun(work: str) -> bool:
    """Whether a run has begun in WORK: a stage of it is done (a stamp in WORK/.done)."""
    done = os.path.join(work, ".done")
    return os.path.isdir(done) and any(name[:1].isdigit() for name in os.listdir(done))


def kept_file(work: str, key: Dict) -> str:
    """Where WORK keeps the plan decided from ``key``: every plan a run in WORK was given, by what it was decided
    from, so that a run resumed with the settings it began with finds its own plan after another was tried."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(work, ".plans", f"{digest}.json")


def held(path: str) -> Optional[Plan]:
    """The plan in the file at ``path``, or None (none, or one this version does not read)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("version") != PLAN_VERSION:
            return None
        return Plan(**data)
    except (OSError, ValueError, TypeError):
        return None


def differences(before: Plan, now: Plan) -> List[str]:
    """What ``now`` would change of the plan ``before``: 'model.dropout: 0.1 -> 0.3', one a line."""
    found = []
    for part in ("corpus", "model", "batch", "budget", "schedule", "parent", "flags"):
        old, new = getattr(before, part) or {}, getattr(now, part) or {}
        for name in sorted(set(old) | set(new)):
            if name in ("training_time", "training_short", "training_seconds", "seconds_per_update"):
                continue  # how long it takes here: measured again, not the plan
            if old.get(name) != new.get(name):
                found.append(f"{part}.{name}: {old.get(name)!r} -> {new.get(name)!r}")
    return found


def plan_for(v: Variables, work: str, dry_run: bool, fresh: bool) -> Plan:
    """The plan of a run in WORK (module docstring): the one WORK keeps for the same key once the run has begun,
    else decided now and written (by a dry run only while no run has begun there)."""
    key = decision_key(v)
    latest, own = held(plan_file(work)), held(kept_file(work, key))
    if own is not None and own.key == key and not fresh and begun(work):
        # what only this machine tells is checked again (its CUDA devices, the SLURM allocation), and what comes after
        # training is read afresh
        batch_layout(v, own.batch["tokens_per_update"], own.batch["max_tokens_per_device"])
        check_export(v, own.model["model_flags"])
        own.flags["decoding"] = decoding(v)
        if not dry_run and (latest is None or latest.key != key):
            write_json(plan_file(work), asdict(own))  # WORK's plan is again the one the run goes on with
        own.lines = [*summary(own, v), f"plan: the plan this run holds ({plan_file(work)}, decided {own.decided})"]
        return own
    plan = decide(v)
    plan.key, plan.decided = key, time.strftime("%Y-%m-%d %H:%M")
    if dry_run and begun(work):  # the plan of the run begun stays as it is
        changes = differences(latest, plan) if latest else ["(it holds no plan this version reads)"]
        plan.lines.append(
            f"plan: {plan_file(work)} holds the plan of the run begun in {work}, left as it is (a dry run); "
            + ("this would change: " + "; ".join(changes) if changes else "nothing of it would change")
        )
        return plan
    os.makedirs(work, exist_ok=True)
    write_json(plan_file(work), asdict(plan))
    if not dry_run:  # every plan a run is given, by its key
        os.makedirs(os.path.dirname(kept_file(work, key)), exist_ok=True)
        write_json(kept_file(work, key), asdict(plan))
    return plan


# ---- the plan as the recipe reads it ------------------------------------------------------------------------


def fields(plan: Plan, v: Variables) -> Dict[str, object]:
    """The plan as the recipe's variables: a name and a string, or a list of words (a bash array)."""
    m, b, s, budget = plan.model, plan.batch, plan.schedule, plan.budget
    p = plan.parent or {}
    found: Dict[str, object] = {
        "VOCAB_SIZE": str(m["vocab_size"]),
        "JOINT_VOCAB": "1" if m["joint"] else "0",
        "SPM_TYPE": v.get("SPM_TYPE", "bpe"),
        "ARCH": m["arch"],
        "MODEL_FLAGS": m["model_flags"],
        "MODEL_ARGS": m["model_flags"].split(),
        "SHARE_ARGS": m["share"],
        "DROPOUT": m["dropout"],
        "TOKENS_PER_UPDATE": str(b["tokens_per_update"]),
        "MAX_TOKENS_PER_DEVICE": str(b["max_tokens_per_device"]),
        "MAX_UPDATE": str(budget["max_update"]),
        "STOP_TIME_ARGS": budget["stop"],
        "WARMUP": str(s["warmup"]),
        "PEAK_WARMUP_ARGS": ["--peak-warmup-updates", str(s["peak_warmup"])] if s["peak_warmup"] else [],
        "SAVE_INTERVAL_UPDATES": str(s["save_interval_updates"]),
        "AVERAGE_LAST": str(s["average_last"]),
        "PATIENCE": str(s["patience"]),
        "EVAL_BLEU": "1" if s["eval_bleu"] else "0",
        "HANDED_OVER": s.get("handed_over", "average"),
        "HELD_OUT_ARGS": [
            w for split, n in (s.get("held_out") or {}).items() if n for w in (f"--{split}-size", str(n))
        ],
        "PAIRS": str(plan.corpus["pairs"]),
        "SIZE_CLASS": plan.corpus["size_class"],
        "INPUT_FILES": plan.corpus["input_files"],
        "TRAINING": plan.flags["training"],
        "DECODING": plan.flags["decoding"],
        **{name.upper(): str(b[name]) for name in ("per_node", "devices", "update_freq", "max_tokens")},
        "BATCH_SUMMARY": b["batch_summary"],
        "MASTER_ADDR": b["master_addr"],
        "MASTER_PORT": b["master_port"],
        **p,
    }
    return found


def encode_fields(found: Dict[str, object]) -> bytes:
    """``s NAME VALUE`` and ``a NAME COUNT WORD...`` records, NUL-separated: what lib.sh's plan_run reads."""
    out = []
    for name, value in found.items():
        if isinstance(value, list):
            out += ["a", name, str(len(value)), *value]
        else:
            out += ["s", name, str(value)]
    return b"".join(w.encode("utf-8", "surrogateescape") + b"\0" for w in out)


# ---- the command line ----------------------------------------------------------------------------------------


def command_line(argv: Optional[Sequence[str]] = None) -> int:  # not main(): no console script, the recipe runs it
    parser = argparse.ArgumentParser(prog="python -m recipes.planner.plan", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sizes", help="the settings of each size class")
    d = sub.add_parser("decide", help="the plan of a run, from the recipe's variables on stdin")
    r = sub.add_parser("rule", help="the budget rule's settings for corpora and a budget, as JSON (the benchmarks')")
    r.add_argument("--train", nargs="+", required=True, help="PREFIX (PREFIX.SRC and PREFIX.TGT) or a .tsv file, each")
    r.add_argument("--valid", nargs="*", default=[])
    r.add_argument("--src", required=True)
    r.add_argument("--tgt", required=True)
    r.add_argument("--time", default="", help="the budget in time (90m, 8h): updates at this machine's speed")
    r.add_argument("--max-update", default="", help="the budget in updates (neither: a full run of the size class)")
    r.add_argument("--gpus", default="0", help="GPUs per machine, for the speed probe")
    r.add_argument("--cpu-workers", default="1", help="CPU processes (with --gpus 0)")
    lay = sub.add_parser("layout", help="the batch's layout alone, from the recipe's variables on stdin")
    for p in (d, lay):
        p.add_argument("--work", required=True)
        p.add_argument("--fields", required=True, help="where the plan's fields go, as the recipe reads them")
        p.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "sizes":
        print(size_classes.sizes_table())
        return 0
    try:
        if args.command == "rule":
            v = Variables(
                {
                    "TRAIN": ":".join(args.train),
                    "VALID": ":".join(args.valid),
                    "SRC": args.src,
                    "TGT": args.tgt,
                    "TIME": args.time,
                    "MAX_UPDATE": args.max_update,
                    "GPUS": args.gpus,
                    "CPU_WORKERS": args.cpu_workers,
                    "MIN_PAIRS": "0",
                }
            )
            check_settings(v)
            found = corpus_settings(v, Speeds(v, 4096))
            print(json.dumps({k: x for k, x in asdict(found).items() if k not in ("plan", "explain")}))
            return 0
        v = Variables(read_records(sys.stdin.buffer.read())[1])  # lib.sh's records, as the engine reads them
        if args.command == "layout":
            with open(args.fields, "wb") as f:
                f.write(
                    encode_fields(
                        batch_layout(
                            v, v.number("TOKENS_PER_UPDATE", least=1), v.number("MAX_TOKENS_PER_DEVICE", 4096, least=1)
                        )
                    )
                )
            return 0
        plan = plan_for(v, args.work, args.dry_run, fresh=v.get("REPROBE", "0") != "0")
        with open(args.fields, "wb") as f:
            f.write(encode_fields(fields(plan, v)))
    except PlanError as e:
        print(e, file=sys.stderr)
        return 2
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(plan.lines))
    return 0


if __name__ == "__main__":
    sys.exit(command_line())
