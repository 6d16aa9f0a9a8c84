"""TIME's plan against the run it gave, over the documented cases, on an idle core and on one loaded partway through.

Each case runs a recipe as a user types it, pinned to one core (``CPU_WORKERS=1``): training from nothing with TIME,
the same with the dev BLEU (``EVAL_BLEU=1``: a beam search over the dev set at each validation), and a fine-tuning
of 500 pairs (``INIT=``, the first case's model exported, ``EVAL_BLEU`` by default at that size). Each runs twice:
alone on its core, then with a process spinning on the same core from ``--busy-after`` seconds on (the plan made on
a quiet machine, the load arriving during training, as a second run started beside it). Beside each other:

- the updates planned (``WORK/plan.json``) and those trained (``WORK/train.log``), and whether the run re-planned
  (``time_budget.json``);
- the training time planned (what TIME counts, less the start it leaves) and fairseq's own ("done training in"),
  their ratio, and whether the training ended by TIME;
- the whole run's time planned (the plan's second ``time:`` line) and the recipe's wall time.

    python -m benchmarks.time_table --data /tmp/l10n/data --work /tmp/time-table --core 1 --out time_table.md

``--data``: a folder of ``{train,valid,test}.{en,de}`` (``python -m preprocess.debian_l10n prepare --out DIR``: real
English-German text, offline).
"""

import argparse
import json
import re
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import print_table, recipe_env, start_recipe  # noqa: E402
from benchmarks.plan_check import check  # noqa: E402
from recipes.planner.probe_arithmetic import TIME_STARTUP_SECONDS, parse_time  # noqa: E402
from transformer_plugin_cli.files import duration  # noqa: E402


@dataclass
class Case:
    name: str
    settings: Dict[str, str]
    pairs: Optional[int] = None  # the first pairs of the training text only (a small corpus), dev and test held out
    init: bool = False  # fine-tune the first case's model (its EXPORT=hf)
    rows: List[Dict] = field(default_factory=list)


CASES = [
    Case("from nothing", {"TIME": "5m"}),
    Case("from nothing, dev BLEU", {"TIME": "5m", "EVAL_BLEU": "1"}),
    Case("fine-tuning 500 pairs", {"TIME": "3m"}, pairs=900, init=True),
]


def corpus(data: str, work: str, pairs: Optional[int]) -> Dict[str, str]:
    """TRAIN (and VALID, TEST where the whole corpus is used) for the recipe."""
    if pairs is None:
        return {"TRAIN": f"{data}/train", "VALID": f"{data}/valid", "TEST": f"{data}/test"}
    os.makedirs(work, exist_ok=True)
    for side in ("en", "de"):
        with open(f"{data}/train.{side}", encoding="utf-8") as f, open(f"{work}/small.{side}", "w") as out:
            out.writelines(line for _, line in zip(range(pairs), f))
    return {"TRAIN": f"{work}/small"}


def run(case: Case, load: str, a, parent: Optional[str]) -> Dict:
    work = os.path.join(a.work, f"{case.name.replace(' ', '-').replace(',', '')}-{load}")
    shutil.rmtree(work, ignore_errors=True)
    settings = {**corpus(a.data, work + "-corpus", case.pairs), **case.settings}
    settings.update(SRC="en", TGT="de", CPU_WORKERS="1", GPUS="0", LANGID="0", WORK=work)
    if parent:
        settings["INIT"] = parent
    if case is CASES[0] and load == "idle":
        settings["EXPORT"] = "hf"  # the fine-tuning case's parent
    log = os.path.join(a.work, "runs.log")
    began = time.monotonic()
    proc = start_recipe(recipe_env(settings), log, f"{case.name}, {load}", core=a.core)
    busy = None
    if load == "busy":
        time.sleep(a.busy_after)
        if proc.poll() is None:
            busy = subprocess.Popen(
                [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {a.core})
            )
    rc = proc.wait()
    wall = time.monotonic() - began
    if busy is not None:
        busy.kill()
        busy.wait()
    if rc != 0:
        raise SystemExit(f"{case.name}, {load}: the recipe failed (exit {rc}): {log}")
    found = check(work)
    with open(os.path.join(work, "plan.json"), encoding="utf-8") as f:
        budget = json.load(f)["budget"]
    with open(os.path.join(work, "train.log"), encoding="utf-8", errors="replace") as f:
        done = re.findall(r"done training in ([\d.]+) seconds", f.read())
    replans_file = os.path.join(work, "checkpoints", "time_budget.json")
    replans = json.load(open(replans_file))["replans"] if os.path.exists(replans_file) else []
    return {
        **found,
        "case": case.name,
        "load": load,
        "replans": len(replans),
        "trained_seconds": float(done[-1]) if done else float("nan"),
        "whole_planned": float(budget.get("whole_run_seconds") or 0),
        "wall": wall,
        "deadline": parse_time(case.settings["TIME"]),
    }


def table(rows: List[Dict]) -> str:
    lines = [
        "| case | core | TIME | updates planned | trained | training planned | trained for | real / planned | "
        "ended by TIME | re-planned | whole run planned | real |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        planned = r["planned_seconds"] - TIME_STARTUP_SECONDS  # the start TIME leaves is not fairseq's training
        on_time = r["trained_seconds"] <= r["deadline"] - TIME_STARTUP_SECONDS + 15  # a last update's, validated
        lines.append(
            f"| {r['case']} | {r['load']} | {r['time']} | {r['planned_updates']:,} | {r['trained_updates']:,} | "
            f"{r['planned_seconds'] - TIME_STARTUP_SECONDS:.0f} s | {r['trained_seconds']:.0f} s | "
            f"{r['trained_seconds'] / planned:.2f} | {'yes' if on_time else 'no'} | {r['replans'] or 'no'} | "
            f"{duration(r['whole_planned'])} | {duration(r['wall'])} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.time_table", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="{train,valid,test}.{en,de}: python -m preprocess.debian_l10n")
    p.add_argument("--work", required=True)
    p.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    p.add_argument("--busy-after", type=float, default=90.0, help="seconds into a run that the load arrives")
    p.add_argument("--loads", nargs="+", default=["idle", "busy"], choices=["idle", "busy"])
    p.add_argument("--out", help="the table (markdown)")
    a = p.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    rows = []
    parent = None
    for load in a.loads:
        for case in CASES:
            if case.init and parent is None:
                parent = os.path.join(a.work, "from-nothing-idle", "hf")
                if not os.path.isdir(parent):
                    raise SystemExit(f"{parent}: no parent to fine-tune (the idle run of the first case makes it)")
            rows.append(run(case, load, a, parent if case.init else None))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print_table(table(rows), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
