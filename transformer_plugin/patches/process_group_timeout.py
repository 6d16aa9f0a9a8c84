"""A timeout for fairseq's process groups, where the environment asks for one: with
``TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT=N`` (seconds; the recipes set it to ``DIST_TIMEOUT``) a lost
peer stops the run in N seconds.

fairseq creates its process groups (fairseq/distributed/utils.py: ``distributed_init``'s
``init_process_group``, and the ``new_group`` calls of ``get_global_group`` and ``new_groups``, which
data-parallel training all-reduces over) without a timeout, so torch's defaults apply: 30 minutes for
gloo, 10 for nccl. A worker whose peer is gone without closing its connections (a machine lost, a cut
link) then waits that long, silently, in its next collective, and a worker whose peer never comes waits
as long in the rendezvous. fairseq's own ``--heartbeat-timeout N`` ("kill the job if no progress is made
in N seconds") only watches forward passes, from the first one on: its SIGINT reaches a worker blocked
inside gloo only when gloo gives up, and it does not watch the rendezvous or the loading of the data.

With the variable set, every group fairseq creates gets ``timeout=N`` seconds: a collective or a
rendezvous that waits longer than N for a peer fails, naming the wait, and the worker exits. N must exceed
the longest time one worker can spend apart from the others: rank 0 writing a checkpoint, one worker
loading a large corpus before the first batch, the slowest batch. That is why this is not tied to
``--heartbeat-timeout``, whose meaning for fairseq's users stays fairseq's, and why nothing changes
without the variable (a user's own fairseq-train keeps torch's defaults).

fairseq must create its groups through its module's ``dist`` (checked at ``apply()``: a fairseq that
calls torch.distributed otherwise would leave this patch without effect, silently).
"""

import ast
import datetime
import inspect
import logging
import os

import torch.distributed
from fairseq.distributed import utils as distributed_utils

from ._patching import replace

UPSTREAM = None  # fairseq has no timeout option for its process groups
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"
VARIABLE = "TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT"

logger = logging.getLogger(__name__)


def requested_timeout():
    """The timeout the environment asks for (VARIABLE, seconds > 0), or None; a value that is not a
    positive whole number stops the run, naming it."""
    value = os.environ.get(VARIABLE, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) <= 0:
        raise ValueError(f"{VARIABLE}={value!r}: seconds, a whole number above 0 (or unset: torch's defaults)")
    return datetime.timedelta(seconds=int(value))


class TimedDistributed:
    """``torch.distributed`` as fairseq's distributed utils see it (their module global ``dist``): the
    same functions, but the groups they create take ``timeout`` when one is set and none is given."""

    def __init__(self):
        self.timeout = None  # a datetime.timedelta once distributed_init has read the environment

    def __getattr__(self, name):
        return getattr(torch.distributed, name)

    def _timed(self, kwargs):
        if self.timeout is not None:
            kwargs.setdefault("timeout", self.timeout)
        return kwargs

    def init_process_group(self, *args, **kwargs):
        return torch.distributed.init_process_group(*args, **self._timed(kwargs))

    def new_group(self, *args, **kwargs):
        return torch.distributed.new_group(*args, **self._timed(kwargs))


def _reading_the_timeout(original):
    def distributed_init(cfg):
        timeout = requested_timeout()
        distributed_utils.dist.timeout = timeout
        if timeout is not None:
            logger.info(
                "a collective or rendezvous that waits %d s for a peer fails (%s)", timeout.total_seconds(), VARIABLE
            )
        return original(cfg)

    return distributed_init


def calls_through_dist() -> list:
    """The functions of fairseq's distributed utils (as its source has them, whatever wraps them now) that
    should create groups through ``dist`` but do not."""
    expected = {
        "distributed_init": "dist.init_process_group(",
        "get_global_group": "dist.new_group(",
        "new_groups": "dist.new_group(",
    }
    tree = ast.parse(inspect.getsource(distributed_utils))
    found = {node.name: ast.unparse(node) for node in tree.body if isinstance(node, ast.FunctionDef)}
    return [name for name, call in expected.items() if call not in found.get(name, "")]


def apply() -> None:
    if not isinstance(distributed_utils.dist, TimedDistributed):
        missing = calls_through_dist()
        if missing:
            raise RuntimeError(
                f"transformer_plugin's process_group_timeout patch was checked against {CHECKED_AGAINST}; "
                f"this fairseq's {', '.join(missing)} no longer create process groups through its module's "
                "`dist`, so the patch would do nothing"
            )
        distributed_utils.dist = TimedDistributed()
    replace(distributed_utils, "distributed_init", _reading_the_timeout)
