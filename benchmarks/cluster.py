"""Two hosts against one at the same world size: fairseq-train's updates per second under torchrun.

    python -m benchmarks.cluster --work runs/cluster --rounds 3 --out runs/cluster/cluster.md

``make bench-cluster`` runs this (root and ``ip netns``, as ``make test-cluster``). It prepares the En-De
recipe's toy data (``TOY=1 DATA_ONLY=1``), then trains ``vaswani_tiny`` with world size 2, the recipe's
toy batch (1,500 tokens per process) and seed, in alternating rounds:

- one host: ``torchrun --nproc-per-node 2``, gloo over loopback;
- two hosts made here (tests/cluster/machines.py: network namespaces joined by a veth pair), one process
  each, gloo over the veth, as docs/several-machines.md's torchrun lines run them.

Each process has one torch thread (OMP_NUM_THREADS=1). Updates per second are fairseq's own (the
``ups`` of its ``train_inner`` lines), after the first 50 updates. This machine's two cores are shared
by both layouts: the ratio is the overhead of the network path and of a second torchrun agent, not a
speed-up from a second machine.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "cluster"))

from benchmarks.common import BIN, PLUGIN, print_table  # noqa: E402
from machines import Network, free_port_on, missing  # noqa: E402
from transformer_plugin_cli.paper import training_flags  # noqa: E402


def prepare(work):
    env = dict(os.environ, TOY="1", DATA_ONLY="1", IGNORE_PINNED_MD5="1", WORK=work)
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    subprocess.run(["bash", "recipes/wmt14_en_de_base.sh"], cwd=REPO, env=env, check=True, capture_output=True)
    return os.path.join(work, "data-bin")


def train_command(data_bin, nnodes, nproc, rank, master, port, updates):
    return [
        f"{BIN}/torchrun",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        str(nproc),
        "--node-rank",
        str(rank),
        "--master-addr",
        master,
        "--master-port",
        str(port),
        "--rdzv-conf",
        "timeout=120",
        f"{BIN}/fairseq-train",
        data_bin,
        "--user-dir",
        PLUGIN,
        "--arch",
        "vaswani_tiny",
        "--share-all-embeddings",
        *training_flags(warmup_updates=50),
        "--max-tokens",
        "1500",
        "--max-update",
        str(updates),
        "--seed",
        "1",
        "--no-save",
        "--disable-validation",
        "--log-format",
        "json",
        "--log-interval",
        "10",
        "--num-workers",
        "0",
        "--cpu",
        "--distributed-backend",
        "gloo",
        "--ddp-backend",
        "legacy_ddp",
        "--distributed-world-size",
        "2",
    ]


def updates_per_second(output, after=50):
    """fairseq's ups of every logged interval after the first `after` updates."""
    ups = []
    for line in output.splitlines():
        if "| train_inner |" in line:
            stats = json.loads(line.split("| train_inner |", 1)[1])
            if int(stats["num_updates"]) > after:
                ups.append(float(stats["ups"]))
    return ups


def run(network, layout, data_bin, updates, directory):
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="eth0")
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    hosts = network.hosts[:1] if layout == "one host" else network.hosts
    port = free_port_on(hosts[0])
    master = "127.0.0.1" if layout == "one host" else hosts[0].name
    procs = []
    for rank, host in enumerate(hosts):
        out = os.path.join(directory, f"{layout.replace(' ', '-')}.{rank}.out")
        command = train_command(data_bin, len(hosts), 2 // len(hosts), rank, master, port, updates)
        procs.append((host.start(command, env, out), out))
    for proc, out in procs:
        if proc.wait(timeout=1800) != 0:
            raise RuntimeError(f"{layout}: training failed, see {out}")
    with open(procs[0][1]) as f:
        return updates_per_second(f.read())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="runs/cluster")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--out", help="also write the table (markdown) here")
    a = parser.parse_args()
    lacks = missing()
    if lacks:
        sys.exit("this benchmark needs " + ", ".join(lacks))
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    data_bin = prepare(work)
    medians = {"one host": [], "two hosts": []}
    with tempfile.TemporaryDirectory() as directory:
        network = Network(directory)
        try:
            for i in range(a.rounds):
                order = ["one host", "two hosts"] if i % 2 == 0 else ["two hosts", "one host"]
                for layout in order:
                    medians[layout].append(statistics.median(run(network, layout, data_bin, a.updates, work)))
                    print(f"round {i + 1}, {layout}: {medians[layout][-1]:.2f} updates/s", flush=True)
        finally:
            network.close()
    ratios = [two / one for one, two in zip(medians["one host"], medians["two hosts"])]
    rows = ["| layout (world size 2) | updates/s per round (median of fairseq's ups) | median |", "|---|---|---|"]
    for layout, values in medians.items():
        rows.append(f"| {layout} | {', '.join(f'{v:.2f}' for v in values)} | {statistics.median(values):.2f} |")
    rows.append(
        f"\ntwo hosts / one host: {statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)}); "
        f"{a.updates} updates of vaswani_tiny per run, 1 thread per process, this machine's {os.cpu_count()} cores "
        "shared"
    )
    print_table("\n".join(rows), a.out)


if __name__ == "__main__":
    main()
