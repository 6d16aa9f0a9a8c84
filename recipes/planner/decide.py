"""The plan of a run decided from the recipe's variables: the budget rule's settings for the corpus, the variables
given beside them, INIT's parent and fine-tuning, the batch's layout, the time it takes here, and the schedule."""

import os
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional

from preprocess.corpora import CorpusError, count_lines, find_corpus
from recipes.planner import finetuning, layout, parent, repick
from recipes.planner.after_training import check_export, decoding
from recipes.planner.budget import rule
from recipes.planner.budget.candidates import Candidate
from recipes.planner.budget.size_classes import Sized
from recipes.planner.model import shared
from recipes.planner.plan import Plan, PlanError
from recipes.planner.probe_arithmetic import BudgetError, parse_time
from recipes.planner.speed import machine, probing, time_budget
from recipes.planner.speed.whole_run import of_the_plan
from recipes.planner.speeds import Speeds
from recipes.planner.summary import summary
from recipes.planner.variables import Variables, check_settings
from transformer_plugin_cli.paper import training_flags

PAPER_WARMUP = 4000  # Section 5.3


def corpus_settings(v: Variables, speeds: Speeds, holds: bool = False) -> Sized:
    """The budget rule's settings for the corpora, at the budget the variables give (none at toy size); ``holds``:
    with TIME, also the fewest seconds for which the rule picks the same model (a re-pick's bound)."""
    max_update = None if v.toy or not v.get("MAX_UPDATE") else int(v.get("MAX_UPDATE"))
    time_text = "" if v.toy or v.get("INIT") else v.get("TIME")
    min_pairs = v.number("TOY_MIN_PAIRS") if v.toy else v.number("MIN_PAIRS")
    if v.get("INIT"):  # fine-tuning's own lower bound, checked with what is held out (recipes/planner/finetuning.py)
        min_pairs = 0
    speed = None
    if time_text:
        if speeds.gpus > 0 and not speeds.file and not machine.cuda_here():
            raise PlanError(f"error: {time_budget.no_cuda(time_text)}")
        speed = speeds.of
    try:
        found = rule.settings(
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
            least_share=speeds.least_share,
            holds=holds and bool(time_text),
        )
    except (CorpusError, BudgetError) as e:
        raise PlanError(f"error: {e}") from None
    if time_text:
        found.notes += fewer_devices(found, speeds, time_text)
    return found


def fewer_devices(found: Sized, speeds: Speeds, time_text: str) -> List[str]:
    """Where the pick ends before its TIME (its lowest, or what the corpus can teach), the fewest GPUs that train the
    same model, batch and updates within TIME: these devices are more than the budget can use."""
    pick = next(o for o in found.plan["options"] if o["picked"])
    if not pick["limited"] or speeds.gpus == 0 or speeds.devices == 1:
        return []
    c = Candidate("", found.arch, found.model_flags, found.dropout, found.tokens_per_update)
    fewest = speeds.fewest_devices(c, found.vocab_size, found.max_update, parse_time(time_text), found.valid_tokens)
    if fewest >= speeds.devices:
        return []
    what = f"{fewest} GPUs" if fewest > 1 else "1 GPU"
    if fewest > speeds.gpus:
        what = f"{-(-fewest // speeds.gpus)} machines of {speeds.gpus} GPUs"
    return [f"{what} (of {speeds.devices}) would train the same model within TIME={time_text}"]


@dataclass
class Decided:
    """The settings of a run as :func:`decide` settles them, step after step: the model, its vocabulary and batch, and
    the training's length and checkpoints (None: the schedule's own, settled last)."""

    arch: str
    model_flags: str
    dropout: str
    vocab_size: int
    joint: bool
    share: List[str]
    tokens_per_update: int
    cap: int  # a device's micro-batch, fairseq's --max-tokens
    max_update: int
    warmup: Optional[int]
    save_interval: Optional[int]
    average_last: int


@dataclass
class Tuning:
    """INIT's settings beside the model: the parent, fine-tuning's batch, rate and length
    (recipes/planner/finetuning.py) and the pairs they were decided for (the replayed ones counted)."""

    parent: Dict[str, str]
    tuning: finetuning.FineTuning
    held_out: Dict[str, Optional[int]]
    pairs: int
    target_tokens: int


def decide(v: Variables, repicked: Optional[Dict] = None) -> Plan:
    """The plan for the recipe's variables (module docstring); PlanError names what cannot work. ``repicked``: for
    the time a training of this plan left and the speed it measured (recipes/planner/repick.py)."""
    if repicked:
        v = repick.slowed(v, repicked)
    check_settings(v)
    cap = v.number("MAX_TOKENS_PER_DEVICE")
    speeds = Speeds(v, cap)
    speeds.factor = float(repicked["factor"]) if repicked else 1.0
    found = corpus_settings(v, speeds, holds=not repicked and not v.get("INIT") and not v.toy)
    d = given_settings(v, found, cap)
    picked_by_rule = (d.arch, d.model_flags, d.dropout, d.tokens_per_update, d.vocab_size) == (
        found.arch,
        found.model_flags,
        str(found.dropout),
        found.tokens_per_update,
        found.vocab_size,
    )
    # INIT: the parent's model, vocabulary and P_drop; fine-tuning's batch, rate and length
    # (recipes/planner/finetuning.py), the budget sizing the updates; optimizer and data start afresh
    tuned = fine_tuning(v, found, d) if v.get("INIT") else None
    batch = batch_layout(v, d.tokens_per_update, d.cap)
    spent = time_spent(v, found, d, tuned, batch, speeds)
    d.max_update = int(spent["MAX_UPDATE"])
    handed = repick.for_training(v, found.holds_down_to, spent, d) if picked_by_rule and not repicked else None
    d.save_interval = d.save_interval or int(spent.pop("SAVE_INTERVAL_UPDATES", 0)) or None
    tuning = fine_tuned_length(v, tuned, d, float(spent["SECONDS_PER_UPDATE"])) if tuned else None
    held_out = tuned.held_out if tuned else {"valid": None, "test": None}
    planned_schedule = schedule(v, d, tuning, held_out)  # settles the warm-up and the checkpoints
    whole = of_the_plan(v, found, tuned, held_out, spent, d.tokens_per_update)
    label_smoothing = v.decimal("LABEL_SMOOTHING")
    if tuning is not None:
        training = replace(tuning, warmup=d.warmup).training_flags(label_smoothing)
    else:
        training = training_flags(d.warmup, label_smoothing)
    plan = Plan(
        key={},
        corpus={
            "pairs": found.pairs,
            "size_class": found.size_class,
            "valid_tokens": found.valid_tokens,
            "input_files": input_files(v),
        },
        model={
            "arch": d.arch,
            "model_flags": d.model_flags,
            "dropout": d.dropout,
            "vocab_size": d.vocab_size,
            "joint": d.joint,
            "share": d.share,
        },
        batch={
            "tokens_per_update": d.tokens_per_update,
            "max_tokens_per_device": d.cap,
            **{k.lower(): x for k, x in batch.items()},
        },
        budget={
            "max_update": d.max_update,
            "time": v.get("TIME"),
            "stop": ["--stop-time-hours", spent["STOP_TIME_HOURS"]] if v.get("TIME") else [],
            **{k.lower(): x for k, x in spent.items() if k != "MAX_UPDATE"},
            **whole,
            "repick": handed,  # what fairseq-train is handed, to stop for a re-pick (recipes/planner/repick.py)
            "repicked": repicked,  # the re-pick this plan was decided for
        },
        schedule=planned_schedule,
        choice={
            **found.plan,
            "picked_line": found.budget,
            "explain": found.explain,
            "picked_by_rule": picked_by_rule,
            "notes": found.notes if picked_by_rule else [],
            "busy": speeds.busy(),
        },
        parent=tuned.parent if tuned else None,
        flags={"training": training, "decoding": decoding(v, tuned.parent if tuned else None)},
    )
    plan.lines = summary(plan, v)
    return plan


def fine_tuned_length(v: Variables, tuned: Tuning, d: Decided, seconds: float) -> finetuning.FineTuning:
    """INIT's length and ramp: with TIME, its updates at the parent's speed (``seconds`` an update), the ramp a share
    of them, at least an epoch on CPU workers; WARMUP, FINETUNE_WARMUP (TOY_WARMUP) where given."""
    tuning = tuned.tuning
    if v.get("TIME"):
        tuning = finetuning.decide(tuned.pairs, tuned.target_tokens, None, d.max_update, tuning.by_bleu)
        if int(v.get("GPUS")) == 0 and not v.toy:  # a parent too large for CPU workers in that TIME
            try:
                finetuning.check_an_epoch(tuning, tuned.target_tokens, seconds, v.get("TIME"))
            except finetuning.FineTuningError as e:
                raise PlanError(f"error: {e}") from None
    d.warmup = v.number("WARMUP", v.number("FINETUNE_WARMUP", tuning.warmup))
    if v.toy:
        d.warmup = v.number("TOY_WARMUP", d.warmup)
    return tuning


def given_settings(v: Variables, found: Sized, cap: int) -> Decided:
    """The budget rule's settings with the variables given beside them, and the toy size's own."""
    vocab_size = v.number("VOCAB_SIZE", found.vocab_size)
    joint = v.get("JOINT_VOCAB", "1" if found.joint else "0") == "1"
    arch, model_flags = found.arch, found.model_flags
    if v.get("ARCH") or v.get("MODEL_FLAGS"):  # the user's model: MODEL_FLAGS change ARCH's (the base model's)
        arch, model_flags = v.get("ARCH", "vaswani_base"), v.get("MODEL_FLAGS")
    d = Decided(
        arch,
        model_flags,
        v.get("DROPOUT", str(found.dropout)),
        vocab_size,
        joint,
        list(shared(joint)),
        v.number("TOKENS_PER_UPDATE", found.tokens_per_update),
        cap,
        v.number("MAX_UPDATE", found.max_update),
        v.number("WARMUP"),
        v.number("SAVE_INTERVAL_UPDATES"),
        v.number("AVERAGE_LAST"),
    )
    if v.toy:
        d.arch, d.model_flags = v.get("TOY_ARCH"), v.get("TOY_MODEL_FLAGS")
        d.vocab_size = v.number("TOY_VOCAB_SIZE")
        d.max_update, d.warmup = v.number("TOY_MAX_UPDATE"), v.number("TOY_WARMUP")
        d.save_interval = v.number("TOY_SAVE_INTERVAL_UPDATES")
        d.tokens_per_update, d.cap = v.number("TOY_TOKENS_PER_UPDATE"), 1500
        d.average_last = v.number("TOY_AVERAGE_LAST")
    return d


def fine_tuning(v: Variables, found: Sized, d: Decided) -> Tuning:
    """INIT's settings: the parent read and checked, its model, vocabulary and P_drop in ``d``, fine-tuning's batch and
    length from the pairs (with those replayed), what is held out for dev and test."""
    src, tgt = v.get("SRC"), v.get("TGT")
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
    given = d.max_update if v.toy else v.number("MAX_UPDATE")
    pairs, target_tokens = found.pairs, found.target_tokens
    if v.get("REPLAY"):  # the epochs count the general pairs replayed too, or the parent's translations
        replayed = round(float(v.get("REPLAY_RATIO")) * pairs)
        pool = v.get("REPLAY") if v.get("REPLAY") != "parent" else v.get("REPLAY_SOURCES")
        if pool:
            replayed = min(count_lines(f"{pool}.{src}"), replayed)
        pairs, target_tokens = pairs + replayed, int(target_tokens * (pairs + replayed) / max(pairs, 1))
    tuning = finetuning.decide(pairs, target_tokens, given, None, given_bleu)
    if not v.toy:  # the toy size keeps its batch
        d.tokens_per_update = v.number("TOKENS_PER_UPDATE", tuning.tokens_per_update)
    d.max_update = tuning.max_update
    try:
        read = parent.read_parent(
            v.get("INIT"), src, tgt, v.get("WORK"), v.get("TGT_TOKEN"), v.get("SRC_CODE"), v.get("TGT_CODE")
        )
    except parent.ParentError as e:
        raise PlanError(f"INIT: {e}") from None
    the_parent = read.assignments(src, tgt)
    d.arch, d.model_flags = "vaswani_base", the_parent["PARENT_MODEL_FLAGS"]
    d.dropout = v.get("DROPOUT", the_parent["PARENT_DROPOUT"])
    d.vocab_size = int(the_parent["PARENT_VOCAB_SIZE"])
    d.share = the_parent["PARENT_SHARE"].split()
    d.joint = d.share == ["--share-all-embeddings"]
    check_export(v, d.model_flags, "m2m100" if the_parent.get("PARENT_TGT_CODE") else read.kind)
    if v.get("REPLAY") == "parent" and the_parent.get("PARENT_TGT_CODE"):
        raise PlanError(
            f"REPLAY=parent and INIT={v.get('INIT')}: an NLLB or M2M100 parent translates with its target code forced, "
            "which fairseq-interactive cannot: REPLAY=PREFIX of a general corpus instead"
        )
    return Tuning(the_parent, tuning, held_out, pairs, target_tokens)


def time_spent(
    v: Variables, found: Sized, d: Decided, tuned: Optional[Tuning], batch: Dict[str, str], speeds: Speeds
) -> Dict[str, str]:
    """How long training takes here, from a probe of this machine (a few seconds, once per machine and model), with
    the validations over the dev set (translated too with EVAL_BLEU); with TIME, the updates that fit (the budget
    rule's own, for its pick: one figure of this machine's speed decides both). fairseq's --stop-time-hours stops
    training at TIME in any case."""
    time_text = v.get("TIME")
    probe = probing.layout_probe(
        d.arch,
        d.model_flags,
        d.vocab_size,
        d.tokens_per_update,
        int(v.get("GPUS")),
        int(v.get("CPU_WORKERS")),
        int(batch["DEVICES"]),
        v.get("PRECISION"),
        d.cap,
    )
    # beside TIME, a cap of its own (a fine-tuning's epochs, the updates past which the corpus repeats to no use) may
    # stop training before the time does; the rule's own updates for TIME are the time's, and the floor of updates
    # (time_budget.MIN_UPDATES) is theirs: a TIME too short for it is refused as such
    time_cap = d.max_update
    if time_text and (v.toy or (tuned is None and not (found.useful_updates and d.max_update >= found.useful_updates))):
        time_cap = 0
    try:
        return time_budget.budget(
            probe,
            time_text,
            time_cap,
            tokens_per_update=d.tokens_per_update,
            valid_tokens=found.valid_tokens,
            interval=d.save_interval or 0,
            speed=speeds.measured,
            here=speeds.file is None,
            bleu=tuned.tuning.by_bleu if tuned else v.get("EVAL_BLEU", "0") == "1",
            # a fine-tuning learns from an epoch of its corpus, where that is fewer updates than a training from nothing
            least=min(time_budget.MIN_UPDATES, -(-tuned.target_tokens // d.tokens_per_update))
            if tuned
            else time_budget.MIN_UPDATES,
        )
    except BudgetError as e:
        raise PlanError(f"error: {e}") from None


def schedule(
    v: Variables, d: Decided, tuning: Optional[finetuning.FineTuning], held_out: Dict[str, Optional[int]]
) -> Dict:
    """The plan's schedule: Eq. (3)'s warm-up, checkpoints and validations, early stopping, what is handed over.

    A short MAX_UPDATE (docs/parallel-text.md): Eq. (3) warms up over the paper's 4000 updates (Section 5.3) when
    MAX_UPDATE leaves room for it; a shorter budget warms up over a sixth of it, the curve scaled to keep the
    paper's peak, (d_model * 4000)^-0.5 (--peak-warmup-updates). Checkpoints (and validations) come every 1000
    updates, or 20 times in all, so that the last 5 span a quarter of it."""
    peak_warmup = None
    if d.warmup is None and d.max_update // 6 < PAPER_WARMUP:
        d.warmup, peak_warmup = max(d.max_update // 6, 1), PAPER_WARMUP
    if d.save_interval is None:
        d.save_interval = min(1000, max(d.max_update // 20, 1))
    if d.max_update // d.save_interval < d.average_last:
        raise PlanError(
            f"AVERAGE_LAST={d.average_last} checkpoints to average, but MAX_UPDATE={d.max_update} saves only "
            f"{d.max_update // d.save_interval} every SAVE_INTERVAL_UPDATES={d.save_interval}"
        )
    eval_bleu = tuning.by_bleu if tuning is not None else v.get("EVAL_BLEU", "0") == "1"
    return {
        "warmup": d.warmup,
        "peak_warmup": peak_warmup,
        "save_interval_updates": d.save_interval,
        "average_last": d.average_last,
        "patience": v.number("PATIENCE", tuning.patience if tuning is not None else 10 if eval_bleu else 0),
        "eval_bleu": eval_bleu,
        # the model handed over: the checkpoint of the best dev BLEU (a small corpus fine-tuned), or the average
        "handed_over": "best" if tuning is not None and eval_bleu else "average",
        "held_out": held_out,
        "finetuning": asdict(replace(tuning, warmup=d.warmup)) if tuning is not None else None,
    }


def batch_layout(v: Variables, tokens_per_update: int, cap: int) -> Dict[str, str]:
    """The training's machines, processes and batch (recipes/planner/layout.py) for the recipe's variables."""
    try:
        return layout.layout(
            v.get("LAUNCH"),
            v.get("NNODES"),
            v.get("NODE_RANK"),
            v.get("MASTER_ADDR"),
            v.get("MASTER_PORT"),
            v.get("GPUS"),
            v.get("CPU_WORKERS"),
            v.get("DIST_TIMEOUT"),
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
