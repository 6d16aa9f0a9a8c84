"""The engine's command line, as recipes/lib.sh runs it:

python -m recipes.engine run --recipe NAME --work W --repo R --python PY ... < PLAN
"""

import argparse
import os
import signal
import sys
from typing import List, Sequence

from recipes.engine.runner import Runner, read_plan, say
from recipes.engine.stamps import Context, DigestCache, setting_names
from recipes.planner.declarations import declared, recipes


def recipe_settings(recipe: str, sources: Sequence[str]) -> List[str]:
    """The names of the recipe's settings, recorded in its stamps: those declared for it (recipes/planner/), or for a
    recipe on lib.sh that declares none, those its sources let the environment set."""
    return sorted({s.name for s in declared(recipe)}) if recipe in recipes() else setting_names(sources)


def main_run(args) -> int:
    stages, variables, sources = read_plan(sys.stdin.buffer.read())

    def planned(name: str) -> str:  # the plan's value (lib.sh's plan_run: PLAN_NAME), else the recipe's own
        return variables.get(f"PLAN_{name}", variables.get(name, ""))

    # the recipe's settings and what its plan decided (PLAN_*), so that a changed stage names the one that changed
    settings = {name: variables.get(name, "") for name in recipe_settings(args.recipe, sources)}
    settings.update({name: value for name, value in variables.items() if name.startswith("PLAN_")})
    ctx = Context(args.work, args.repo, args.python, args.launch, args.node_rank, int(args.dist_timeout), settings)
    ctx.digest_cache = DigestCache(os.path.join(ctx.stamp_dir, "digests.json"))  # each node its own
    layout_vars = {
        "MASTER_ADDR": planned("MASTER_ADDR"),
        "MASTER_PORT": planned("MASTER_PORT"),
        "DIST_TIMEOUT": variables.get("DIST_TIMEOUT", ""),
        "NNODES": variables.get("NNODES", ""),
    }
    runner = Runner(
        stages,
        ctx,
        args.dry_run,
        layout_vars,
        gpus=int(variables.get("GPUS") or 0),
        per_node=int(planned("PER_NODE") or 1),
        grace=args.grace,
        parent_pid=args.parent_pid,
        vocabulary=planned("VOCAB_SIZE"),
    )
    return runner.run(check_only=args.check)


def parse(argv: Sequence[str]):
    parser = argparse.ArgumentParser(prog="python -m recipes.engine", description="The recipes' engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="check every stage of the plan on stdin, then run (or show) them in order")
    run.add_argument("--work", required=True)
    run.add_argument(
        "--recipe", default="", help="its name: its declared variables are the stamps' settings (else its sources')"
    )
    run.add_argument("--repo", required=True)
    run.add_argument("--python", default="python")
    run.add_argument("--launch", default="local")
    run.add_argument("--node-rank", default="0")
    run.add_argument("--dist-timeout", default="600")
    run.add_argument("--dry-run", action="store_true")
    run.add_argument("--check", action="store_true", help="decide every stage, run none; exit 3 if a run would stop")
    run.add_argument(
        "--grace",
        type=float,
        default=float(os.environ.get("RECIPE_STOP_GRACE", "10")),
        help="seconds between SIGTERM and SIGKILL when a stage is stopped",
    )
    run.add_argument("--parent-pid", type=int, default=0, help="the recipe's shell: if it is gone already, stop")
    run.set_defaults(main=main_run)
    return parser.parse_args(argv)


def command_line(argv: Sequence[str]) -> int:  # not main(): no console script, lib.sh runs it
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C while deciding, even as a shell's background job
    try:
        arguments = parse(argv)
        return arguments.main(arguments)
    except KeyboardInterrupt:  # Ctrl-C while the engine decides (digesting a large corpus, say): before any stage ran
        say("FAILED: stopped by SIGINT before any stage ran; nothing was changed", err=True)
        return 130


if __name__ == "__main__":
    sys.exit(command_line(sys.argv[1:]))
