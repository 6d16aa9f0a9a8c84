"""Every recipe's declared variables, from their two homes: recipes/planner/settings.py (the parallel-text recipes',
which their plan reads) and recipes/planner/paper_settings.py (the paper's recipes'); what each recipe's ``--help``
lists (``python -m recipes.planner settings RECIPE``)."""

from typing import Tuple

from recipes.planner.paper_settings import PAPER_DECLARED
from recipes.planner.settings import DECLARED, Setting


def declared(recipe: str) -> Tuple[Setting, ...]:
    """The variables ``recipe`` reads, as declared for it."""
    return tuple(s for s in DECLARED + PAPER_DECLARED if recipe in s.recipes)


def recipes() -> Tuple[str, ...]:
    """Every recipe whose variables are declared."""
    return tuple(sorted({r for s in DECLARED + PAPER_DECLARED for r in s.recipes}))


def help_table(recipe: str) -> str:
    """The variables ``recipe`` reads, with their defaults and help: its ``--help``."""
    rows = declared(recipe)
    width = max(len(s.name) for s in rows)
    planned = any(s in DECLARED for s in rows)  # the parallel-text recipes, whose plan decides what is left empty
    where = "empty: the plan decides; recipes/planner/settings.py" if planned else "recipes/planner/paper_settings.py"
    lines = [f"Variables of recipes/{recipe}.sh ({where}):"]
    for s in rows:
        default = "" if s.shell else s.default  # a default the shell computes is said in the help
        lines.append(f"  {s.name:<{width}}  {f'[{default}] ' if default else ''}{s.help}")
    return "\n".join(lines)
