"""The layout of a training: machines, processes per machine, and the batch (a part of the plan,
recipes/planner/decide.py; ``plan_run layout`` in recipes/lib.sh for the recipes that plan nothing else), and the
command lines of local CPU workers."""

import os
import re
import socket
from typing import Callable, Dict, List, Sequence


class LayoutError(ValueError):
    pass


def layout(
    launch: str,
    nnodes: str,
    node_rank: str,
    master_addr: str,
    master_port: str,
    gpus: str,
    cpu_workers: str,
    dist_timeout: str,
    tokens: int,
    cap: int,
    real: bool = False,
    slurm_job_id: str = "",
    slurm_job_num_nodes: str = "",
    cuda_devices: Callable[[], int] = lambda: 0,
    hostname: str = "",
) -> Dict[str, str]:
    """The variables of a training's layout, or LayoutError naming the variables that cannot work
    together: PER_NODE (processes per machine), DEVICES (in all), UPDATE_FREQ and MAX_TOKENS so that
    MAX_TOKENS x DEVICES x UPDATE_FREQ ~ ``tokens`` with MAX_TOKENS <= ``cap``, BATCH_SUMMARY, and
    MASTER_ADDR and MASTER_PORT as given, or their defaults (127.0.0.1; 29500, or under SLURM a port from
    the job id, so that jobs sharing a node do not collide). ``real``: also what only the machine tells
    (its CUDA devices, the SLURM allocation)."""
    if not master_port:
        master_port = (
            str(10000 + int(slurm_job_id) % 50000) if launch == "slurm" and slurm_job_id.isdigit() else "29500"
        )
    check_variables(launch, nnodes, node_rank, master_addr, gpus, cpu_workers, dist_timeout)
    if real and launch == "slurm" and not slurm_job_id:
        raise LayoutError("LAUNCH=slurm runs inside a SLURM allocation (sbatch or salloc): SLURM_JOB_ID is not set")
    if real and launch == "slurm" and (slurm_job_num_nodes or nnodes) != nnodes:
        raise LayoutError(
            f"NNODES={nnodes}, but this SLURM allocation has {slurm_job_num_nodes} nodes (sbatch --nodes)"
        )
    if real and int(gpus) > 0:
        seen = cuda_devices()
        if seen < int(gpus):
            raise LayoutError(
                f"GPUS={gpus}, but torch sees {seen} CUDA devices on {hostname or socket.gethostname()}: "
                "GPUS=0 trains on CPU_WORKERS processes"
            )
    per_node = int(gpus) if int(gpus) > 0 else int(cpu_workers)
    devices = per_node * int(nnodes)
    update_freq = -(-tokens // (devices * cap))
    max_tokens = -(-tokens // (devices * update_freq))
    summary = f"{devices} {'GPUs' if int(gpus) > 0 else 'CPU workers'}"
    if nnodes != "1":
        summary += f" ({nnodes} machines x {per_node})"
    tokens_per_update = devices * max_tokens * update_freq
    summary += f" x --max-tokens {max_tokens} x --update-freq {update_freq} = {tokens_per_update} tokens per update"
    return {
        "PER_NODE": str(per_node),
        "DEVICES": str(devices),
        "UPDATE_FREQ": str(update_freq),
        "MAX_TOKENS": str(max_tokens),
        "BATCH_SUMMARY": summary,
        "MASTER_ADDR": master_addr or "127.0.0.1",
        "MASTER_PORT": master_port,
    }


def check_variables(
    launch: str, nnodes: str, node_rank: str, master_addr: str, gpus: str, cpu_workers: str, dist_timeout: str
) -> None:
    """LayoutError naming the variables of a layout that cannot work, each alone or together, before what only the
    machine tells."""
    digits = re.compile(r"^[0-9]+$")
    positive = re.compile(r"^[1-9][0-9]*$")
    if launch not in ("local", "torchrun", "slurm"):
        raise LayoutError(f"LAUNCH={launch}: use local, torchrun or slurm")
    if not positive.match(nnodes):
        raise LayoutError(f"NNODES={nnodes}: the number of machines, 1 or more")
    if not digits.match(gpus):
        raise LayoutError(f"GPUS={gpus}: GPUs per machine, or 0 for CPU workers")
    if not positive.match(cpu_workers):
        raise LayoutError(f"CPU_WORKERS={cpu_workers}: processes per machine, 1 or more")
    if not positive.match(dist_timeout):
        raise LayoutError(f"DIST_TIMEOUT={dist_timeout}: seconds, 1 or more")
    if launch == "local" and nnodes != "1":
        raise LayoutError(f"NNODES={nnodes}: training on several machines needs LAUNCH=torchrun or LAUNCH=slurm")
    if launch != "torchrun" and node_rank != "0":
        raise LayoutError(
            f"NODE_RANK={node_rank} with LAUNCH={launch}: only LAUNCH=torchrun runs the recipe on every machine"
        )
    if launch == "torchrun" and not (digits.match(node_rank) and int(node_rank) < int(nnodes)):
        raise LayoutError(f"NODE_RANK={node_rank}: with NNODES={nnodes}, each machine's number, 0 to {int(nnodes) - 1}")
    if launch == "torchrun" and int(nnodes) > 1 and not master_addr:
        raise LayoutError(
            f"LAUNCH=torchrun NNODES={nnodes} needs MASTER_ADDR: node 0's address, the same on every machine"
        )


def cuda_devices() -> int:
    """The CUDA devices torch sees here (what fairseq-train will use); 0 if torch cannot tell."""
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_commands(n: int, argv: Sequence[str], port: str) -> List[List[str]]:
    """``n`` data-parallel fairseq-train processes on this machine: gloo over TCP on 127.0.0.1,
    legacy_ddp (fairseq's c10d DDP rejects CPU models), --distributed-no-spawn."""
    return [
        [
            *argv,
            "--distributed-world-size",
            str(n),
            "--distributed-rank",
            str(r),
            "--distributed-backend",
            "gloo",
            "--ddp-backend",
            "legacy_ddp",
            "--distributed-no-spawn",
            "--distributed-init-method",
            f"tcp://127.0.0.1:{port}",
        ]
        for r in range(n)
    ]


def worker_threads(per_node: int) -> str:
    """Each of ``per_node`` CPU processes' torch threads: OMP_NUM_THREADS if set, else SLURM's
    --cpus-per-task, else an equal share of the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return (
        os.environ.get("OMP_NUM_THREADS")
        or os.environ.get("SLURM_CPUS_PER_TASK")
        or str(max(1, cores // max(1, per_node)))
    )
