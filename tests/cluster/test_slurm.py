"""LAUNCH=slurm on a SLURM 22.05 cluster of two hosts (slurmctld and a slurmd per host, started by the
``slurm`` fixture): the documented sbatch line at toy size, a task that dies, scancel and a requeue
(preemption). Every job that finishes ends with the parameters of the same training on one host."""

import os
import re
import shlex
import signal
import time

import pytest
from runs import TOY, assert_same_parameters, documented_command, split_assignments, updates_in, user_env
from machines import wait_for

pytestmark = pytest.mark.cluster


def sbatch_line(work, config):
    """docs/several-machines.md's sbatch line for CPU workers at toy size: one CPU per task instead of
    32, this test's WORK and CONFIG, and the toy variables in the command it wraps."""
    words = documented_command("sbatch", "GPUS=0")
    options, wrapped = words[1 : words.index("--wrap")], words[words.index("--wrap") + 1]
    options[options.index("--cpus-per-task") + 1] = "1"
    typed, command = split_assignments(shlex.split(wrapped))
    variables = {**typed, **TOY, "WORK": str(work), "CONFIG": config}
    return [
        *options,
        "--wrap",
        " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items()) + " " + shlex.join(command),
    ]


def job_output(clone, job):
    with open(clone / f"slurm-{job}.out", errors="replace") as f:
        return f.read()


def wait_for_training(slurm, job, log, past):
    wait_for(
        lambda: updates_in(log) > past or slurm.state(job) not in ("PENDING", "RUNNING"), 240, f"update {past} in {log}"
    )
    assert slurm.state(job) == "RUNNING", slurm.job(job)


def no_job_processes_left(network, slurm):
    """Every process of the jobs has ended: only the daemons are left on the hosts."""
    try:
        wait_for(lambda: not network.leftovers(ignore=slurm.daemon_pids()), 30, "the jobs' processes ended")
    except AssertionError:
        raise AssertionError(f"processes left on the hosts: {network.leftovers(ignore=slurm.daemon_pids())}")


def test_the_documented_sbatch_line_trains_on_both_nodes(slurm, network, two_host_run, clone, work, reference):
    # the data, prepared once on the login node as documented (done already: every stage is skipped)
    typed, command = split_assignments(documented_command("DATA_ONLY=1", "wmt14_en_de_base.sh"))
    data = network.hosts[0].run(command, env=user_env({**typed, **TOY, "WORK": str(work)}), cwd=clone, timeout=120)
    assert data.returncode == 0 and "DATA_ONLY=1: the data is ready" in data.stdout, data.stdout[-2000:] + data.stderr
    assert "==== stage 3:" in data.stdout and "redoing" not in data.stdout

    job = slurm.submit(sbatch_line(work, "slurm"), env=user_env({}), cwd=clone)
    state = slurm.wait_done(job, timeout=300)
    output = job_output(clone, job)
    assert state == "COMPLETED", output[-3000:]
    # srun started one task per node; each worker says which task it is
    assert "2 machines x 1 CPU workers (srun)" in output
    assert re.search(r"CPU worker started by srun .*SLURM_PROCID=0, SLURM_NODEID=0.*rank 0 of 2", output)
    assert re.search(r"CPU worker started by srun .*SLURM_PROCID=1, SLURM_NODEID=1.*rank 1 of 2", output)
    assert "training on 2 devices" in output and "| sacreBLEU, detokenized |" in output
    assert (work / "slurm" / "results" / "scores.test.json").exists()
    assert_same_parameters(work / "slurm" / "checkpoints" / "checkpoint_last.pt", reference)
    no_job_processes_left(network, slurm)


def test_a_task_that_dies_ends_the_job_within_seconds(slurm, network, two_host_run, clone, work):
    job = slurm.submit(sbatch_line(work, "slurm-killed"), env=user_env({}), cwd=clone)
    wait_for_training(slurm, job, work / "slurm-killed" / "train.log", past=20)
    [task] = network.hosts[1].find("fairseq-train", env={"SLURM_PROCID": "1"})
    os.kill(task, signal.SIGKILL)
    killed = time.monotonic()
    state = slurm.wait_done(job, timeout=120)
    print(f"the job ended {time.monotonic() - killed:.1f} s after task 1 was killed")
    assert state == "FAILED" and time.monotonic() - killed < 20
    output = job_output(clone, job)
    assert "training stopped: a task failed (node1: task 1: Killed), and srun ended the others" in output, output[
        -3000:
    ]
    no_job_processes_left(network, slurm)


def test_scancel_and_requeue_resume_and_end_as_an_uninterrupted_run(
    slurm, network, two_host_run, clone, work, reference
):
    log = work / "slurm-preempted" / "train.log"
    first = slurm.submit(sbatch_line(work, "slurm-preempted"), env=user_env({}), cwd=clone)
    wait_for_training(slurm, first, log, past=20)
    slurm.client(["scancel", str(first)])
    assert slurm.wait_done(first, timeout=60) == "CANCELLED"
    no_job_processes_left(network, slurm)

    second = slurm.submit(sbatch_line(work, "slurm-preempted"), env=user_env({}), cwd=clone)  # resubmitted
    wait_for_training(slurm, second, log, past=40)
    assert slurm.client(["scontrol", "requeue", str(second)]).returncode == 0  # preempted: SLURM runs it again
    wait_for(lambda: slurm.job(second).get("Restarts") == "1", 60, "the job requeued")
    state = slurm.wait_done(second, timeout=300)
    assert state == "COMPLETED", job_output(clone, second)[-3000:]
    with open(log) as f:
        resumed = re.findall(r"Loaded checkpoint \S+ \(epoch \d+ @ (\d+) updates\)", f.read())
    assert len(resumed) == 2 and 0 < int(resumed[0]) < int(resumed[1]), resumed  # after scancel, after requeue
    assert_same_parameters(work / "slurm-preempted" / "checkpoints" / "checkpoint_last.pt", reference)
    no_job_processes_left(network, slurm)
