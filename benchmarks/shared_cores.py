"""Two CPU trainings side by side on this machine's cores, as two recipes with CPU_WORKERS=1 each run them: each run's
seconds an update when each is pinned to a core of its own (the most two runs can get), when they share the cores
(transformer_plugin/patches/shared_cores.py: the second started a few seconds after the first, as a user starts a
second experiment), and as fairseq runs them without it (each with a torch thread on every core).

    python -m benchmarks.shared_cores [--updates 60] [--out DIR]

Prints a table of each run's seconds an update (from fairseq's logged wall clock, past its first interval) and each
way's speed against the pinned one's; the issue's goal is 90% or more for the shared runs.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

from benchmarks.common import BIN, PLUGIN, REPO, print_table

MODEL = "--encoder-layers 2 --decoder-layers 2 --d-model 256 --d-ff 1024 --attention-heads 4".split()
LATER = 5.0  # seconds between the two runs' starts
WAYS = ("pinned", "shared", "fairseq")


def data_bin(work: str) -> str:
    """A synthetic corpus of 3,000 pairs, binarized with a joined dictionary."""
    text, out = os.path.join(work, "text"), os.path.join(work, "bin")
    if not os.path.exists(out):
        subprocess.run(
            [sys.executable, "-m", "preprocess.synthetic_pair", "--out-dir", text, "--train", "3000"]
            + ["--valid", "100", "--test", "100"],
            check=True,
            cwd=REPO,
        )
        subprocess.run(
            [os.path.join(BIN, "fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt"]
            + ["--trainpref", f"{text}/train", "--validpref", f"{text}/valid", "--destdir", out]
            + ["--joined-dictionary", "--workers", "1"],
            check=True,
            capture_output=True,
        )
    return out


def command(data: str, save_dir: str, updates: int) -> List[str]:
    return [
        os.path.join(BIN, "fairseq-train"),
        data,
        "--user-dir",
        PLUGIN,
        "--arch",
        "vaswani_base",
        *MODEL,
        "--share-all-embeddings",
        "--cpu",
        "--max-tokens",
        "2048",
        "--max-update",
        str(updates),
        "--optimizer",
        "adam",
        "--lr",
        "5e-4",
        "--lr-scheduler",
        "inverse_sqrt",
        "--warmup-updates",
        "100",
        "--criterion",
        "label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
        "--disable-validation",
        "--no-save",
        "--log-format",
        "json",
        "--log-interval",
        "10",
        "--num-workers",
        "0",
        "--save-dir",
        save_dir,
    ]


def seconds_an_update(log: str) -> float:
    """From fairseq's train_inner records: wall clock over updates, past the first interval."""
    points = [
        (int(r["num_updates"]), float(r["wall"]))
        for r in (json.loads(x.split("| ", 3)[-1]) for x in log.splitlines() if "train_inner" in x and "{" in x)
    ]
    (u0, w0), (u1, w1) = points[0], points[-1]
    return (w1 - w0) / (u1 - u0)


def side_by_side(data: str, work: str, updates: int, way: str) -> List[float]:
    cores = sorted(os.sched_getaffinity(0))[:2]
    procs = []
    for i in range(2):
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        argv = command(data, os.path.join(work, f"{way}{i}"), updates)
        if way == "pinned":
            env["OMP_NUM_THREADS"] = "1"
            argv = ["taskset", "-c", str(cores[i]), *argv]
        elif way == "shared":
            env["TRANSFORMER_PLUGIN_SHARE_CORES"] = "1"
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        time.sleep(LATER)
    outputs = [p.communicate()[0] for p in procs]
    for p, out in zip(procs, outputs):
        if p.returncode != 0:
            raise RuntimeError(out[-3000:])
    return [seconds_an_update(out) for out in outputs]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shared_cores", description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--out", default="", help="where the data and the runs go (default: a temporary directory)")
    parser.add_argument("--ways", nargs="+", default=["pinned", "shared", "fairseq"], choices=WAYS)
    args = parser.parse_args(argv)
    if len(os.sched_getaffinity(0)) < 2:
        print("two cores are needed", file=sys.stderr)
        return 2
    work = args.out or tempfile.mkdtemp(prefix="shared_cores.")
    data = data_bin(work)
    found: Dict[str, List[float]] = {way: side_by_side(data, work, args.updates, way) for way in args.ways}
    rows = ["| runs | first run, s an update | second | speed against pinned (first, second) |", "|---|---|---|---|"]
    for way, (a, b) in found.items():
        pa, pb = found.get("pinned", (0.0, 0.0))
        rows.append(f"| {way} | {a:.3f} | {b:.3f} | {pa / a:.0%}, {pb / b:.0%} |")
    print_table("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
