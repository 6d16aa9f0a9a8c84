"""What the cluster tier's tests and fixtures share: the toy size, the documented commands as a user types
them, a recipe run on a host, and what a run leaves (its updates, its parameters)."""

import os
import re
import shlex
import subprocess
import time

import torch
from helpers import documented_commands, parameters
from helpers import user_env as a_users_env


# The toy size every run of the tier uses: the same data, batches, seed and updates, so that every run
# ends with the reference's parameters. A checkpoint every 10 updates, 100 updates (about 10 s of training).
TOY = dict(
    TOY="1",
    IGNORE_PINNED_MD5="1",
    TOY_MAX_UPDATE="100",
    TOY_WARMUP="50",
    TOY_SAVE_INTERVAL_UPDATES="10",
    TOY_AVERAGE_LAST="2",
    OMP_NUM_THREADS="1",
)


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
    """The environment of a user who ran ``make`` and typed the line (tests/helpers.py), with the given
    variables; OMP_NUM_THREADS only where given (TOY gives 1)."""
    env = a_users_env(**variables)
    if "OMP_NUM_THREADS" not in variables:
        env.pop("OMP_NUM_THREADS", None)
    return env


def updates_in(log_path) -> int:
    """The last update fairseq-train logged in log_path (0 before any)."""
    try:
        with open(log_path, errors="replace") as f:
            found = re.findall(r'"num_updates": "(\d+)"', f.read())
    except FileNotFoundError:
        return 0
    return int(found[-1]) if found else 0


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


def torchrun_line(node_rank):
    """docs/several-machines.md's torchrun line for CPU workers on node node_rank: (its variables, the command)."""
    return split_assignments(documented_command("LAUNCH=torchrun", "GPUS=0", f"NODE_RANK={node_rank}"))


def start_torchrun_node(network, clone, work, node_rank, config, tmp_path, **variables):
    """Node node_rank's documented line at toy size on its host, with WORK, CONFIG and the given variables."""
    typed, command = torchrun_line(node_rank)
    env = user_env({**typed, **TOY, "WORK": str(work), "CONFIG": config, **variables})
    return Run(network.hosts[node_rank], command, env, str(tmp_path / f"{config}.node{node_rank}.out"), cwd=clone)
