"""``python -m recipes.planner``: what lib.sh's ``plan_run`` runs (``decide``, ``layout``), each size class's
settings (``sizes``), and the budget rule's settings as JSON for the benchmarks (``rule``)."""

import argparse
import json
import sys
from dataclasses import asdict
from typing import Dict, Optional, Sequence

from preprocess.corpora import CorpusError
from recipes.planner import plan
from recipes.planner.budget import size_classes
from recipes.planner.decide import batch_layout, corpus_settings
from recipes.planner.fields import encode_fields, fields
from recipes.planner.plan import PlanError
from recipes.planner.saved import plan_for
from recipes.planner.declarations import declared, help_table, recipes
from recipes.planner.speeds import Speeds
from recipes.planner.settings import precision_args
from recipes.planner.variables import Variables, check_choices, check_settings
from recipes.records import read_records


def command_line(argv: Optional[Sequence[str]] = None) -> int:  # not main(): no console script, the recipe runs it
    parser = argparse.ArgumentParser(prog="python -m recipes.planner", description=plan.__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sizes", help="the settings of each size class")
    help_of = sub.add_parser("settings", help="the variables a recipe reads, their defaults and help (its --help)")
    help_of.add_argument("recipe", choices=recipes())
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
        p.add_argument("--recipe", default="", help="the recipe's name, whose declared variables are checked")
    args = parser.parse_args(argv)
    if args.command == "sizes":
        print(size_classes.sizes_table())
        return 0
    if args.command == "settings":
        print(help_table(args.recipe))
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
            if args.recipe in recipes():
                check_choices(v, declared(args.recipe))
            found: Dict[str, object] = dict(
                batch_layout(v, v.number("TOKENS_PER_UPDATE"), v.number("MAX_TOKENS_PER_DEVICE"))
            )
            found["PRECISION_ARGS"] = precision_args(v.get("PRECISION"))
            with open(args.fields, "wb") as f:
                f.write(encode_fields(found))
            return 0
        decided = plan_for(v, args.work, args.dry_run, fresh=v.get("REPROBE") != "0")
        with open(args.fields, "wb") as f:
            f.write(encode_fields(fields(decided, v)))
    except PlanError as e:
        print(e, file=sys.stderr)
        return 2
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(decided.lines))
    return 0
