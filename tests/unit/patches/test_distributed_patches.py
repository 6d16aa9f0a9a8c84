"""patches/cpu_launchers.py and patches/process_group_timeout.py, through fairseq's own ``call_main`` on
one CPU process: the layout torchrun or an srun step gives, read without CUDA, and the environment's
timeout given to every process group fairseq creates. (Two hosts and a SLURM cluster: tests/cluster.)"""

import datetime
import os
import stat

import pytest
import torch
import torch.distributed as dist
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.distributed import utils as distributed_utils
from helpers import PLUGIN, free_port

from transformer_plugin.patches import cpu_launchers, process_group_timeout

pytestmark = pytest.mark.filterwarnings(r"ignore:\s*'config' is validated against ConfigStore schema")

LAUNCHER_VARIABLES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "SLURM_PROCID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_NTASKS",
    "SLURM_JOB_ID",
    "SLURM_NODEID",
)


def training_config(*flags):
    args = options.parse_args_and_arch(
        options.get_training_parser(), ["data", "--user-dir", PLUGIN, "--arch", "vaswani_tiny", *flags]
    )
    return convert_namespace_to_omegaconf(args)


@pytest.fixture
def launcher(monkeypatch, tmp_path):
    """Sets a launcher's environment (no other); puts a fake ``scontrol`` on PATH that lists 127.0.0.1."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "127.0.0.1\\nnode1\\n"\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return lambda **variables: [monkeypatch.setenv(k, str(v)) for k, v in variables.items()]


def run_one_worker(cfg):
    """fairseq's call_main on this process; what the worker saw."""
    seen = {}

    def main(cfg):
        seen.update(
            rank=dist.get_rank(),
            world=dist.get_world_size(),
            backend=dist.get_backend(),
            init=cfg.distributed_training.distributed_init_method,
            device_id=cfg.distributed_training.device_id,
        )
        dist.all_reduce(torch.ones(2), group=distributed_utils.get_global_group())

    assert not torch.cuda.is_available(), "this test is about CPU workers"
    distributed_utils.call_main(cfg, main)
    assert not dist.is_initialized()
    return seen


def test_a_cpu_worker_under_torchrun_reads_torchruns_layout(launcher, caplog):
    """fairseq alone: ZeroDivisionError (rank % torch.cuda.device_count())."""
    launcher(MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(), WORLD_SIZE=1, RANK=0, LOCAL_RANK=0, GROUP_RANK=0)
    with caplog.at_level("INFO"):
        seen = run_one_worker(training_config("--distributed-backend", "gloo"))
    assert seen == {"rank": 0, "world": 1, "backend": "gloo", "init": "env://", "device_id": 0}
    assert "CPU worker started by torchrun on" in caplog.text and "(node 0, local rank 0): rank 0 of 1" in caplog.text


def test_a_cpu_worker_in_an_srun_step_reads_slurms_layout(launcher, caplog):
    """fairseq alone: one task per node means "spawn a process per GPU" (world size 0 on a CPU); several
    kill every task but the first in torch.cuda.set_device. The rendezvous is the step's first node, on
    --distributed-port."""
    port = free_port()
    launcher(
        SLURM_STEP_NODELIST="node[0-1]",
        SLURM_PROCID=0,
        SLURM_STEP_NUM_TASKS=1,
        SLURM_NTASKS=1,
        SLURM_JOB_ID=7,
        SLURM_NODEID=0,
    )
    with caplog.at_level("INFO"):
        seen = run_one_worker(training_config("--distributed-backend", "gloo", "--distributed-port", str(port)))
    assert seen == {"rank": 0, "world": 1, "backend": "gloo", "init": f"tcp://127.0.0.1:{port}", "device_id": 0}
    assert "CPU worker started by srun on" in caplog.text and "(SLURM_PROCID=0, SLURM_NODEID=0" in caplog.text


def test_the_slurm_port_comes_from_the_job_id_when_none_is_given(launcher):
    launcher(SLURM_STEP_NODELIST="node[0-1]", SLURM_PROCID=1, SLURM_STEP_NUM_TASKS=2, SLURM_JOB_ID=7)
    first = cpu_launchers.launcher_layout(-1)
    assert first[:3] == ("srun", 1, 2) and first[3].startswith("tcp://127.0.0.1:")
    assert cpu_launchers.launcher_layout(-1)[3] == first[3]  # every task of the job derives the same port
    assert 10000 <= int(first[3].rsplit(":", 1)[1]) <= 60000


def test_outside_a_launcher_nothing_changes(launcher):
    """A SLURM batch script (SLURM_PROCID and SLURM_JOB_NODELIST, but no step) or a plain run: fairseq's
    own reading (one process, or its own --distributed-init-method)."""
    launcher(SLURM_PROCID=0, SLURM_NTASKS=2, SLURM_JOB_ID=7)
    cfg = training_config()
    assert not cpu_launchers.read_cpu_launcher(cfg.distributed_training)
    assert cfg.distributed_training.distributed_init_method is None


def test_a_world_size_that_disagrees_with_the_launcher_stops_the_run(launcher):
    launcher(MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(), WORLD_SIZE=2, RANK=0, LOCAL_RANK=0)
    with pytest.raises(cpu_launchers.LauncherMismatch, match="--distributed-world-size 4, but torchrun started 2"):
        distributed_utils.call_main(
            training_config("--distributed-world-size", "4", "--distributed-backend", "gloo"), lambda cfg: None
        )


@pytest.mark.parametrize(
    "variable, flags, timeout",
    [
        ("7", [], datetime.timedelta(seconds=7)),
        (None, ["--heartbeat-timeout", "7"], None),  # fairseq's own watchdog: its meaning stays fairseq's
        (None, [], None),
    ],
)
def test_the_environments_timeout_bounds_every_process_group_fairseq_creates(
    launcher, monkeypatch, variable, flags, timeout
):
    """fairseq creates its groups without a timeout (torch's 30 minutes for gloo): a worker whose peer's
    machine is gone waits that long in its next all-reduce. With TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT=N
    (the recipes set it) the default group and fairseq's global group (the one training all-reduces over)
    time out after N seconds; without it nothing changes."""
    created = []
    for name in ("init_process_group", "new_group"):
        real = getattr(torch.distributed, name)
        monkeypatch.setattr(
            torch.distributed,
            name,
            lambda *a, _real=real, _name=name, **k: created.append((_name, k.get("timeout"))) or _real(*a, **k),
        )
    if variable is None:
        monkeypatch.delenv(process_group_timeout.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(process_group_timeout.VARIABLE, variable)
    launcher(MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(), WORLD_SIZE=1, RANK=0, LOCAL_RANK=0)
    run_one_worker(training_config("--distributed-backend", "gloo", *flags))
    assert created == [("init_process_group", timeout), ("new_group", timeout)]


def test_a_timeout_that_is_not_seconds_stops_the_run_naming_it(monkeypatch):
    monkeypatch.setenv(process_group_timeout.VARIABLE, "10m")
    with pytest.raises(ValueError, match="TRANSFORMER_PLUGIN_PROCESS_GROUP_TIMEOUT='10m': seconds"):
        process_group_timeout.requested_timeout()


def test_the_patch_refuses_a_fairseq_that_creates_its_groups_otherwise(monkeypatch):
    """The patch works through fairseq's module global ``dist``: a fairseq whose functions call
    torch.distributed directly would leave it without effect, so apply() says so instead."""
    import inspect

    source = inspect.getsource(distributed_utils).replace("dist.new_group(", "torch.distributed.new_group(")
    monkeypatch.setattr(inspect, "getsource", lambda obj: source)
    monkeypatch.setattr(distributed_utils, "dist", torch.distributed)
    with pytest.raises(RuntimeError, match="get_global_group, new_groups no longer create process groups"):
        process_group_timeout.apply()
