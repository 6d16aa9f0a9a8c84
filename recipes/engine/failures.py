"""Why a stage failed, in words: what stopped a launcher (torchrun, srun, fairseq-train), read from its output,
and a process's exit status as the shell would give it."""

import re
from typing import Dict, List, Tuple


class StageFailed(Exception):
    def __init__(self, status: int, message: str = ""):
        super().__init__(message)
        self.status, self.message = status, message


def exit_status(returncode: int) -> int:
    """A child's status as the shell reports it: its exit code, or 128 + N when signal N ended it."""
    return returncode if returncode >= 0 else 128 - returncode


PEER = r"\[([0-9A-Fa-f.:]+)\]"
# What stopped a launcher (torchrun, srun, fairseq-train), read from its output: the first that applies.
# Each: a name, a pattern over the output, and the message, formatted with the pattern's groups ({0}: the
# first) and the layout (MASTER_ADDR, MASTER_PORT, DIST_TIMEOUT, NNODES, LAST_NODE). A task that srun saw
# die by a signal of its own (Killed, Segmentation fault, Out Of Memory) comes first, whatever its peers
# printed before srun ended them: their lost connection is only its consequence.
FAILURES: List[Tuple[str, str, str]] = [
    (
        "a task died",
        r"^srun: error: (.*task [0-9]+: (?!Terminated|Exited with exit code).*)$",
        "a task failed ({0}), and srun ended the others",
    ),
    (
        "a peer lost",
        rf"{PEER}:[0-9]+:? Connection (?:reset|closed) by peer|Connection closed by peer {PEER}:[0-9]+",
        "the connection to the worker at {0} was lost (it died, or its machine did: see that machine's log)",
    ),
    (
        "rendezvous incomplete",
        r"waiting for clients",
        "not every machine joined torchrun's rendezvous at {MASTER_ADDR}:{MASTER_PORT} within "
        "DIST_TIMEOUT={DIST_TIMEOUT} s "
        "(start the recipe on every machine, NODE_RANK=0 to {LAST_NODE})",
    ),
    (
        "no rendezvous",
        r"failed to connect to any network address|client socket has timed out",
        "node 0's rendezvous at {MASTER_ADDR}:{MASTER_PORT} did not answer within DIST_TIMEOUT={DIST_TIMEOUT} s "
        "(is the recipe running there with NODE_RANK=0, and is MASTER_ADDR its address?)",
    ),
    (
        "silence",
        r"Timed out waiting [0-9]+ms|Killing job for not making progress",
        "no word from the other machines for DIST_TIMEOUT={DIST_TIMEOUT} s: a machine or the network between them "
        "was lost (or one worker spent longer than that alone, writing a checkpoint: raise DIST_TIMEOUT)",
    ),
    ("a task failed", r"^srun: error: (.*task [0-9]+: .*)$", "a task failed ({0}), and srun ended the others"),
    (
        "a local process failed",
        r"(exitcode +: -?[0-9]+(?: \(pid: [0-9]+\))?(?: \(SIG[A-Z]+\))?)",
        "a training process on this machine failed ({0})",
    ),
]


def training_failure(output: str, layout_vars: Dict[str, str]) -> str:
    """What stopped a launcher, from its output (FAILURES), or 'fairseq-train failed'."""
    names = dict(layout_vars)
    names.setdefault("LAST_NODE", str(int(names.get("NNODES", "1") or 1) - 1))
    for _, pattern, message in FAILURES:
        m = re.search(pattern, output, flags=re.M)
        if m:
            groups = [" ".join(g.split()) if g else g for g in m.groups() if g is not None]
            return message.format(*groups, **names)
    return "fairseq-train failed"
