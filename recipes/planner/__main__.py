"""python -m recipes.planner (recipes.planner.cli)."""

import sys

from recipes.planner.cli import command_line

sys.exit(command_line())
