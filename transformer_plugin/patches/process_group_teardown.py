"""A distributed worker that finished destroys its process group before it exits.

fairseq's ``distributed_main`` ends each worker with a barrier and returns without calling
``torch.distributed.destroy_process_group()``. Under gloo, a worker that exits so can abort during
interpreter shutdown ("terminate called without an active exception", exit 134: pytorch #190489),
after its training is done: fairseq-train then fails although every checkpoint was written, and a
recipe stops at its training stage. The abort is a gloo worker thread dropping the last reference to
a finished collective (fairseq's final barrier) while the interpreter shuts down: freeing its tensors
needs the GIL, the thread is told to exit instead, and a C++ destructor on its stack turns that into
std::terminate. So, after fairseq's barrier and on success only (a worker that failed leaves its
groups, so as not to wait on peers that may be gone), this patch destroys every process group and
drops fairseq's cached global group (``get_global_group._global_group``, which
``destroy_process_group`` cannot free), so that the groups' threads are joined while the interpreter
is alive. (The default group's threads stay, idle: torch.distributed.nn.functional, imported after
the group exists, holds it in its functions' default arguments; fairseq runs no collective on it.)
"""

import gc

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
            if hasattr(distributed_utils.get_global_group, "_global_group"):
                del distributed_utils.get_global_group._global_group
            gc.collect()  # the trainer's reference cycles hold the group too

    return distributed_main


def apply() -> None:
    replace(distributed_utils, "distributed_main", _then_destroy_the_group)
