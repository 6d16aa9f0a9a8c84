"""The cluster tier (``make test-cluster``): the multi-machine commands of docs/several-machines.md at toy
size on two hosts made on this machine (network namespaces, tests/cluster/machines.py) and on a SLURM
cluster of those hosts. Skipped, naming what is missing, without root, ``ip netns``, slurm-wlm or munge.

The session shares one WORK, prepared as the documented torchrun lines prepare it (node 1 waiting for
node 0's data), and one reference: the same toy training on one host with the same world size (two
gloo workers), whose parameters every multi-machine run, interrupted or not, must end with."""

import os
import re
import shlex
import subprocess
import sys
import time

import pytest
import torch
from helpers import copy_repository, documented_commands
from machines import Network, Slurm, missing, wait_for

from transformer_plugin.patches.checkpoint_allowlist import load_checked

# The toy size every run of the tier uses: the same data, batches, seed and updates, so that every run
# ends with the reference's parameters. A checkpoint every 10 updates, 100 updates (about 10 s of training).
TOY = dict(TOY="1", IGNORE_PINNED_MD5="1", TOY_MAX_UPDATE="100", TOY_WARMUP="50", TOY_SAVE_INTERVAL_UPDATES="10",
           TOY_AVERAGE_LAST="2", OMP_NUM_THREADS="1")  # fmt: skip
RECIPE_VARIABLES = ("WORK", "TOY", "GPUS", "LAUNCH", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
                    "CPU_WORKERS", "DIST_TIMEOUT", "DATA_ONLY", "CONFIG", "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS")  # fmt: skip


def documented_command(*needles):
    """The one command of the README and docs pages (tests/helpers.py: documented_commands) that holds
    every needle: its words."""
    found = [line for _, line in documented_commands() if all(n in line for n in needles)]
    assert len(found) == 1, f"the documentation should hold one command with {needles}, holds {found}"
    return shlex.split(found[0])


def split_assignments(words):
    """VAR=value words before the command, and the command."""
    i = 0
    while i < len(words) and re.match(r"^[A-Z_][A-Z0-9_]*=", words[i]):
        i += 1
    return dict(w.split("=", 1) for w in words[:i]), words[i:]


def user_env(variables) -> dict:
    """The environment of a user who ran ``make`` and typed the line: the project's .venv first on PATH,
    none of the recipe variables but those given."""
    env = {k: v for k, v in os.environ.items() if k not in RECIPE_VARIABLES and not k.startswith("TOY_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    env.update(variables)
    return env


def updates_in(log_path) -> int:
    """The last update fairseq-train logged in log_path (0 before any)."""
    try:
        with open(log_path, errors="replace") as f:
            found = re.findall(r'"num_updates": "(\d+)"', f.read())
    except FileNotFoundError:
        return 0
    return int(found[-1]) if found else 0


def parameters(path):
    return load_checked(str(path))["model"]


def assert_same_parameters(checkpoint, reference):
    ours = parameters(checkpoint)
    assert ours.keys() == reference.keys()
    different = [k for k in ours if not torch.equal(ours[k], reference[k])]
    assert not different, f"{checkpoint}: parameters differ from the one-host run's: {different[:5]}"


class Run:
    """A recipe started on a host: its process, its output file, when it started and ended."""

    def __init__(self, host, argv, env, out, cwd):
        self.out, self.started = out, time.monotonic()
        self.proc = host.start(argv, env, out, cwd=cwd)
        self.ended = None

    def wait(self, timeout=300) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            raise
        self.ended = self.ended or time.monotonic()
        return rc

    def poll(self):
        rc = self.proc.poll()
        if rc is not None and self.ended is None:
            self.ended = time.monotonic()
        return rc

    @property
    def output(self) -> str:
        with open(self.out, errors="replace") as f:
            return f.read()


@pytest.fixture(scope="session")
def network(tmp_path_factory):
    lacks = missing()
    if lacks:
        pytest.skip("the cluster tier needs " + ", ".join(lacks))
    net = Network(str(tmp_path_factory.mktemp("network")))
    yield net
    net.close()


@pytest.fixture(scope="session")
def clone(tmp_path_factory):
    """The repository as a user's clone has it, to run from."""
    return copy_repository(tmp_path_factory.mktemp("clone"))


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    """WORK on storage every host sees (this machine's file system)."""
    return tmp_path_factory.mktemp("shared") / "wmt14_en_de"


def torchrun_line(node_rank):
    """docs/several-machines.md's torchrun line for CPU workers on node node_rank: (its variables, the command)."""
    return split_assignments(documented_command("LAUNCH=torchrun", "GPUS=0", f"NODE_RANK={node_rank}"))


def start_torchrun_node(network, clone, work, node_rank, config, tmp_path, **variables):
    """Node node_rank's documented line at toy size on its host, with WORK, CONFIG and the given variables."""
    typed, command = torchrun_line(node_rank)
    env = user_env({**typed, **TOY, "WORK": str(work), "CONFIG": config, **variables})
    return Run(network.hosts[node_rank], command, env, str(tmp_path / f"{config}.node{node_rank}.out"), cwd=clone)


@pytest.fixture(scope="session")
def two_host_run(network, clone, work, tmp_path_factory):
    """The documented torchrun lines for CPU workers at toy size, node 1 started first (it waits for node 0's data)."""
    out = tmp_path_factory.mktemp("two_hosts")
    node1 = start_torchrun_node(network, clone, work, 1, "torchrun", out)
    wait_for(lambda: "waiting for node 0" in node1.output or node1.poll() is not None, 60, "node 1 waiting")
    node0 = start_torchrun_node(network, clone, work, 0, "torchrun", out)
    return {"node0": node0, "node1": node1, "rc0": node0.wait(), "rc1": node1.wait(), "out": out}


@pytest.fixture(scope="session")
def reference(two_host_run, clone, work, tmp_path_factory):
    """The parameters of the same toy training on one host with the same world size (2 gloo workers)."""
    env = user_env({**TOY, "WORK": str(work), "CONFIG": "reference", "CPU_WORKERS": "2"})
    proc = subprocess.run(["bash", "recipes/wmt14_en_de_base.sh"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 CPU workers ====" in proc.stdout
    return parameters(work / "reference" / "checkpoints" / "checkpoint_last.pt")


@pytest.fixture(scope="module")
def slurm(network, tmp_path_factory):
    """The cluster, for the tests of one module: its daemons are gone when the next module starts."""
    lacks = missing(slurm=True)
    if lacks:
        pytest.skip("the SLURM tests need " + ", ".join(lacks))
    cluster = Slurm(network, str(tmp_path_factory.mktemp("slurm")))
    yield cluster
    for job in cluster.client(["squeue", "-h", "-o", "%i"]).stdout.split():
        cluster.client(["scancel", job])
    cluster.close()
