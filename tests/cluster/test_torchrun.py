"""LAUNCH=torchrun on two hosts: the documented lines, each on its host with its NODE_RANK, at toy size;
then the faults: a worker killed, the link cut, node 0 or node 1 missing. Every run that finishes ends
with the parameters of the same training on one host (the ``reference`` fixture), and no process of a
test outlives it."""

import json
import os
import signal
import time

import pytest
from runs import assert_same_parameters, start_torchrun_node, updates_in
from machines import wait_for

pytestmark = pytest.mark.cluster


def no_processes_left(network):
    left = network.leftovers()
    assert not left, f"processes left on the hosts: {left}"


def test_both_hosts_train_and_node0_evaluates(two_host_run, work):
    node0, node1 = two_host_run["node0"], two_host_run["node1"]
    assert two_host_run["rc1"] == 0, node1.output[-3000:]
    assert two_host_run["rc0"] == 0, node0.output[-3000:]
    # node 1 was started first: it waited for node 0's data, saying so, then trained
    assert "node 1: waiting for node 0 to do this stage" in node1.output
    assert "==== stage 1:" in node0.output and "==== stage 3:" in node0.output
    assert "CPU worker started by torchrun on" in node1.output and "rank 1 of 2" in node1.output
    assert "rank 0 of 2" in node0.output and "training on 2 devices" in node0.output
    # node 1 stops after training, with its message; node 0 averages, generates and scores
    assert node1.output.rstrip().endswith("node 1: training done; node 0 averages, generates and scores")
    assert "==== stage 5-torchrun:" not in node1.output
    for stage in ("5-torchrun", "6-torchrun", "7-torchrun", "8-torchrun"):
        assert f"==== stage {stage}:" in node0.output
    assert (work / "torchrun" / "results" / "scores.test.json").exists()
    assert "| sacreBLEU, detokenized |" in node0.output
    # each machine's stamps are its own
    for stamp, rank in ((work / ".done" / "4-torchrun", "0"), (work / ".done" / "node1" / "4-torchrun", "1")):
        command = json.loads(stamp.read_text())["command"]
        assert command[command.index("--node-rank") + 1] == rank
    assert not (work / ".done" / "node1" / "1").exists()  # node 1 made no data


def test_two_hosts_end_with_the_parameters_of_one_host(two_host_run, work, reference):
    """The same world size (2), seed and batches on one host (2 gloo workers) or on two (1 each): the
    all-reduce of two ranks adds the same two numbers, so the parameters are equal bit for bit."""
    assert two_host_run["rc0"] == 0
    assert_same_parameters(work / "torchrun" / "checkpoints" / "checkpoint_last.pt", reference)


def test_a_rerun_of_node0_after_the_two_node_run_skips_every_stage(two_host_run, network, clone, work, tmp_path):
    assert two_host_run["rc0"] == 0
    again = start_torchrun_node(network, clone, work, 0, "torchrun", tmp_path)
    assert again.wait(timeout=120) == 0, again.output[-3000:]
    assert "training on" not in again.output
    for stage in ("0", "1", "2a", "2b", "3", "4-torchrun", "5-torchrun", "6-torchrun", "7-torchrun", "8-torchrun"):
        assert again.output.count(f"==== stage {stage}:") == 1
    assert again.output.count("done already with these settings: skipping") == 10
    no_processes_left(network)


def start_both(network, clone, work, config, tmp_path, **variables):
    node1 = start_torchrun_node(network, clone, work, 1, config, tmp_path, **variables)
    node0 = start_torchrun_node(network, clone, work, 0, config, tmp_path, **variables)
    return node0, node1


def wait_for_training(node0, work, config, past: int):
    """Wait until node 0's training log shows an update beyond `past` (a checkpoint is written every 10)."""
    log = work / config / "train.log.node0"
    wait_for(lambda: updates_in(log) > past or node0.poll() is not None, 180, f"update {past} in {log}")
    assert node0.poll() is None, node0.output[-3000:]


def resume_and_compare(network, clone, work, config, tmp_path, reference, **variables):
    """Run both nodes' lines again: training resumes from checkpoint_last.pt and ends with the
    reference's parameters."""
    node0, node1 = start_both(network, clone, work, config, tmp_path / "rerun", **variables)
    assert node1.wait() == 0, node1.output[-3000:]
    assert node0.wait() == 0, node0.output[-3000:]
    resumed = [line for line in node0.output.splitlines() if "Loaded checkpoint" in line]
    assert resumed and "updates)" in resumed[0], "node 0 did not resume from checkpoint_last.pt"
    assert_same_parameters(work / config / "checkpoints" / "checkpoint_last.pt", reference)
    no_processes_left(network)


def test_a_worker_killed_on_node1_stops_node0_naming_the_peer(two_host_run, network, clone, work, tmp_path, reference):
    (tmp_path / "rerun").mkdir()
    node0, node1 = start_both(network, clone, work, "killed", tmp_path)
    wait_for_training(node0, work, "killed", past=20)
    [worker] = network.hosts[1].find("fairseq-train", env={"LOCAL_RANK": "0"})
    os.kill(worker, signal.SIGKILL)
    killed = time.monotonic()
    assert node0.wait(timeout=60) != 0 and node1.wait(timeout=60) != 0
    print(f"node 0 stopped {node0.ended - killed:.1f} s after node 1's worker was killed")
    assert node0.ended - killed < 30
    assert f"training stopped: the connection to the worker at {network.hosts[1].address} was lost" in node0.output
    assert "training stopped: a training process on this machine failed (exitcode : -9" in node1.output
    no_processes_left(network)
    resume_and_compare(network, clone, work, "killed", tmp_path, reference)


def test_a_cut_link_stops_both_hosts_within_dist_timeout(two_host_run, network, clone, work, tmp_path, reference):
    (tmp_path / "rerun").mkdir()
    timeout = 10
    node0, node1 = start_both(network, clone, work, "cut", tmp_path, DIST_TIMEOUT=str(timeout))
    wait_for_training(node0, work, "cut", past=20)
    network.cut(1)
    cut = time.monotonic()
    try:
        assert node0.wait(timeout=120) != 0 and node1.wait(timeout=120) != 0
    finally:
        network.restore(1)
    for node in (node0, node1):
        print(f"{node.out}: stopped {node.ended - cut:.1f} s after the link was cut")
        assert node.ended - cut < timeout + 15
        assert f"training stopped: no word from the other machines for DIST_TIMEOUT={timeout} s" in node.output
    no_processes_left(network)
    resume_and_compare(network, clone, work, "cut", tmp_path, reference, DIST_TIMEOUT=str(timeout))


@pytest.mark.parametrize(
    "alone, data, says",
    [
        (1, True, "training stopped: node 0's rendezvous at node0:29500 did not answer within DIST_TIMEOUT=8 s"),
        (
            0,
            True,
            "training stopped: not every machine joined torchrun's rendezvous at node0:29500 within DIST_TIMEOUT=8 s",
        ),
        (1, False, "node 1 waited DIST_TIMEOUT=8 s for node 0's stage 0"),
    ],
)
def test_a_node_alone_stops_within_dist_timeout(two_host_run, network, clone, work, tmp_path, alone, data, says):
    """Node 0 dead before training (node 1 alone), node 1 never started (node 0 alone), node 1 started
    where node 0 never prepares the data: each stops after DIST_TIMEOUT, saying what it waited for."""
    where = work if data else tmp_path / "empty"
    node = start_torchrun_node(network, clone, where, alone, f"alone{alone}", tmp_path, DIST_TIMEOUT="8")
    assert node.wait(timeout=120) != 0
    print(f"node {alone} alone stopped after {node.ended - node.started:.1f} s")
    assert says in node.output, node.output[-3000:]
    assert node.ended - node.started < 8 + 25  # the recipe's start (its dry run first) and fairseq's
    no_processes_left(network)
