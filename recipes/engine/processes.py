"""The processes of a stage: started in a process group of their own, ended together.

Each child gets SIGTERM if the engine dies (PR_SET_PDEATHSIG), and the engine is a subreaper
(PR_SET_CHILD_SUBREAPER): a process that leaves the stage's group (torchrun starts its workers in sessions of
their own) and is orphaned stays the engine's descendant, so that none is left behind. SIGINT (Ctrl-C), SIGTERM
and SIGHUP send SIGTERM to the group, then SIGKILL to it and to every descendant after ``grace`` seconds. A
SIGHUP the engine inherited as ignored stays ignored, here and in its children (``nohup`` ignores it: a run so
started outlives the terminal, as a nohup'd fairseq-train does).
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
try:  # looked up once, here: a child between fork and exec must not load anything
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def become_subreaper() -> None:
    """Orphaned descendants are reparented to this process rather than to init."""
    if _prctl is not None:
        _prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(root: int) -> Set[int]:
    """The PIDs below ``root`` in the process tree (from /proc; empty where there is none)."""
    children: Dict[int, List[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{name}/stat", "rb") as f:
                        ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(name))
    found, todo = set(), [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Supervisor:
    """Starts a stage's processes each in the stage's process group, and ends that group when asked to
    stop (a signal) or when one of the processes fails: SIGTERM, then SIGKILL after ``grace`` seconds
    (longer where the stage's launcher needs longer to end its own workers: :meth:`wait`'s ``grace``)."""

    def __init__(self, grace: float = 10.0):
        self.grace = grace
        self.group: Optional[int] = None
        self.signum: Optional[int] = None
        self.stop_sent = 0.0
        self.ignored: Tuple[int, ...] = ()
        self.children: Set[int] = set()

    def handle(self, signum, _frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:  # a second Ctrl-C: at once
            self.kill_group(signal.SIGKILL)
        self.signum = self.signum or signum
        self.stop_group()

    def install(self) -> None:
        """Our handler for SIGINT, SIGTERM and SIGHUP, except a SIGHUP inherited as ignored (nohup's). SIGINT is
        handled even where it was inherited as ignored (a shell's background job): `kill -INT` still stops a stage."""
        self.ignored = (signal.SIGHUP,) if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else ()
        for sig in STOP_SIGNALS:
            if sig not in self.ignored:
                signal.signal(sig, self.handle)
        become_subreaper()

    def start(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None, **kwargs) -> subprocess.Popen:
        if self.signum is not None:
            raise Interrupted(self.signum)
        group = 0 if self.group is None else self.group
        us, ignored = os.getpid(), self.ignored

        def in_the_child():  # between fork and exec: end with us, even if we ended before this ran
            die_with_parent(signal.SIGTERM)
            for sig in ignored:  # as we were given them (Python's own handlers do not survive exec anyway)
                signal.signal(sig, signal.SIG_IGN)
            if os.getppid() != us:
                os._exit(1)

        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, env=env, process_group=group, preexec_fn=in_the_child, **kwargs
        )
        self.children.add(proc.pid)
        if self.group is None:
            self.group = proc.pid
        return proc

    def kill_group(self, sig: int) -> None:
        if self.group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.group, sig)

    def stop_group(self) -> None:
        if self.group is not None and not self.stop_sent:
            self.stop_sent = time.monotonic()
            self.kill_group(signal.SIGTERM)

    def group_alive(self) -> bool:
        """Whether a process of the stage's group still runs. A zombie does not count: an orphan of the group
        (srun leaves one) that ended is reparented to us and reaped here, else it would keep the group alive."""
        if self.group is None:
            return False
        try:
            os.killpg(self.group, 0)
        except (ProcessLookupError, PermissionError):
            return False
        self._reap()
        return _group_runs(self.group)

    def wait(
        self, procs: Sequence[subprocess.Popen], grace: Optional[float] = None
    ) -> Tuple[int, Optional[subprocess.Popen]]:
        """Wait for ``procs``; returns (status, the first that failed). The first failure stops the others;
        a signal stops them all and raises Interrupted once none is left (after SIGKILL if need be)."""
        grace = max(self.grace, grace or 0)
        failed: Optional[subprocess.Popen] = None
        while True:
            if self.signum is not None:  # a signal that came while the processes were being started
                self.stop_group()
            for p in procs:
                if p.poll() is not None and p.returncode != 0 and failed is None and self.signum is None:
                    failed = p
                    self.stop_group()
            running = [p for p in procs if p.poll() is None]
            if not running and (self.signum is None and failed is None or not self.group_alive()):
                break
            if self.stop_sent and time.monotonic() - self.stop_sent > grace:
                self.kill_group(signal.SIGKILL)
            time.sleep(0.05)
        self.end_leftovers()
        if self.signum is not None:
            raise Interrupted(self.signum)
        if failed is not None:
            return failed.returncode, failed
        return 0, None

    def end_leftovers(self) -> None:
        """What the stage's processes left running: in its group (a data loader's workers), or outside it
        (torchrun's workers, in sessions of their own): SIGTERM, then SIGKILL after ``grace`` seconds."""
        left = descendants(os.getpid())
        if self.group_alive() or left:
            self.kill_group(signal.SIGTERM)
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            while (self.group_alive() or self._alive(left)) and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.05)
            self.kill_group(signal.SIGKILL)
            for pid in descendants(os.getpid()) | left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self._reap()
        self.group, self.stop_sent = None, 0.0

    def _alive(self, pids: Set[int]) -> bool:
        return any(os.path.exists(f"/proc/{pid}") and not _zombie(pid) for pid in pids)

    def _reap(self) -> None:
        """Orphans reparented to us (a subreaper) that have ended; not our own children, whose Popen reaps them."""
        for pid in descendants(os.getpid()):
            if pid not in self.children:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)


def _group_runs(group: int) -> bool:
    """Whether a process of process group ``group`` runs (is not a zombie), from /proc."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{name}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if int(fields[2]) == group and fields[0] != b"Z":
                        return True
    return False


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return False


class Tee:
    """Copies a pipe to sinks (binary files) as it comes, and drains it to the end whatever a sink does: a sink
    that fails (a closed terminal, a full disk under a log) is dropped and its error kept (``errors``), so the
    child never blocks on a full pipe."""

    def __init__(self, source, *sinks):
        self.source, self.sinks = source, list(sinks)
        self.errors: List[Tuple[object, OSError]] = []
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        fd = self.source.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            for sink in list(self.sinks):
                try:
                    sink.write(chunk)
                    sink.flush()
                except (OSError, ValueError) as e:
                    self.sinks.remove(sink)
                    self.errors.append((sink, e if isinstance(e, OSError) else OSError(str(e))))
        self.source.close()

    def join(self, timeout: float = 5) -> None:
        self.thread.join(timeout)

    def lost(self, sink) -> Optional[OSError]:
        """The error that dropped ``sink``, if one did."""
        return next((e for s, e in self.errors if s is sink), None)
