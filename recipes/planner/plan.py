"""The plan of a run of recipes/parallel_text.sh: every setting decided once, in one process, before any work.

The recipe hands over its variables (what the user set, and the defaults at its top);
:func:`recipes.planner.decide.decide` turns them into one :class:`Plan`: the corpus's facts, the budget rule's pick
beside every candidate (:mod:`recipes.planner.budget`), the parent to fine-tune (:mod:`recipes.planner.parent`), the
batch's layout (:mod:`recipes.planner.layout`), the budget at this machine's measured speed
(:mod:`recipes.planner.speed`), the schedule, and the paper's flags. The plan is written as ``WORK/plan.json`` and
handed back to the recipe as data (:func:`recipes.planner.fields.fields`: names and values, NUL-separated), which its
stages read; nothing is printed as shell code to be evaluated.

A plan is decided once for a run. While ``WORK/plan.json`` holds the plan of a run begun in that WORK (a stage of it
done), the same settings read it back rather than decide again, so that a run resumed later trains as it began,
however the machine's speed is measured then. A dry run never overwrites such a plan: it shows the plan the run
holds, beside what would change (:mod:`recipes.planner.saved`). ``REPROBE=1`` decides again.

    python -m recipes.planner sizes                         # each size class's settings
    python -m recipes.planner decide --work W --fields F    # the recipe's variables on stdin (lib.sh: plan_run)
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

PLAN_VERSION = 1


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
