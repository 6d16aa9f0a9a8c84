"""A distributed worker that finished destroys its process group before it exits.

fairseq's ``distributed_main`` ends each worker with a barrier and returns without calling
``torch.distributed.destroy_process_group()``. Under gloo, a worker that exits so can abort during
interpreter shutdown ("terminate called without an active exception", exit 134: pytorch #190489),
after its training is done: fairseq-train then fails although every checkpoint was written, and a
recipe stops at its training stage. This patch destroys the process group after fairseq's barrier,
on success only (a worker that failed leaves it, so as not to wait on peers that may be gone).
"""

import torch
from fairseq.distributed import utils as distributed_utils

from ._patching import replace

UPSTREAM = None  # no fairseq issue found; the torch side: pytorch #190489
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _then_destroy_the_group(original):
    def distributed_main(i, main, cfg, kwargs):
        original(i, main, cfg, kwargs)
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    return distributed_main


def apply() -> None:
    replace(distributed_utils, "distributed_main", _then_destroy_the_group)
