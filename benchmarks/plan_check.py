"""A TIME's plan against the training it gave: the updates and seconds the parallel-text recipe planned beside those
fairseq-train trained and took, read from finished runs.

The recipe turns ``TIME=`` into updates at a measured speed (its own probe of this machine, or a ``SPEED_FILE=``
written by ``vaswani-speed-probe file`` where training runs) and writes the decision to ``WORK/plan.json``;
fairseq's ``--stop-time-hours`` ends training at TIME whatever was planned. For each ``WORK`` this puts side by side:

- the updates planned (``budget.max_update``) and those trained (the last ``num_updates`` in ``WORK/train.log``);
- the seconds an update planned and fairseq-train's own, its logged intervals after the first (start-up, warm-up);
- the training time planned (what TIME counts: the updates, the validations) and fairseq's clock at its last update;
- whether the time stop ended the run (a plan that was too fast for this machine) and what the plan's speed rested on.

    python -m benchmarks.plan_check runs/plan-2m --out plan_check.md

The GPU session's ``plan`` phase runs it after ``TIME=2m`` planned with a speed file written on that GPU
(benchmarks/gpu_session.sh).
"""

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import print_table  # noqa: E402
from benchmarks.time_check import fairseq_speed  # noqa: E402
from transformer_plugin_cli.fairseq_output import log_records  # noqa: E402

# what fairseq_cli.train logs when --stop-time-hours ends the run
TIME_STOP = "Stopping training due to cumulative_training_time"


def check(work: str) -> Dict[str, object]:
    """The plan of the run in ``work`` and what its training did (module docstring)."""
    try:
        with open(os.path.join(work, "plan.json"), encoding="utf-8") as f:
            budget = json.load(f)["budget"]
        with open(os.path.join(work, "train.log"), encoding="utf-8", errors="replace") as f:
            log = f.read()
    except FileNotFoundError as e:
        raise SystemExit(
            f"{e.filename}: no such file (a finished run of recipes/parallel_text.sh with TIME=)"
        ) from None
    if not budget.get("time"):
        raise SystemExit(f"{work}/plan.json: not planned for a TIME (budget: {budget.get('max_update')} updates)")
    try:
        trained = fairseq_speed(os.path.join(work, "train.log"))  # seconds an update after the first interval, clock
    except RuntimeError as e:
        raise SystemExit(f"{e} (a longer TIME)") from None
    ended = [int(r["num_updates"]) for r in log_records(log, "train") if "num_updates" in r]
    planned = int(budget["max_update"])
    return {
        "work": work,
        "time": budget["time"],
        "planned_updates": planned,
        "trained_updates": max([trained["updates"], *ended]),
        "planned_seconds_per_update": float(budget["seconds_per_update"]),
        "seconds_per_update": trained["seconds"],
        "planned_seconds": float(budget["training_seconds"]),
        "clock": trained["clock"],
        "stopped_by_time": TIME_STOP in log,
        "speed_from": budget.get("training_time", ""),
    }


def table(rows: Sequence[Dict[str, object]]) -> str:
    lines = [
        "| WORK | TIME | updates planned | trained | s an update planned | fairseq-train's | training s planned | "
        "fairseq's clock | trained / planned | ended by |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['work']} | {r['time']} | {r['planned_updates']:,} | {r['trained_updates']:,} | "
            f"{r['planned_seconds_per_update']:.4f} | {r['seconds_per_update']:.4f} | {r['planned_seconds']:.0f} | "
            f"{r['clock']:.0f} | {r['trained_updates'] / max(1, r['planned_updates']):.2f} | "
            f"{'the time (--stop-time-hours)' if r['stopped_by_time'] else 'the updates planned'} |"
        )
    lines += ["", *(f"- {r['work']}: {r['speed_from']}" for r in rows if r["speed_from"])]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.plan_check", description=__doc__.split("\n\n")[0])
    p.add_argument("works", nargs="+", help="the recipes' WORK folders, each a finished run with TIME=")
    p.add_argument("--out", help="write the table here (markdown)")
    a = p.parse_args(argv)
    print_table(table([check(w) for w in a.works]), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
