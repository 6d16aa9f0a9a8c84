"""The budget rule's pick in words, for people: the one line the recipe prints, and why (``--explain``)."""

from recipes.planner.budget.candidates import model_words
from recipes.planner.budget.choosing import GRID_A_DECADE, Choice, Option
from recipes.planner.budget.law import FIT_RMS
from recipes.planner.budget.size_classes import Sized


def picked_line(found: "Sized", option: Option) -> str:
    """The pick, in one line under 120 characters, with what its prediction rests on (the vocabulary: the plan's line
    before it)."""
    c, m = option.candidate, option.candidate.model
    return (
        f"N={m.encoder_layers} x d_model {m.d_model}, d_ff {m.d_ff}, P_drop {c.dropout}, "
        f"{c.tokens_per_update:,} tokens x {option.updates:,} updates ({option.loss:.2f} bits, {option.evidence})"
    )


def explain(given: str, choice: Choice, pairs: int) -> str:
    """Why: the pick, each model's best option beside it, and what was left unmeasured."""
    best = choice.picked
    lines = [
        f"{given}: the candidate of the lowest predicted validation loss (bits a target piece); the pick's prediction: "
        f"{best.evidence}"
    ]
    shown = {}
    for o in choice.options:  # each model at its best dropout and batch
        key = (o.candidate.arch, o.candidate.model_flags)
        if o.limited != "not probed" and (key not in shown or o.loss < shown[key].loss):
            shown[key] = o
    for o in sorted(shown.values(), key=lambda o: o.loss):
        speed_said = f", {o.seconds_per_update:.3g} s an update" if o.seconds_per_update else ""
        limited = f", {o.limited}" if o.limited else ""
        lines.append(
            f"  {'*' if o is best else ' '} {o.candidate.name}: {o.updates:,} updates{speed_said}, {o.loss:.2f} bits"
            f" ({o.evidence}{limited})"
        )
    lowest = min(shown.values(), key=lambda o: o.loss)
    if lowest is not best:
        lines += [
            f"  {model_words(lowest.candidate)} predicts {best.loss - lowest.loss:.3f} bits lower, but was the best at "
            "no smaller budget:",
            f"  it is picked from the next budget of the grid ({GRID_A_DECADE} a decade), so that a larger budget "
            "never picks a smaller model",
        ]
    probed = {model_words(o.candidate) for o in choice.options if o.limited != "not probed"}
    skipped = sorted({model_words(o.candidate) for o in choice.options} - probed)
    if skipped:
        lines.append(f"  not probed, since even at their fastest they predict worse: {'; '.join(skipped)}")
    lines.append(
        f"  (recipes/planner/budget/; fitted within {FIT_RMS['budget runs']:.2f} bits rms of the budget runs "
        f"and {FIT_RMS['Table 3']:.2f} of Table 3; docs/budget-rule.md)"
    )
    return "\n".join(lines)
