"""The cluster tier (``make test-cluster``): the multi-machine commands of docs/several-machines.md at toy
size on two hosts made on this machine (network namespaces, tests/cluster/machines.py) and on a SLURM
cluster of those hosts. Skipped, naming what is missing, without root, ``ip netns``, slurm-wlm or munge.

The session shares one WORK, prepared as the documented torchrun lines prepare it (node 1 waiting for
node 0's data), and one reference: the same toy training on one host with the same world size (two
gloo workers), whose parameters every multi-machine run, interrupted or not, must end with. No process
of a test outlives it: whatever a test leaves on the hosts (a failed test too) is ended when it ends, and
the test then fails, naming what was left. What the tests share is in runs.py."""

import subprocess

import pytest
from helpers import copy_repository
from machines import Network, Slurm, missing, wait_for
from runs import TOY, parameters, start_torchrun_node, user_env


@pytest.fixture(autouse=True)
def nothing_outlives_the_test(request):
    """After each test: every process left on the hosts (SLURM's daemons aside, its jobs cancelled) is
    ended by PID, then the test fails if there was any, so that a failure never leaves processes to the
    tests after it."""
    yield
    if "network" not in request.fixturenames:
        return
    network = request.getfixturevalue("network")
    daemons = set()
    if "slurm" in request.fixturenames:
        cluster = request.getfixturevalue("slurm")
        for job in cluster.client(["squeue", "-h", "-o", "%i"]).stdout.split():
            cluster.client(["scancel", job])
        daemons = cluster.daemon_pids()
    try:
        wait_for(lambda: not network.leftovers(ignore=daemons), 10, "the test's processes ended")
    except AssertionError:
        left = network.leftovers(ignore=daemons)
        network.end(left)
        pytest.fail(f"processes left on the hosts when the test ended (now ended): {left}")


@pytest.fixture(scope="session")
def network(tmp_path_factory):
    lacks = missing()
    if lacks:
        pytest.skip("the cluster tier needs " + ", ".join(lacks))
    net = Network(str(tmp_path_factory.mktemp("network")))
    yield net
    net.close()


@pytest.fixture(scope="session")
def clone(tmp_path_factory):
    """The repository as a user's clone has it, to run from."""
    return copy_repository(tmp_path_factory.mktemp("clone"))


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    """WORK on storage every host sees (this machine's file system)."""
    return tmp_path_factory.mktemp("shared") / "wmt14_en_de"


@pytest.fixture(scope="session")
def two_host_run(network, clone, work, tmp_path_factory):
    """The documented torchrun lines for CPU workers at toy size, node 1 started first (it waits for node 0's data)."""
    out = tmp_path_factory.mktemp("two_hosts")
    node1 = start_torchrun_node(network, clone, work, 1, "torchrun", out)
    wait_for(lambda: "waiting for node 0" in node1.output or node1.poll() is not None, 60, "node 1 waiting")
    node0 = start_torchrun_node(network, clone, work, 0, "torchrun", out)
    return {"node0": node0, "node1": node1, "rc0": node0.wait(), "rc1": node1.wait(), "out": out}


@pytest.fixture(scope="session")
def reference(two_host_run, clone, work, tmp_path_factory):
    """The parameters of the same toy training on one host with the same world size (2 gloo workers)."""
    env = user_env({**TOY, "WORK": str(work), "CONFIG": "reference", "CPU_WORKERS": "2"})
    proc = subprocess.run(
        ["bash", "recipes/wmt14_en_de_base.sh"], cwd=clone, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 CPU workers ====" in proc.stdout
    return parameters(work / "reference" / "checkpoints" / "checkpoint_last.pt")


@pytest.fixture(scope="module")
def slurm(network, tmp_path_factory):
    """The cluster, for the tests of one module: its daemons are gone when the next module starts."""
    lacks = missing(slurm=True)
    if lacks:
        pytest.skip("the SLURM tests need " + ", ".join(lacks))
    cluster = Slurm(network, str(tmp_path_factory.mktemp("slurm")))
    yield cluster
    for job in cluster.client(["squeue", "-h", "-o", "%i"]).stdout.split():
        cluster.client(["scancel", job])
    cluster.close()
