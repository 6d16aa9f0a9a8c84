"""The settings that fit a corpus, decided before any work: what recipes/parallel_text.sh asks before its stages.

``settings`` prints them as shell assignments (``AUTO_*``), from the corpora's raw line count and the scripts of
their two sides (docs/parallel-text.md gives each rule and its source): the subword vocabulary, joint or one per
side, the model, dropout, batch and updates (:mod:`recipe.budget_rule`). ``sizes`` prints each size class's.

    python -m recipe.plan settings --train corpus/train --src en --tgt de
    python -m recipe.plan sizes
"""

import argparse
import os
import shlex
import sys
import time
from dataclasses import asdict

from preprocess.corpora import CorpusError, count_lines, find_corpus
from recipe.budget_rule import kept_settings, settings, sizes_table
from transformer_plugin_cli.files import write_json


def command_line(argv=None) -> int:  # not main(): no console script, the recipe runs it
    parser = argparse.ArgumentParser(prog="python -m recipe.plan", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sizes", help="the settings of each size class")
    p = sub.add_parser("settings", help="the settings that fit the corpora, as shell assignments (AUTO_*)")
    p.add_argument("--train", nargs="+", required=True, help="PREFIX (PREFIX.SRC and PREFIX.TGT) or a .tsv file, each")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--valid", nargs="*", default=[])
    p.add_argument("--test", nargs="*", default=[])
    p.add_argument("--max-update", default="", help="the budget in updates (empty: a full run of the size class)")
    p.add_argument("--time", default="", help="the budget in time (90m, 8h): updates at this machine's speed")
    p.add_argument("--gpus", type=int, default=0, help="the training's layout, for the speed probe: GPUs per machine")
    p.add_argument("--cpu-workers", type=int, default=1, help="CPU processes per machine (with --gpus 0)")
    p.add_argument("--devices", type=int, default=0, help="devices in all (0: this machine's)")
    p.add_argument("--precision", default="fp32")
    p.add_argument(
        "--max-tokens-per-device", type=int, default=4096, help="a GPU's micro-batch (fairseq's --max-tokens)"
    )
    p.add_argument("--min-pairs", type=int, default=0, help="fewer training lines are refused, before any probe")
    p.add_argument(
        "--keep",
        default="",
        help="a file that keeps what TIME picked, read back while TIME, the corpus's "
        "size and the layout are the same (the recipe's WORK/settings.json): a resumed run trains the same",
    )
    p.add_argument("--plan", default="", help="where to write the plan as JSON (the recipe's WORK/plan.json)")
    args = parser.parse_args(argv)
    if args.command == "sizes":
        print(sizes_table())
        return 0
    try:
        return print_settings(args)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def print_settings(args) -> int:
    if args.max_update and not args.max_update.isdigit():
        raise CorpusError(f"MAX_UPDATE={args.max_update}: a number of updates")
    speed = None
    if args.time:
        from recipe.speed_probe import ProbeError, cuda_here, layout_probe, no_cuda, seconds_per_update

        if args.gpus > 0 and not cuda_here():
            raise CorpusError(str(no_cuda(args.time)))

        def speed(candidate, vocab_size: int) -> float:
            probe = layout_probe(
                candidate.arch,
                candidate.model_flags,
                vocab_size,
                candidate.tokens_per_update,
                args.gpus,
                args.cpu_workers,
                args.devices,
                args.precision,
                args.max_tokens_per_device,
            )
            try:
                return float(seconds_per_update(probe)["seconds"])
            except ProbeError as e:
                raise CorpusError(str(e)) from None

    max_update = int(args.max_update) if args.max_update else None
    found = key = None
    if args.time and args.keep:  # what this TIME picked before, on these corpora and this layout
        lines = sum(count_lines(c.tsv or c.source) for c in (find_corpus(t, args.src, args.tgt) for t in args.train))
        key = {
            "time": args.time,
            "train": [os.path.abspath(t) for t in args.train],
            "lines": lines,
            "gpus": args.gpus,
            "cpu_workers": args.cpu_workers,
            "devices": args.devices,
            "precision": args.precision,
        }
        found = kept_settings(args.keep, key)
    decided = found is None
    if decided:
        found = settings(args.train, args.src, args.tgt, max_update, args.time, speed, args.valid, args.min_pairs)
    for path in filter(None, (args.keep, args.plan)):  # decided: only now is anything written
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if decided and key is not None:
        write_json(args.keep, {"key": key, "settings": asdict(found), "decided": time.strftime("%Y-%m-%d %H:%M")})
    if args.plan:
        write_json(
            args.plan,
            {"settings": {k: v for k, v in asdict(found).items() if k not in ("plan", "explain")}, **found.plan},
        )
    for name, value in vars(found).items():
        if name == "plan":
            continue
        value = int(value) if isinstance(value, bool) else value
        if "\n" in str(value):  # one line each (bash's $'...'), for readers of lines
            print(
                f"AUTO_{name.upper()}=$'"
                + str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
                + "'"
            )
        else:
            print(f"AUTO_{name.upper()}={shlex.quote(str(value))}")
    # every file the corpora are read from: the recipe's first stage declares them (an edit redoes it)
    files = [f for spec in (*args.train, *args.valid, *args.test) for f in find_corpus(spec, args.src, args.tgt).files]
    print(f"AUTO_INPUT_FILES=({' '.join(shlex.quote(f) for f in files)})")
    return 0


if __name__ == "__main__":
    sys.exit(command_line())
