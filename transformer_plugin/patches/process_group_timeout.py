"""``--heartbeat-timeout N`` also bounds fairseq's process groups: a lost peer stops the run in N seconds.

fairseq creates its process groups (fairseq/distributed/utils.py: ``distributed_init``'s
``init_process_group``, and the ``new_group`` calls of ``get_global_group`` and ``new_groups``, which
data-parallel training all-reduces over) without a timeout, so torch's defaults apply: 30 minutes for
gloo, 10 for nccl. A worker whose peer is gone without closing its connections (a machine lost, a cut
link) then waits that long, silently, in its next collective, and a worker whose peer never comes waits
as long in the rendezvous. fairseq's own ``--heartbeat-timeout N`` ("kill the job if no progress is made
in N seconds") only watches forward passes: its SIGINT reaches a worker blocked inside gloo only when
gloo gives up.

With ``--heartbeat-timeout N`` (N > 0), every group fairseq creates gets ``timeout=N`` seconds: a
collective or a rendezvous that waits longer than N for a peer fails, naming the wait, and the worker
exits. N must exceed the longest time one worker can spend apart from the others (rank 0 writing a
checkpoint, the slowest batch): the recipes' ``DIST_TIMEOUT`` passes 600 s, nccl's own default. Without
the flag nothing changes.
"""

import datetime
import logging

import torch.distributed
from fairseq.distributed import utils as distributed_utils

from ._patching import replace

UPSTREAM = None  # fairseq has no timeout option for its process groups
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

logger = logging.getLogger(__name__)


def heartbeat_timeout(cfg) -> int:
    """fairseq's --heartbeat-timeout from a FairseqConfig or an argparse Namespace (-1: not given)."""
    distributed = getattr(cfg, "distributed_training", cfg)
    return int(getattr(distributed, "heartbeat_timeout", -1) or -1)


class TimedDistributed:
    """``torch.distributed`` as fairseq's distributed utils see it (their module global ``dist``): the
    same functions, but the groups they create take ``timeout`` when one is set and none is given."""

    def __init__(self):
        self.timeout = None  # a datetime.timedelta once distributed_init has read --heartbeat-timeout

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


def _reading_the_heartbeat_timeout(original):
    def distributed_init(cfg):
        seconds = heartbeat_timeout(cfg)
        if isinstance(distributed_utils.dist, TimedDistributed):
            distributed_utils.dist.timeout = datetime.timedelta(seconds=seconds) if seconds > 0 else None
        if seconds > 0:
            logger.info("a collective or rendezvous that waits %d s for a peer fails (--heartbeat-timeout)", seconds)
        return original(cfg)

    return distributed_init


def apply() -> None:
    if not isinstance(distributed_utils.dist, TimedDistributed):
        distributed_utils.dist = TimedDistributed()
    replace(distributed_utils, "distributed_init", _reading_the_heartbeat_timeout)
