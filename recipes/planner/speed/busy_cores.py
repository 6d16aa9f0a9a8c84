"""Whether this process's cores are busy with other work, so that a probe's figure would be slower than training once
that work has ended (:func:`busy`)."""

import functools
import os
import re
import time
from typing import Dict

# A machine whose cores (this process's) are more than this share busy with other work is busy: a probe there is
# slower than training will be once the other work has ended (measured: 4.9 s an update beside a test run, 3.3 s
# on the quiet machine), so its figure is kept as a busy machine's, and measured again once the machine is quiet.
BUSY_SHARE = 0.5


BUSY_TRIES = 3  # probes on a busy machine, the fastest kept


BUSY_SAMPLE_SECONDS = 0.5  # how long the cores are watched (Linux's /proc/stat), before the first probe of a process


PROC_STAT = "/proc/stat"


def core_times() -> Dict[int, tuple]:
    """{core: (idle, total)} in ticks since boot, from PROC_STAT's cpuN lines (idle and iowait count as idle)."""
    found = {}
    with open(PROC_STAT) as f:
        for line in f:
            m = re.match(r"^cpu(\d+) (.*)$", line)
            if m:
                ticks = [int(x) for x in m.group(2).split()]
                found[int(m.group(1))] = (ticks[3] + (ticks[4] if len(ticks) > 4 else 0), sum(ticks[:8]))
    return found


@functools.lru_cache(maxsize=1)
def busy() -> str:
    """'core 0 93% busy' where the cores this process may run on are busy with other work, else ''. Those cores, not
    the machine: a probe pinned to one core beside a run pinned to another is not slowed by it (a load average would
    say so). Read once a process, before its first probe: the probes of one choice (the candidates of a TIME) do not
    count each other as other work. The load average where PROC_STAT is not there (not Linux)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    try:
        before = core_times()
        time.sleep(BUSY_SAMPLE_SECONDS)
        after = core_times()
        shares = [1 - (after[c][0] - before[c][0]) / max(1, after[c][1] - before[c][1]) for c in cores]
    except (OSError, KeyError, ValueError, IndexError):
        try:
            load = os.getloadavg()[0]
        except OSError:
            return ""
        return f"load {load:.1f} on {len(cores)} cores" if load > BUSY_SHARE * len(cores) else ""
    share = sum(shares) / len(shares)
    named = f"core {cores[0]}" if len(cores) == 1 else f"cores {','.join(map(str, cores))}"
    return f"{named} {share:.0%} busy" if share > BUSY_SHARE else ""
