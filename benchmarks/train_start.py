"""What fairseq-train with the plugin costs before its first update at WMT14's sizes: time from the command
to the first update, and the peak memory of all its processes on the host, with 1 and 2 data-parallel
processes (each holds its own copy of the dataset's index arrays).

The data-bin is written directly in fairseq's mmap format (``MMIDIDX``: an ``.idx`` of int32 sizes and int64
byte offsets, a ``.bin`` of uint16 token ids), ``--pairs`` sentence pairs with a joined dictionary of
``--vocab`` entries. Lengths in pieces (end of sentence included) are log-normal with a mean of 30 and a
spread like the recipe's binarized text (``benchmarks/data.py``: 29.7 pieces a sentence with BPE 37k);
token ids are uniform. Nothing in fairseq's start reads the ids, only the sizes, so this is enough.

    python -m benchmarks.train_start --pairs 4500000 36000000 --work runs/bench-train-start \
        --out runs/bench-train-start/table.md

For each size and process count: seconds to the first update, seconds to each milestone of fairseq's log
(data loaded, batches made), the peak PSS of the process tree (the trainers and their data-loader workers),
the disk the data-bin takes. The command is the recipe's stage 4 on CPU workers (``vaswani_base``,
``--max-tokens 3125``, 2 workers: ``--distributed-world-size 2``, gloo), stopped after 2 updates,
without validation or checkpoints.
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from typing import Dict, List, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import BIN, PLUGIN, print_table  # noqa: E402
from benchmarks.process_memory import TreeMemory  # noqa: E402
from recipes.planner.layout import free_port, worker_commands  # noqa: E402

MAGIC = b"MMIDIDX\x00\x00"
UINT16 = 8  # fairseq's dtype code for numpy.uint16
MEAN_PIECES, SIGMA = 30.0, 0.55


def write_split(prefix: str, pairs: int, vocab: int, rng, chunk: int = 2_000_000) -> None:
    """``prefix``.{bin,idx} for one side: ``pairs`` sentences of log-normal length, uniform ids."""
    import numpy as np

    mu = np.log(MEAN_PIECES) - SIGMA**2 / 2
    sizes = np.clip(np.rint(rng.lognormal(mu, SIGMA, pairs)), 2, 1022).astype(np.int32)
    with open(prefix + ".bin.tmp", "wb") as f:
        for start in range(0, pairs, chunk):
            n = int(sizes[start : start + chunk].sum())
            f.write(rng.integers(4, vocab, n, dtype=np.uint16).tobytes())
    pointers = np.zeros(pairs, dtype=np.int64)
    np.cumsum(sizes[:-1].astype(np.int64) * 2, out=pointers[1:])
    with open(prefix + ".idx.tmp", "wb") as f:
        f.write(MAGIC + struct.pack("<Q", 1) + struct.pack("<B", UINT16) + struct.pack("<Q", pairs))
        f.write(sizes.tobytes())
        f.write(pointers.tobytes())
    for ext in (".bin", ".idx"):
        os.replace(prefix + ext + ".tmp", prefix + ext)


def write_data_bin(out: str, pairs: int, vocab: int = 32_000, src: str = "en", tgt: str = "fr", seed: int = 1) -> None:
    import numpy as np

    done = os.path.join(out, "made.json")
    settings = {
        "pairs": pairs,
        "vocab": vocab,
        "src": src,
        "tgt": tgt,
        "seed": seed,
        "mean": MEAN_PIECES,
        "sigma": SIGMA,
    }
    if os.path.exists(done) and json.load(open(done)) == settings:
        return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = np.random.default_rng(seed)
    for lang in (src, tgt):
        with open(os.path.join(out, f"dict.{lang}.txt"), "w") as f:
            f.writelines(f"w{i} {vocab - i}\n" for i in range(vocab - 4))
        write_split(os.path.join(out, f"train.{src}-{tgt}.{lang}"), pairs, vocab, rng)
        write_split(os.path.join(out, f"valid.{src}-{tgt}.{lang}"), 3000, vocab, rng)
    with open(done, "w") as f:
        json.dump(settings, f)


MILESTONES = {
    "data loaded": re.compile(r"loaded [\d,]+ examples from: .*train\."),
    "batches made": re.compile(r"begin training epoch 1\b"),
    "first update": re.compile(r"\| train_inner \|"),
}


def measure(data_bin: str, processes: int, log_path: str, extra_args: Sequence[str] = ()) -> Dict:
    """fairseq-train on ``data_bin`` with ``processes`` CPU workers, to 2 updates."""
    common = [
        f"{BIN}/fairseq-train",
        data_bin,
        "--user-dir",
        PLUGIN,
        "--arch",
        "vaswani_base",
        "--share-all-embeddings",
        "--optimizer",
        "adam",
        "--adam-betas",
        "(0.9, 0.98)",
        "--lr-scheduler",
        "vaswani_inverse_sqrt",
        "--criterion",
        "vaswani_label_smoothed_cross_entropy",
        "--max-tokens",
        "3125",
        "--max-update",
        "2",
        "--disable-validation",
        "--no-save",
        "--log-format",
        "json",
        "--log-interval",
        "1",
        "--seed",
        "1",
        *extra_args,
    ]
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.monotonic()
    seen: Dict[str, float] = {}
    with open(log_path, "w") as log:
        procs = []
        for rank, command in enumerate(worker_commands(processes, common, str(port)) if processes > 1 else [common]):
            procs.append(
                subprocess.Popen(
                    command,
                    env=env,
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                    text=True,
                    cwd=REPO,
                )
            )
        memory = TreeMemory(os.getpid())
        memory.start()
        before_training = before_training_anon = 0
        for line in procs[0].stdout:
            log.write(line)
            for name, pattern in MILESTONES.items():
                if name not in seen and pattern.search(line):
                    seen[name] = time.monotonic() - start
                    if name == "batches made":  # the dataset, its index and batches, the model
                        before_training, before_training_anon = memory.take(), memory.take(anon=True)
        codes = [p.wait() for p in procs]
        memory.stopped.set()
        memory.join()
    if any(codes):
        raise RuntimeError(f"fairseq-train exited {codes}; its log: {log_path}")
    return {
        "processes": processes,
        "seconds": seen,
        "total_seconds": time.monotonic() - start,
        "peak_before_training_bytes": before_training,
        "peak_bytes": max(before_training, memory.take()),
        "anon_peak_before_training_bytes": before_training_anon,
        "anon_peak_bytes": max(before_training_anon, memory.take(anon=True)),
    }


def disk_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, nargs="+", default=[4_500_000, 36_000_000])
    p.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    p.add_argument("--work", default="runs/bench-train-start")
    p.add_argument("--keep", action="store_true", help="keep the data-bins (several GB)")
    p.add_argument("--train-args", default="", help="more fairseq-train flags, e.g. '--num-workers 0' (word-split)")
    p.add_argument("--out")
    a = p.parse_args(argv)
    rows: List[Dict] = []
    for pairs in a.pairs:
        data_bin = os.path.join(a.work, f"data-bin-{pairs}")
        t = time.monotonic()
        write_data_bin(data_bin, pairs)
        made = time.monotonic() - t
        for n in a.processes:
            r = measure(data_bin, n, os.path.join(a.work, f"train-{pairs}-{n}.log"), a.train_args.split())
            r.update(train_args=a.train_args, pairs=pairs, disk_bytes=disk_bytes(data_bin), write_seconds=made)
            rows.append(r)
            print(json.dumps(r), flush=True)
        if not a.keep:
            shutil.rmtree(data_bin)
    lines = [
        "fairseq-train with the plugin on a data-bin of WMT14 size: its start, on CPU workers",
        "",
        "| pairs | data-bin GB | processes | data loaded s | batches made s | first update s | peak MB before training"
        " (anonymous) | peak MB to update 2 (anonymous) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["seconds"]
        at = {k: f"{s[k]:.0f}" if k in s else "-" for k in MILESTONES}
        lines.append(
            f"| {r['pairs']:,} | {r['disk_bytes'] / 1e9:.1f} | {r['processes']} | {at['data loaded']} | "
            f"{at['batches made']} "
            f"| {at['first update']} | {r['peak_before_training_bytes'] / 1e6:,.0f} "
            f"({r['anon_peak_before_training_bytes'] / 1e6:,.0f})"
            f" | {r['peak_bytes'] / 1e6:,.0f} ({r['anon_peak_bytes'] / 1e6:,.0f}) |"
        )
    print_table("\n".join(lines), a.out)
    if a.out:
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
