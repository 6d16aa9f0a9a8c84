"""The memory of a process tree, sampled: the proportional set size (PSS) of every process below a root, so that
pages that forked workers share count once. Which processes are below the root is the recipes' engine's answer
(``recipes.engine.processes.descendants``), the same that ends them."""

import threading
from typing import Tuple

from recipes.engine.processes import descendants


def pss_bytes(pid: int) -> Tuple[int, int]:
    """The proportional set size of ``pid``: (all of it, its anonymous part), (0, 0) once it is gone. The
    rest is file pages mapped in (libraries, memory-mapped data), which the kernel can drop and read again."""
    found = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                key = line.split(b":", 1)[0]
                if key in (b"Pss", b"Pss_Anon"):
                    found[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return found.get(b"Pss", 0), found.get(b"Pss_Anon", found.get(b"Pss", 0))


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class TreeMemory(threading.Thread):
    """Samples the summed PSS of every process below ``root`` but the recipe's own shell and engine, every
    ``interval`` seconds; ``take()`` returns the peak since the last call (``anon_peak``: the same for the
    anonymous part alone, which no file backs)."""

    def __init__(self, root: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.root, self.interval, self.peak, self.anon_peak, self.stopped = root, interval, 0, 0, threading.Event()
        self.lock = threading.Lock()
        self.skip: set = set()

    def run(self):
        while not self.stopped.wait(self.interval):
            pids = descendants(self.root)
            for pid in pids:
                if pid not in self.skip and "recipes.engine" in cmdline(pid):
                    self.skip.add(pid)  # the engine: it waits, its memory is not the stage's
            sizes = [pss_bytes(p) for p in pids if p not in self.skip]
            with self.lock:
                self.peak = max(self.peak, sum(s[0] for s in sizes))
                self.anon_peak = max(self.anon_peak, sum(s[1] for s in sizes))

    def take(self, anon: bool = False) -> int:
        with self.lock:
            if anon:
                peak, self.anon_peak = self.anon_peak, 0
            else:
                peak, self.peak = self.peak, 0
        return peak
