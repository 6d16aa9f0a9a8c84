"""A probe's figures, kept and read back: in ``$XDG_CACHE_HOME/transformer_plugin/speed.json`` (``~/.cache`` by default)
under a key of this machine (processor, cores, torch, fairseq, this plugin, CUDA device) and the probe's settings: a
second probe of the same is read back for MAX_AGE_DAYS. ``--fresh`` measures again (the recipes: ``REPROBE=1``).

On CPU the plan reads a model's figure at CPU_PROBE_TOKENS, scaled per token (:func:`per_token`)."""

import json
import os
import time
from dataclasses import replace
from typing import Callable, Dict

from recipes.planner.speed import busy_cores, probing
from recipes.planner.speed.busy_cores import BUSY_TRIES
from recipes.planner.speed.probing import Probe

# A figure older than this is measured again (a machine's other work, its firmware, its thermal state change); so is
# one measured before FRESH_SINCE, seconds since the epoch in the environment (the recipes' REPROBE=1 sets it to
# their start: every probe of that run measures again, once).
MAX_AGE_DAYS = 30
FRESH_SINCE = "TRANSFORMER_PLUGIN_PROBE_FRESH_SINCE"


def _stale(kept: Dict[str, object]) -> bool:
    """Whether a kept figure is too old to read back: MAX_AGE_DAYS, or measured before FRESH_SINCE."""
    try:  # "at": seconds since the epoch; "measured": to the minute, for people (a figure that has no "at")
        measured = (
            float(kept["at"]) if "at" in kept else time.mktime(time.strptime(str(kept["measured"]), "%Y-%m-%d %H:%M"))
        )
    except (KeyError, ValueError, TypeError):
        return True
    since = float(os.environ.get(FRESH_SINCE) or 0)
    return measured < since or time.time() - measured > MAX_AGE_DAYS * 86400


def cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "transformer_plugin", "speed.json")


def _read_cache() -> Dict[str, Dict[str, object]]:
    try:
        with open(cache_file()) as f:
            found = json.load(f)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):  # none yet, or not ours: measured again and written anew
        return {}


def seconds_per_update(probe: Probe, fresh: bool = False, tries: int = 1) -> Dict[str, object]:
    """{"seconds": seconds per update, "measured": when, "cached": bool, "tries": probes it is the best of, and "busy"
    where the machine was}: read back, or measured (the fastest of ``tries`` probes) and kept. A figure measured on a
    busy machine is read back while the machine is busy, and measured again once it is quiet."""
    cache = _read_cache()
    key = probe.key()
    kept = None if fresh else cache.get(key)
    if kept and _stale(kept):
        kept = None
    if kept and not kept.get("busy"):  # a quiet machine's figure, read back without watching the cores
        return {**kept, "cached": True}
    load = busy_cores.busy()
    if kept and load:  # a busy machine's figure: until a quiet one's
        return {**kept, "cached": True}
    # on a busy machine the best of BUSY_TRIES probes: the one the other work disturbed least
    tries = max(tries, BUSY_TRIES if load else 1)
    seconds = min(probing.measure(probe) for _ in range(tries))
    entry = {
        "seconds": seconds,
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "at": time.time(),
        "tries": tries,
        **({"busy": load} if load else {}),
    }
    cache = {**_read_cache(), key: entry}  # another probe may have written meanwhile
    os.makedirs(os.path.dirname(cache_file()), exist_ok=True)
    # whole or not at all, and a name of this process's: two recipes started together may write it at once
    tmp = f"{cache_file()}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, cache_file())
    return {**entry, "cached": False}


# On CPU an update's time grows with its tokens (measured: 1.07 s and 2.18 s for 2 layers of 256 at 2,048 and 4,096
# tokens on one core, 1.48 s and 2.86 s for 3): the plan probes each model once, at this many tokens, and scales it
CPU_PROBE_TOKENS = 4096


def per_token(probe: Probe, figure_of: Callable[[Probe], Dict[str, object]] = None) -> Dict[str, object]:
    """A CPU probe's figure as the plan reads it: the same model's at CPU_PROBE_TOKENS, scaled per token; on a CUDA
    device, its own (a device's time is far from proportional to its tokens)."""
    figure_of = figure_of or seconds_per_update
    if probe.device != "cpu" or probe.tokens_per_update == CPU_PROBE_TOKENS:
        return figure_of(probe)
    found = figure_of(replace(probe, tokens_per_update=CPU_PROBE_TOKENS))
    return {**found, "seconds": float(found["seconds"]) * probe.tokens_per_update / CPU_PROBE_TOKENS}


def measured(found: Dict[str, object]) -> str:
    """When a figure of seconds_per_update was measured, for people: 'measured now', 'measured 2026-11-27 09:29', and
    what a busy machine's figure is worth."""
    said = f"measured {found['measured'] if found['cached'] else 'now'}"
    if found.get("busy"):
        said += f" with the machine busy ({found['busy']}), so likely too slow: measured again once it is quiet"
    return said
