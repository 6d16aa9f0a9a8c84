"""vaswani-speed-probe: seconds an update of a model on this machine (``probe``), a budget's updates (``budget``), and
a speed file of every candidate model for a dry run elsewhere (``file``). The probe itself: :mod:`.probing`.

    vaswani-speed-probe probe --arch vaswani_base \\
        --model-flags "--encoder-layers 3 --decoder-layers 3 --d-model 256 --d-ff 1024 --attention-heads 4" \\
        --vocab-size 8000 --tokens-per-update 4096 --workers 2 --threads 1
"""

import argparse
import json
import shlex
import sys
from typing import List, Optional

from recipes.planner.budget.candidates import MODELS
from recipes.planner.probe_arithmetic import BudgetError
from recipes.planner.speed import machine, probe_cache
from recipes.planner.speed.probe_cache import CPU_PROBE_TOKENS
from recipes.planner.speed.probing import Probe, ProbeError, layout_probe, run_worker
from recipes.planner.speed.speed_file import BANDWIDTH_BETWEEN_GBS, BANDWIDTH_WITHIN_GBS, write_speed_file
from recipes.planner.speed.time_budget import budget
from transformer_plugin_cli.console import console_script


def arguments() -> argparse.ArgumentParser:
    """vaswani-speed-probe's command line: probe, budget and file, and the probe's own worker."""
    parser = argparse.ArgumentParser(prog="vaswani-speed-probe", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("probe", "budget"):
        p = sub.add_parser(
            name,
            help={
                "probe": "seconds per update of a model here",
                "budget": "the recipe's variables for TIME= or MAX_UPDATE=, for a training's layout",
            }[name],
        )
        p.add_argument("--arch", default="vaswani_base")
        p.add_argument("--model-flags", default="", help="the architecture's flags, as fairseq-train takes them")
        p.add_argument("--vocab-size", type=int, default=8000)
        p.add_argument("--tokens-per-update", type=int, default=4096)
        if name == "probe":
            p.add_argument(
                "--workers", type=int, default=1, help="CPU processes side by side (the recipes' CPU_WORKERS)"
            )
            p.add_argument("--threads", type=int, default=1, help="torch threads of each")
            p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
            p.add_argument("--length", type=int, default=30, help="pieces a sentence, both sides")
            p.add_argument(
                "--repeats", type=int, default=2, help="micro-batches and steps timed, after one not counted"
            )
            p.add_argument("--fresh", action="store_true", help="measure again, even if this was measured before")
        else:
            p.add_argument("--time", default="", help="TIME: 90m, 8h, 1h30m, 2d")
            p.add_argument(
                "--max-update", type=int, default=0, help="the budget in updates; with --time, at most that many"
            )
            p.add_argument(
                "--valid-tokens", type=int, default=0, help="target tokens of the dev set, validated at each checkpoint"
            )
            p.add_argument(
                "--save-interval-updates", type=int, default=0, help="updates between checkpoints (0: the recipe's own)"
            )
            p.add_argument("--gpus", type=int, default=0)
            p.add_argument("--cpu-workers", type=int, default=1)
            p.add_argument("--devices", type=int, default=0, help="devices in all, on every machine (0: this one's)")
            p.add_argument(
                "--max-tokens-per-device", type=int, default=4096, help="a GPU's micro-batch (fairseq's --max-tokens)"
            )
            p.add_argument(
                "--per-token",
                action="store_true",
                help=f"on CPU, the model's figure at {CPU_PROBE_TOKENS:,} tokens scaled per token, as the plan"
                " reads it",
            )
        p.add_argument(
            "--precision",
            choices=["fp32", "bf16", "fp16", "amp"],
            default="fp32",
            help="the recipes' PRECISION (amp: fairseq's --amp, autocast to fp16 on a CUDA device)",
        )
    file = sub.add_parser("file", help="a speed file of every candidate model, for a dry run elsewhere (SPEED_FILE=)")
    file.add_argument("--out", required=True, help="the speed file to write")
    file.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    file.add_argument("--precision", choices=["fp32", "bf16", "fp16", "amp"], default="bf16")
    file.add_argument("--max-tokens-per-device", type=int, default=4096, help="fairseq's --max-tokens")
    file.add_argument("--vocab-size", type=int, default=32000, help="the vocabulary the corpus will get")
    parent = "a parent INIT= will fine-tune (MarianMT, NLLB-200, M2M100, an import): timed too, at its vocabulary"
    file.add_argument("--parent", action="append", default=[], metavar="DIR", help=parent + " (repeatable)")
    file.add_argument(
        "--bandwidth-within-gbs", type=float, help=f"all-reduce GB/s within a machine ({BANDWIDTH_WITHIN_GBS:g})"
    )
    file.add_argument(
        "--bandwidth-between-gbs", type=float, help=f"all-reduce GB/s between machines ({BANDWIDTH_BETWEEN_GBS:g})"
    )
    worker = sub.add_parser("worker")
    worker.add_argument("spec")
    worker.add_argument("--rank", type=int, default=0)
    worker.add_argument("--port", type=int, default=0)
    return parser


@console_script
def main(argv: Optional[List[str]] = None) -> int:
    a = arguments().parse_args(argv)
    if a.command == "worker":
        print(f"{run_worker(Probe(**json.loads(a.spec)), a.rank, a.port):.6f}")
        return 0
    try:
        if a.command == "file":
            if a.device == "cuda" and not machine.cuda_here():
                raise BudgetError("file --device cuda: this machine has no CUDA device: run it where training will run")
            from recipes.planner.parent import parent_model

            parents = [("vaswani_base", *parent_model(init)) for init in a.parent]
            write_speed_file(
                a.out,
                [(arch, flags) for arch, flags, _ in MODELS] + parents,
                a.device,
                a.precision if a.device == "cuda" else "fp32",
                a.max_tokens_per_device,
                a.vocab_size,
                a.bandwidth_within_gbs,
                a.bandwidth_between_gbs,
            )
            print(f"wrote {a.out}: give it to a dry run anywhere as SPEED_FILE={a.out}")
            return 0
        if a.command == "budget":
            if not a.time and not a.max_update:
                raise BudgetError("budget: give --time or --max-update (or both: at most that many)")
            probe = layout_probe(
                a.arch,
                a.model_flags,
                a.vocab_size,
                a.tokens_per_update,
                a.gpus,
                a.cpu_workers,
                a.devices,
                a.precision,
                a.max_tokens_per_device,
            )
            for name, value in budget(
                probe,
                a.time,
                a.max_update,
                a.tokens_per_update,
                a.valid_tokens,
                a.save_interval_updates,
                speed=probe_cache.per_token if a.per_token else None,
            ).items():
                print(f"{name}={shlex.quote(value)}")
            return 0
        probe = Probe(
            a.arch,
            a.model_flags,
            a.vocab_size,
            a.tokens_per_update,
            a.workers,
            a.threads,
            a.device,
            a.precision,
            a.length,
            a.repeats,
        )
        found = probe_cache.seconds_per_update(probe, fresh=a.fresh)
    except (BudgetError, ProbeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{found['seconds']:.3f} s per update ({probe_cache.measured(found)}, kept in {probe_cache.cache_file()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
