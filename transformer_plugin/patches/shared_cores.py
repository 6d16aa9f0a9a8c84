"""Training processes on one machine share its cores: each pinned to an equal share, its torch threads as many.

fairseq-train on CPU runs as many torch threads as the machine has cores, whatever else trains there: two runs side by
side on 2 cores ran 4 threads and each took 2.8 to 3.7 times its time alone, where an equal share costs 2. With
``TRANSFORMER_PLUGIN_SHARE_CORES=1`` in its environment (the recipes set it for their CPU training processes, unless
OMP_NUM_THREADS is given), each training process registers in a file of this machine and user (REGISTRY), and every
process registered takes an equal, disjoint share of the cores it may use (:func:`shares`): pinned there
(``sched_setaffinity``), with as many torch threads. At its first update past CHECK_SECONDS since it last looked, it
reads the file again: a run that starts later takes its share, and those running give theirs up; a run that ends
leaves its cores to the others. Each change is logged ("cores: this process takes core 1 of 2, 1 torch thread").
A process that dies without leaving the file is dropped by the next one that reads it (its PID gone, or another
process's). Work other than these processes is not counted. Only fairseq-train on CPU is changed.
"""

import atexit
import contextlib
import fcntl
import json
import logging
import os
import sys
import tempfile
import time
from typing import Dict, List, Optional

from ._patching import replace

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"
ENV = "TRANSFORMER_PLUGIN_SHARE_CORES"
CHECK_SECONDS = 2.0
logger = logging.getLogger("cores")

_me: Dict = {}  # registry, cores this process may use, the share it took, when it last looked


def registry() -> str:
    return os.path.join(tempfile.gettempdir(), f"transformer_plugin-cores-{os.getuid()}.json")


def shares(pids: List[int], cores: List[int]) -> Dict[int, List[int]]:
    """Equal, disjoint shares of ``cores`` for ``pids`` in their order (the first ones one more where they do not
    divide); where there are more processes than cores, one core each, in turn."""
    if len(pids) >= len(cores):
        return {pid: [cores[i % len(cores)]] for i, pid in enumerate(pids)}
    each, extra = divmod(len(cores), len(pids))
    found, at = {}, 0
    for i, pid in enumerate(pids):
        n = each + (1 if i < extra else 0)
        found[pid] = cores[at : at + n]
        at += n
    return found


def _started(pid: int) -> Optional[str]:
    """The start time of process ``pid`` (field 22 of /proc/PID/stat), or None where it is not running: with its PID,
    what tells a process from a later one given the same PID."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@contextlib.contextmanager
def _locked(path: str):
    """The registry's entries ({pid: start}), under an exclusive lock, written back when the block ends; those of
    processes no longer running dropped."""
    with open(path + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                entries = {int(k): v for k, v in json.load(f).items()}
        except (OSError, ValueError):
            entries = {}
        entries = {pid: start for pid, start in entries.items() if _started(pid) == start}
        yield entries
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({str(k): v for k, v in entries.items()}, f)
        os.replace(tmp, path)


def register(path: str, pid: int) -> List[int]:
    """Add ``pid`` and return the processes registered, in order."""
    with _locked(path) as entries:
        entries[pid] = _started(pid)
        return sorted(entries)


def leave(path: str, pid: int) -> None:
    with contextlib.suppress(OSError):
        with _locked(path) as entries:
            entries.pop(pid, None)


def registered(path: str) -> List[int]:
    with _locked(path) as entries:
        return sorted(entries)


def take(cores: List[int], pids: List[int]) -> None:
    """Pin this process to its share of ``cores`` among ``pids``, with as many torch threads; say so when it changes."""
    import torch

    mine = shares(pids, cores)[os.getpid()]
    if mine == _me.get("share"):
        return
    os.sched_setaffinity(0, mine)
    torch.set_num_threads(len(mine))
    _me["share"] = mine
    named = f"core {mine[0]}" if len(mine) == 1 else f"cores {','.join(map(str, mine))}"
    logger.info(
        f"cores: this process takes {named} of {len(cores)}, {len(mine)} torch thread{'s' if len(mine) > 1 else ''} "
        f"({len(pids)} training process{'es' if len(pids) > 1 else ''} here share them)"
    )


def _sharing(original):
    def train_step(self, samples, *args, **kwargs):
        now = time.monotonic()
        if now - _me["looked"] >= CHECK_SECONDS:
            _me["looked"] = now
            try:
                pids = registered(_me["path"])
                if os.getpid() not in pids:  # the file removed (a temporary directory cleaned): in it again
                    pids = register(_me["path"], os.getpid())
                take(_me["cores"], pids)
            except OSError as e:  # a registry that cannot be read or written: the share taken stays
                logger.warning(f"cores: {_me['path']} cannot be used ({e.strerror or e}): the cores taken stay")
        return original(self, samples, *args, **kwargs)

    return train_step


def start() -> None:
    """Register this process and take its share (fairseq-train on CPU, with ENV=1)."""
    path = registry()
    _me.update(path=path, cores=sorted(os.sched_getaffinity(0)), looked=time.monotonic())
    take(_me["cores"], register(path, os.getpid()))
    atexit.register(leave, path, os.getpid())
    from fairseq.trainer import Trainer

    replace(Trainer, "train_step", _sharing)


def apply() -> None:
    """Only inside fairseq-train on CPU (no GPU here, or ``--cpu``), and only where ENV asks for it."""
    if os.environ.get(ENV) != "1" or "fairseq_cli.train" not in sys.modules or not hasattr(os, "sched_setaffinity"):
        return
    import torch

    if torch.cuda.is_available() and "--cpu" not in sys.argv:
        return
    if not _me:
        start()
