"""transformer_plugin/patches/shared_cores.py: training processes on one machine share its cores (two runs side by
side: benchmarks/shared_cores.py)."""

import os
import subprocess
import sys
import textwrap

import pytest

from transformer_plugin.patches import shared_cores


def test_equal_disjoint_shares_and_one_core_each_where_processes_outnumber_them():
    assert shared_cores.shares([10], [0, 1, 2, 3]) == {10: [0, 1, 2, 3]}
    assert shared_cores.shares([10, 20], [0, 1, 2, 3]) == {10: [0, 1], 20: [2, 3]}
    assert shared_cores.shares([10, 20], [0, 1, 2]) == {10: [0, 1], 20: [2]}
    assert shared_cores.shares([10, 20, 30], [0, 1]) == {10: [0], 20: [1], 30: [0]}


def test_the_registry_drops_processes_gone_and_a_pid_given_to_another_process(tmp_path):
    path = str(tmp_path / "cores.json")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert shared_cores.register(path, os.getpid()) == [os.getpid()]
    with shared_cores._locked(path) as entries:  # a process gone, and this PID as another process's
        entries[dead.pid] = "12345"
    assert shared_cores.registered(path) == [os.getpid()]
    shared_cores.leave(path, os.getpid())
    assert shared_cores.registered(path) == []


@pytest.mark.e2e  # two processes that import fairseq: 11 s
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two cores to share")
def test_a_run_that_starts_later_takes_its_share_and_the_first_gives_one_up(tmp_path):
    """Two processes, as two fairseq-train runs on a machine of two cores or more: the first alone takes them all;
    once the second has registered, each holds half, disjoint; when the second leaves, the first takes them back."""
    script = textwrap.dedent(
        f"""
        import os, sys, time, tempfile
        tempfile.tempdir = {str(tmp_path)!r}
        from transformer_plugin.patches import shared_cores as s

        def wait(name):
            while not os.path.exists(os.path.join({str(tmp_path)!r}, name)):
                time.sleep(0.05)

        path, cores = s.registry(), sorted(os.sched_getaffinity(0))
        s.take(cores, s.register(path, os.getpid()))
        print(sorted(os.sched_getaffinity(0)), flush=True)
        wait("go")
        s.take(cores, s.registered(path))
        print(sorted(os.sched_getaffinity(0)), flush=True)
        open(os.path.join({str(tmp_path)!r}, sys.argv[1]), "w").close()
        if sys.argv[1] == "second":
            wait("first")
            s.leave(path, os.getpid())
        else:
            while len(s.registered(path)) > 1:
                time.sleep(0.05)
            s.take(cores, s.registered(path))
            print(sorted(os.sched_getaffinity(0)), flush=True)
        """
    )
    first = subprocess.Popen([sys.executable, "-c", script, "first"], stdout=subprocess.PIPE, text=True)
    alone = first.stdout.readline()
    second = subprocess.Popen([sys.executable, "-c", script, "second"], stdout=subprocess.PIPE, text=True)
    second.stdout.readline()
    (tmp_path / "go").touch()
    out_second = second.communicate(timeout=60)[0].split("\n")
    out_first = first.communicate(timeout=60)[0].split("\n")
    cores = sorted(os.sched_getaffinity(0))
    assert eval(alone) == cores
    halves = shared_cores.shares(sorted([first.pid, second.pid]), cores)
    assert eval(out_first[0]) == halves[first.pid] and eval(out_second[0]) == halves[second.pid]
    assert not set(halves[first.pid]) & set(halves[second.pid])
    assert eval(out_first[1]) == cores  # the second left: all of them again


def test_a_registry_removed_under_a_run_is_written_again(tmp_path, monkeypatch):
    """A temporary directory cleaned while a run trains: at its next look the run registers again and keeps
    training; a registry that cannot be written leaves the cores it took."""
    path = str(tmp_path / "cores.json")
    cores = sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(shared_cores, "_me", {"path": path, "cores": cores, "looked": -1e9, "share": cores})
    monkeypatch.setattr(shared_cores, "take", lambda cores, pids: pids)
    step = shared_cores._sharing(lambda self, samples: "stepped")
    assert step(None, []) == "stepped" and shared_cores.registered(path) == [os.getpid()]
    os.remove(path)
    shared_cores._me["looked"] = -1e9
    assert step(None, []) == "stepped" and shared_cores.registered(path) == [os.getpid()]
    shared_cores._me.update(path=str(tmp_path / "no" / "such" / "dir" / "cores.json"), looked=-1e9)
    assert step(None, []) == "stepped"
