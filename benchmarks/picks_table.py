"""The budget rule's picks by corpus, budget and machine, with what each rests on and when it ends: the table of
docs/budget-picks.md, written by ``python -m benchmarks.doc_tables``. The machines' speed comes from FLOPs
(benchmarks/flops_speed.py): one CPU core, one H100, 8 H100s in a machine, and 8 such machines; the corpora have 25
words a line. The plan is the one a dry run makes with SPEED_FILE of such a machine (recipes/planner/decide.py)."""

import functools
import os
import tempfile
from typing import List, Tuple

from benchmarks import flops_speed
from recipes.planner import decide
from recipes.planner.budget import rule
from recipes.planner.budget.corpus_tokens import PIECES_PER_WORD
from recipes.planner.budget.size_classes import Sized
from recipes.planner.model import Model
from recipes.planner.probe_arithmetic import parse_time
from recipes.planner.speeds import Speeds
from recipes.planner.variables import Variables
from transformer_plugin_cli.files import duration

CORPORA = (10_000, 100_000, 1_000_000, 4_500_000, 36_000_000)
BUDGETS = ("1h", "8h", "2d", "7d")
MACHINES = {"1 CPU core": (0, 1), "1 H100": (1, 1), "8 H100s": (8, 1), "64 H100s": (8, 8)}  # GPUS, NNODES
# ~80 GFLOP/s at any micro-batch: the budget runs' core (2 layers of 256 at 2,048 tokens, 1.07 s an update)
CPU_CORE = dict(peak_flops=2e11, mfu=0.4, host_seconds=0.0005, half_at=0)
VALID_TOKENS = 60_000


def write_speed_files(directory: str) -> None:
    """h100.json and cpu.json in ``directory``."""
    flops_speed.write(os.path.join(directory, "h100.json"))
    flops_speed.write(os.path.join(directory, "cpu.json"), device="cpu", **CPU_CORE)


def machine(directory: str, gpus: int, nodes: int = 1) -> Speeds:
    """The speed of ``gpus`` H100s on each of ``nodes`` machines (0: one CPU core), from write_speed_files's files."""
    if gpus == 0:
        v = {"SPEED_FILE": os.path.join(directory, "cpu.json"), "GPUS": "0", "PRECISION": "fp32"}
    else:
        v = {"SPEED_FILE": os.path.join(directory, "h100.json"), "GPUS": str(gpus), "PRECISION": "bf16"}
    return Speeds(Variables({"CPU_WORKERS": "1", "NNODES": str(nodes), **v}), 4096)


def plan(speeds: Speeds, pairs: int, time_text: str, words_a_pair: float = 25) -> Sized:
    """The budget rule's settings for a corpus of ``pairs`` and TIME=``time_text`` on ``speeds``' machines, with the
    notes a dry run adds (decide.fewer_devices)."""
    found = rule.settings_for(
        pairs,
        ("LATIN", "LATIN"),
        None,
        parse_time(time_text),
        time_text,
        speeds.of,
        VALID_TOKENS,
        pairs * words_a_pair * PIECES_PER_WORD,
        speeds.devices,
        speeds.cap,
        least_share=speeds.least_share,
    )
    found.valid_tokens = VALID_TOKENS
    found.notes += decide.fewer_devices(found, speeds, time_text)
    return found


def cell(found: Sized) -> str:
    pick = next(o for o in found.plan["options"] if o["picked"])
    m = Model.from_flags(found.arch, found.model_flags)
    model = {"vaswani_big": "big", "vaswani_base": "base"}[found.arch] if not found.model_flags else None
    model = model or f"{m.encoder_layers} x {m.d_model}" + (f", d_ff {m.d_ff}" if m.d_ff != 4 * m.d_model else "")
    ends = f", ends after {duration(pick['training_seconds'])}" if pick["limited"] else ""
    return (
        f"{model}, P_drop {found.dropout}, {found.tokens_per_update:,} x {found.max_update:,}: "
        f"{pick['predicted_valid_loss_bits']:.2f} bits, {pick['evidence']}{ends}"
    )


def picks_block(_found=None) -> List[str]:
    """The table: a row for each machine and corpus, a column for each TIME (planned once a process: with
    law.py as imported, whatever the fit passed)."""
    return list(_picks())


@functools.lru_cache(maxsize=1)
def _picks() -> Tuple[str, ...]:
    lines = [
        "| machine | pairs | " + " | ".join(f"TIME={b}" for b in BUDGETS) + " |",
        "|---|---|" + "---|" * len(BUDGETS),
    ]
    with tempfile.TemporaryDirectory() as directory:
        write_speed_files(directory)
        for name, (gpus, nodes) in MACHINES.items():
            speeds = machine(directory, gpus, nodes)
            for pairs in CORPORA:
                cells = [cell(plan(speeds, pairs, b)) for b in BUDGETS]
                lines.append(f"| {name} | {pairs:,} | " + " | ".join(cells) + " |")
    return tuple(lines)
