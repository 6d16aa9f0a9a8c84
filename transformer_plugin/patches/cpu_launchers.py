"""fairseq-train started by torchrun or by srun on CPU workers: the process layout is the launcher's.

fairseq reads the layout a launcher gives in ``infer_init_method`` (fairseq/distributed/utils.py), and
both of its readings assume GPUs:

- torchrun (``_infer_torch_distributed_launch_init``): ``device_id = rank % torch.cuda.device_count()``,
  a ZeroDivisionError on a machine without one; and a run that does not pass ``--distributed-world-size``
  (1 on a CPU) is not distributed at all: every worker trains alone, into the same checkpoints.
- SLURM (``_infer_slurm_init``): one task per node means "spawn one process per GPU" (rank = node id x 0
  GPUs, world size 0); several tasks per node set ``device_id = SLURM_LOCALID`` and then call
  ``torch.cuda.set_device``, which kills every task but the first of each node.

On CPU workers (no CUDA device, or ``--cpu``) every process is started by the launcher, one per worker,
so this patch reads the layout from the launcher alone: rank and world size from torchrun's ``RANK`` and
``WORLD_SIZE`` (rendezvous ``env://``, torchrun's store) or from an srun step's ``SLURM_PROCID`` and
``SLURM_STEP_NUM_TASKS`` (rendezvous at the first host of ``SLURM_STEP_NODELIST``, on
``--distributed-port``, or the port fairseq derives from the job id when none is given); no spawning,
no CUDA device. A ``--distributed-world-size`` other than 1 (fairseq's CPU default) that disagrees with
the launcher's stops the run naming both. Each worker logs where it stands (with SLURM, its
SLURM_PROCID, SLURM_NODEID and host). GPU processes keep fairseq's own reading, and so does a
fairseq-train run in a SLURM batch script outside an srun step.
"""

import logging
import os
import random
import socket
import subprocess

import torch
from fairseq.distributed import utils as distributed_utils

from ._patching import replace

UPSTREAM = None  # no fairseq issue found: fairseq's CPU distributed training assumes its own spawning
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

logger = logging.getLogger(__name__)

TORCHRUN = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")  # what fairseq's reading checks too


class LauncherMismatch(ValueError):
    """--distributed-world-size says one thing, the launcher another."""


def launcher_layout(distributed_port: int, environ=os.environ):
    """(launcher, rank, world_size, init_method, description) for a process started by torchrun or
    by an srun step, or None for any other process."""
    if all(key in environ for key in TORCHRUN):
        rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        where = f"node {environ.get('GROUP_RANK', '?')}, local rank {environ.get('LOCAL_RANK', '?')}"
        return "torchrun", rank, world, "env://", where
    nodes = environ.get("SLURM_STEP_NODELIST")
    if nodes is None or "SLURM_PROCID" not in environ:
        return None
    rank = int(environ["SLURM_PROCID"])
    world = int(environ.get("SLURM_STEP_NUM_TASKS") or environ["SLURM_NTASKS"])
    first = subprocess.check_output(["scontrol", "show", "hostnames", nodes], text=True).split()[0]
    port = distributed_port
    if port <= 0:  # as fairseq's _infer_single_node_init: every task of the job derives the same port
        port = random.Random(int(environ["SLURM_JOB_ID"])).randint(10000, 60000)
    where = (
        f"SLURM_PROCID={rank}, SLURM_NODEID={environ.get('SLURM_NODEID', '?')}, "
        f"SLURM_LOCALID={environ.get('SLURM_LOCALID', '?')}"
    )
    return "srun", rank, world, f"tcp://{first}:{port}", where


def read_cpu_launcher(distributed_cfg, environ=os.environ) -> bool:
    """Set rank, world size and rendezvous from the launcher of this CPU worker; False if none started it."""
    layout = launcher_layout(distributed_cfg.distributed_port, environ)
    if layout is None:
        return False
    launcher, rank, world, init_method, where = layout
    given = distributed_cfg.distributed_world_size
    if given not in (1, world):
        raise LauncherMismatch(f"--distributed-world-size {given}, but {launcher} started {world} processes")
    distributed_cfg.distributed_world_size = world
    distributed_cfg.distributed_rank = rank
    distributed_cfg.distributed_init_method = init_method
    distributed_cfg.device_id = 0
    distributed_cfg.distributed_no_spawn = True
    logger.info(
        "CPU worker started by %s on %s (%s): rank %d of %d, rendezvous %s",
        launcher,
        socket.gethostname(),
        where,
        rank,
        world,
        init_method,
    )
    return True


def _reading_cpu_launchers(original):
    def call_main(cfg, main, **kwargs):
        distributed = cfg.distributed_training
        on_cpu = cfg.common.cpu or not torch.cuda.is_available()
        if on_cpu and distributed.distributed_init_method is None and not cfg.common.tpu:
            read_cpu_launcher(distributed)
        return original(cfg, main, **kwargs)

    return call_main


def apply() -> None:
    replace(distributed_utils, "call_main", _reading_cpu_launchers)
