"""The recipe's variables as it hands them over (lib.sh's records), read with their checks: what cannot work together
stops the plan before any work, naming the variables."""

import os
from typing import Dict, List, Optional, Sequence

from preprocess.corpora import count_lines
from recipes.planner.plan import PlanError
from recipes.planner.settings import BY_NAME, DECLARED, PLANNING, Setting
from transformer_plugin_cli.paper import number


DECLARED_DEFAULT = object()  # Variables.number's default where none is given: the declared one


class Variables:
    """The recipe's variables as it hands them over: a value of '' is unset, and takes its declared default
    (recipes/planner/settings.py), or the one the plan decides where none is declared."""

    def __init__(self, values: Dict[str, str]):
        self.values = values

    def given(self, name: str) -> str:
        """The value as handed over, '' where unset: whether the user (or the recipe's top) gave it."""
        return self.values.get(name) or ""

    def get(self, name: str, default: Optional[str] = None) -> str:
        if default is None:
            default = BY_NAME[name].default if name in BY_NAME else ""
        return self.values.get(name) or default

    def number(self, name: str, default: object = DECLARED_DEFAULT, least: Optional[int] = None) -> Optional[int]:
        """A whole number, at least the declared least; unset: ``default``, or the declared default (None if none)."""
        declared = BY_NAME.get(name)
        least = least if least is not None else declared.least if declared else 0
        text = self.values.get(name) or ""
        if not text:
            if default is not DECLARED_DEFAULT:
                return default
            return int(declared.default) if declared and declared.default else None
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
        return self.get("TOY") == "1"


# every variable that changes the plan's training (settings.py: plans); the others go to the stages as set (their
# own: MAX_WORDS, SEED, ...), are read afresh from the plan held (after training: BEAM, LENPEN, EXPORT), or tell the
# machines of one plan apart (NODE_RANK)
SETTINGS = PLANNING


def check_settings(v: Variables) -> None:
    time_text = v.get("TIME")
    given = v.given("MAX_UPDATE") or (v.given("TOY_MAX_UPDATE") if v.toy else "")
    if time_text and given:
        raise PlanError(f"TIME={time_text} and MAX_UPDATE={given}: give one budget (TIME is turned into updates here)")
    if time_text and v.get("NNODES") != "1" and not v.get("SPEED_FILE"):
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
    check_choices(v, DECLARED)


def check_choices(v: Variables, settings: Sequence[Setting]) -> None:
    """Each of ``settings`` that declares its choices (PRECISION) has one of them."""
    for s in settings:
        value = v.values.get(s.name) or s.default
        if s.choices and value not in s.choices:
            raise PlanError(f"{s.name}={value}: use {', '.join(s.choices[:-1])} or {s.choices[-1]}")
