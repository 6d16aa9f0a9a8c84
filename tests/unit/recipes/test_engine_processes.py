"""The engine's processes (recipes/engine/processes.py and launching.py): a SIGHUP inherited
as ignored stays ignored, a sink that fails does not block the stage, what leaves the stage's group is ended
with it, rank logs are appended, and Ctrl-C while the engine decides is one line."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import REPO, user_env
from recipes.engine.launching import Launcher
from recipes.engine.processes import Supervisor, Tee
from recipes.engine.stamps import Context


def python(code: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=user_env(PYTHONPATH=REPO),
        **kwargs,
    )


def test_a_sighup_inherited_as_ignored_stays_ignored_in_the_engine_and_its_children():
    """nohup ignores SIGHUP; the engine used to put its own handler in its place, and its children then died of it."""
    proc = python("""
        import signal, subprocess, sys
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
        from recipes.engine.processes import Supervisor
        s = Supervisor()
        s.install()
        child = "import os, signal, time; os.kill(os.getpid(), signal.SIGHUP); time.sleep(0.2); print('alive')"
        p = s.start([sys.executable, "-c", child], stdout=subprocess.PIPE)
        status, _ = s.wait([p])
        print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, status, p.stdout.read().decode().strip())
    """)
    assert proc.stdout.split() == ["True", "0", "alive"], proc.stderr


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGINT"])
def test_without_nohup_a_sighup_stops_the_stage_and_sigint_does_even_in_a_background_job(sig):
    """A shell's background job (`bash recipe.sh &`) inherits SIGINT ignored: `kill -INT` still stops the stage."""
    proc = python(f"""
        import signal, subprocess, sys, threading, os
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # without nohup, even where the tests run under it
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a non-interactive shell starts a background job
        from recipes.engine.processes import Supervisor, Interrupted
        s = Supervisor(grace=2)
        s.install()
        p = s.start([sys.executable, "-c", "import time; time.sleep(30)"])
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.{sig})).start()
        try:
            s.wait([p])
        except Interrupted as e:
            print(e, p.returncode)
    """)
    assert proc.stdout.split() == [sig, "-15"], proc.stderr


class Failing:
    def write(self, _):
        raise OSError(28, "No space left on device")

    def flush(self):
        pass


def test_a_sink_that_fails_is_dropped_and_the_pipe_drained_to_the_end(tmp_path):
    """tee used to die with its sink: the child then blocked on a full pipe, and the stage never ended."""
    supervisor = Supervisor()
    proc = supervisor.start(
        [sys.executable, "-c", "import sys; sys.stdout.write('x' * 1_000_000)"], stdout=subprocess.PIPE
    )
    kept = open(tmp_path / "log", "wb")
    failing = Failing()
    tee = Tee(proc.stdout, failing, kept)
    status, _ = supervisor.wait([proc])  # returns: the child was not left blocked on its pipe
    tee.join()
    kept.close()
    assert status == 0 and (tmp_path / "log").stat().st_size == 1_000_000
    assert tee.lost(failing).strerror == "No space left on device" and tee.lost(kept) is None


def test_what_leaves_the_stages_group_and_is_orphaned_is_ended_with_it(tmp_path):
    """torchrun starts its workers in sessions of their own: a worker whose torchrun died is still ended."""
    pid_file = tmp_path / "worker.pid"
    launcher = textwrap.dedent(f"""
        import subprocess, sys, time
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        open({str(pid_file)!r}, "w").write(str(worker.pid))
        time.sleep(60)
    """)
    proc = python(f"""
        import os, signal, subprocess, sys, time
        from recipes.engine.processes import Supervisor, Interrupted
        s = Supervisor(grace=1)
        s.install()
        p = s.start([sys.executable, "-c", {launcher!r}])
        while not os.path.exists({str(pid_file)!r}) or not open({str(pid_file)!r}).read():
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)  # the launcher dies first, its worker orphaned
        s.handle(signal.SIGINT, None)
        try:
            s.wait([p])
        except Interrupted:
            pass
        worker = int(open({str(pid_file)!r}).read())
        alive = os.path.exists(f"/proc/{{worker}}")
        print(alive and open(f"/proc/{{worker}}/stat").read().split(")")[-1].split()[0] != "Z")
    """)
    assert proc.stdout.split() == ["False"], proc.stdout + proc.stderr


@pytest.mark.parametrize("status", [0, 3])
def test_an_orphan_that_ends_in_the_stages_group_does_not_keep_the_stage_waiting(status):
    """srun leaves a helper of its own in the stage's group: orphaned, it is reparented to the engine (a subreaper),
    and once it ended its zombie kept the group alive, so a failed training never ended (the SLURM job stayed)."""
    proc = python(
        f"""
        import sys, time
        from recipes.engine.processes import Supervisor
        s = Supervisor(grace=1)
        s.install()
        p = s.start(["sh", "-c", "(sleep 0.3) & exit {status}"])
        started = time.monotonic()
        result, _ = s.wait([p])
        print(result, round(time.monotonic() - started) < 3)
    """,
        timeout=20,
    )
    assert proc.stdout.split() == [str(status), "True"], proc.stdout + proc.stderr


def test_rank_logs_are_appended_as_rank_0s_is(tmp_path):
    """The failure message points at LOG.rank<r>; a resumed run used to truncate them."""
    log = str(tmp_path / "train.log")
    ctx = Context(str(tmp_path / "work"), REPO, sys.executable)
    launcher = Launcher(ctx, Supervisor(), lambda *a, **k: None, {})
    command = [sys.executable, "-c", "import sys; print('rank', sys.argv[sys.argv.index('--distributed-rank') + 1])"]
    for _ in range(2):
        launcher.train_workers(2, log, command)
    assert open(log + ".rank1").read().split("\n")[:2] == ["rank 1", "rank 1"]
    assert open(log).read().count("rank 0") == 2


def test_a_training_started_again_from_nothing_writes_a_log_of_its_own(tmp_path):
    """Checkpoints removed, the stage run again: the earlier run's log (and its ranks') is kept beside it under its
    date, and the new run's log holds the new run only; a resumed run (checkpoint_last.pt there) appends."""
    log, save = str(tmp_path / "train.log"), tmp_path / "ckpt"
    ctx = Context(str(tmp_path / "work"), REPO, sys.executable)
    said = []
    launcher = Launcher(ctx, Supervisor(), lambda *a, **k: said.append(a[0]), {})
    command = [
        sys.executable,
        "-c",
        "import sys; print('rank', sys.argv[sys.argv.index('--distributed-rank') + 1])",
        "--save-dir",
        str(save),
    ]
    save.mkdir()
    launcher.train_workers(2, log, command)
    (save / "checkpoint_last.pt").write_text("")
    launcher.train_workers(2, log, command)  # resumed: appended
    assert open(log).read().count("rank 0") == 2 and not said
    (save / "checkpoint_last.pt").unlink()  # started again from nothing
    launcher.train_workers(2, log, command)
    [kept] = [n for n in os.listdir(tmp_path) if n.startswith("train.log.") and "rank" not in n]
    assert open(log).read().count("rank 0") == 1 and open(tmp_path / kept).read().count("rank 0") == 2
    assert (
        open(log + ".rank1").read().count("rank 1") == 1
        and open(tmp_path / (kept + ".rank1")).read().count("rank 1") == 2
    )
    assert said == [
        f"training starts from nothing (no checkpoint_last.pt): the earlier run's log is kept as {tmp_path / kept}"
    ]


@pytest.mark.parametrize("background", [False, True])
def test_ctrl_c_while_the_engine_decides_is_one_line_and_changes_nothing(tmp_path, background):
    def start():  # a shell's background job inherits SIGINT ignored; a terminal's foreground job does not
        signal.signal(signal.SIGINT, signal.SIG_IGN if background else signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-m", "recipes.engine", "run", "--work", str(tmp_path / "w"), "--repo", REPO],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=user_env(PYTHONPATH=REPO),
        preexec_fn=start,
    )
    time.sleep(2)  # it reads the plan, which never ends
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err.decode()
    assert err.decode().strip() == "FAILED: stopped by SIGINT before any stage ran; nothing was changed"
    assert not os.path.exists(tmp_path / "w")


def test_cpu_workers_share_the_cores_unless_told_their_threads(tmp_path, monkeypatch):
    """The engine asks CPU training processes to share this machine's cores with other runs'
    (transformer_plugin/patches/shared_cores.py); not GPU ones, nor where OMP_NUM_THREADS is given."""
    ctx = Context(str(tmp_path / "work"), REPO, sys.executable)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert Launcher(ctx, Supervisor(), print, {}).sharing() == {"TRANSFORMER_PLUGIN_SHARE_CORES": "1"}
    assert Launcher(ctx, Supervisor(), print, {}, gpus=1).sharing() == {}
    log = str(tmp_path / "train.log")
    Launcher(ctx, Supervisor(), lambda *a, **k: None, {}).train_workers(
        1, log, [sys.executable, "-c", "import os; print('share', os.environ.get('TRANSFORMER_PLUGIN_SHARE_CORES'))"]
    )
    assert "share 1" in open(log).read()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert Launcher(ctx, Supervisor(), print, {}).sharing() == {}
