"""How one stage's command runs (or is shown, in a dry run): a plain program, or one of the engine's verbs
(:mod:`.verbs`), and, on a node other than 0 of LAUNCH=torchrun, the wait for node 0's data."""

import contextlib
import glob
import os
import shlex
import subprocess
import sys
import time
from typing import Callable, Dict, Optional, Sequence

from recipes.engine.decisions import changed_words
from recipes.engine.failures import StageFailed, exit_status, training_failure
from recipes.planner.layout import free_port, worker_commands, worker_threads
from recipes.engine.processes import Interrupted, Supervisor, Tee
from recipes.planner.model import flag
from recipes.engine.stamps import Context, Stage, identity, read_stamp
from recipes.engine.verbs import call

# torchrun gives its workers 30 s to end after SIGTERM before it kills them: a stage it launches gets longer
LAUNCHER_GRACE = 40.0


def shown(argv: Sequence[str]) -> str:
    return "+ " + shlex.join(argv)


def set_aside_earlier_log(log: str, argv: Sequence[str]) -> Optional[str]:
    """A training that starts from nothing (no checkpoint_last.pt in its --save-dir) writes a log of its own: the log
    an earlier run left at LOG (and its ranks' LOG.rank*) is renamed LOG.<its last write's date and time> first, so
    that the report reads one run's clocks, curves and early stop. A resumed run appends to LOG. Returns the new
    name."""
    save_dir = flag(argv, "--save-dir")  # the recipes give one; without it, nothing is set aside
    if save_dir is None or os.path.exists(os.path.join(save_dir, "checkpoint_last.pt")):
        return None
    if not os.path.exists(log) or os.path.getsize(log) == 0:
        return None
    kept = f"{log}.{time.strftime('%Y%m%d-%H%M%S', time.localtime(os.path.getmtime(log)))}"
    ranks = [p for p in glob.glob(glob.escape(log) + ".rank*") if p[len(log) + len(".rank") :].isdigit()]
    for path in [log, *sorted(ranks)]:
        os.replace(path, kept + path[len(log) :])
    return kept


class Launcher:
    """Runs a stage's command under ``supervisor``; ``say`` prints for people."""

    def __init__(
        self,
        ctx: Context,
        supervisor: Supervisor,
        say: Callable[..., None],
        layout_vars: Dict[str, str],
        gpus: int = 0,
        per_node: int = 1,
    ):
        self.ctx, self.supervisor, self.say = ctx, supervisor, say
        self.layout_vars, self.gpus, self.per_node = layout_vars, gpus, per_node
        self.deadline: Optional[float] = None  # node 0's data: DIST_TIMEOUT from the first wait

    def make_directories(self, argv: Sequence[str]) -> None:
        """WORK, and the directories of the files the engine's verbs write (capture's output, a training's
        log) and of a training's --save-dir: made when the first stage that writes there runs."""
        os.makedirs(self.ctx.work, exist_ok=True)
        c = call(argv)
        for path in c.written_files():
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if c.trains:
            for i, word in enumerate(argv[:-1]):
                if word == "--save-dir":
                    os.makedirs(argv[i + 1], exist_ok=True)

    def show(self, argv: Sequence[str]) -> None:
        c = call(argv)
        name = c.verb.name if c.verb else ""
        if name == "capture":
            self.say(shown(c.command))
            self.say(f"  > {c.args['file']}")
        elif name == "train_workers" and int(c.args["n"]) > 1:
            n = int(c.args["n"])
            for worker in worker_commands(n, c.command, "PORT"):
                self.say(shown(["env", f"OMP_NUM_THREADS={worker_threads(n)}", *worker]))
        else:
            self.say(shown(c.command))

    def run(self, argv: Sequence[str]) -> None:
        c = call(argv)
        name = c.verb.name if c.verb else ""
        if name == "capture":  # FILE appears only when COMMAND succeeded; nothing half-written stays
            out = c.args["file"]
            try:
                with open(out + ".tmp", "wb") as f:
                    self.expect_ok(self.supervisor.wait([self.supervisor.start(c.command, stdout=f)]))
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(out + ".tmp")
                raise
            os.replace(out + ".tmp", out)
        elif name == "train_workers":
            self.train_workers(int(c.args["n"]), c.args["log"], c.command)
        elif name == "launch_training":
            self.launch_training(c.args["log"], c.command)
        else:
            self.expect_ok(self.supervisor.wait([self.supervisor.start(c.command)]))

    @staticmethod
    def expect_ok(result) -> None:
        status, _ = result
        if status != 0:
            raise StageFailed(exit_status(status))

    def _logged(self, log: str, tees, main_log) -> str:
        """What to add to a failure: the log that could not be written (a full disk), if one could not."""
        for tee in tees:
            error = tee.lost(main_log)
            if error is not None:
                return f" (the log {log} could not be written to the end: {error.strerror or error})"
        return ""

    def _fresh_log(self, log: str, argv: Sequence[str]) -> None:
        kept = set_aside_earlier_log(log, argv)
        if kept:
            self.say(f"training starts from nothing (no checkpoint_last.pt): the earlier run's log is kept as {kept}")

    def sharing(self) -> Dict[str, str]:
        """CPU training processes share this machine's cores with those of other runs
        (transformer_plugin/patches/shared_cores.py), unless OMP_NUM_THREADS says how many threads to take."""
        return {} if self.gpus > 0 or os.environ.get("OMP_NUM_THREADS") else {"TRANSFORMER_PLUGIN_SHARE_CORES": "1"}

    def train_workers(self, n: int, log: str, argv: Sequence[str]) -> None:
        """N data-parallel processes on this machine, each with an equal share of the CPU cores as torch
        threads; rank 0's output shown and appended to LOG, rank r's appended to LOG.rank<r>. N=1 runs ARGV once
        (a launcher that starts its own processes: fairseq on GPUs), its output shown and appended to LOG."""
        sinks = []
        self._fresh_log(log, argv)
        with open(log, "ab") as main_log:
            if n <= 1:
                env = dict(os.environ, **self.sharing())
                proc = self.supervisor.start(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                procs = [proc]
            else:
                env = dict(os.environ, OMP_NUM_THREADS=worker_threads(n), **self.sharing())
                procs = []
                for r, command in enumerate(worker_commands(n, argv, str(free_port()))):
                    if r == 0:
                        procs.append(
                            self.supervisor.start(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                        )
                    else:
                        sink = open(f"{log}.rank{r}", "ab")
                        sinks.append(sink)
                        procs.append(self.supervisor.start(command, env=env, stdout=sink, stderr=subprocess.STDOUT))
            tees = [Tee(procs[0].stdout, sys.stdout.buffer, main_log)]
            try:
                status, _ = self.supervisor.wait(procs)
            finally:
                for tee in tees:
                    tee.join()
                for sink in sinks:
                    sink.close()
            lost = self._logged(log, tees, main_log)
        if status != 0:
            where = f"see {log} and {log}.rank*" if n > 1 else f"see {log}"
            raise StageFailed(
                exit_status(status),
                f"a training {'worker' if n > 1 else 'process'} failed (exit {exit_status(status)}): {where}{lost}",
            )
        if lost:
            self.say(f"warning: {lost.strip(' ()')}", err=True)

    def launch_training(self, log: str, argv: Sequence[str]) -> None:
        """A launcher (torchrun, srun) that starts the training processes, its output shown and appended
        to LOG. CPU workers get their share of the cores as torch threads. When training fails, says why,
        from what the launcher printed (training_failure), and how to resume."""
        self._fresh_log(log, argv)
        offset = os.path.getsize(log) if os.path.exists(log) else 0
        env = dict(os.environ)
        if self.gpus == 0:
            env["OMP_NUM_THREADS"] = worker_threads(self.per_node)
        with open(log, "ab") as f:
            proc = self.supervisor.start(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            tee = Tee(proc.stdout, sys.stdout.buffer, f)
            try:
                status, _ = self.supervisor.wait([proc], grace=LAUNCHER_GRACE)
            finally:
                tee.join()
            lost = self._logged(log, [tee], f)
        if status != 0:
            with open(log, "rb") as f:
                f.seek(offset)
                output = f.read().decode("utf-8", errors="replace")
            launch = self.ctx.launch
            again = " on every machine" if launch == "torchrun" else " (sbatch)" if launch == "slurm" else ""
            raise StageFailed(
                exit_status(status),
                f"training stopped: {training_failure(output, self.layout_vars)}. Once the cause is gone, run the "
                f"same command again{again}: training resumes from checkpoint_last.pt (full log: {log}){lost}",
            )
        if lost:
            self.say(f"warning: {lost.strip(' ()')}", err=True)

    def wait_for_node0(self, stage: Stage, dry_run: bool) -> None:
        """A data stage on a node other than 0 (LAUNCH=torchrun): wait until node 0 has done it with the
        same settings (its stamp), at most DIST_TIMEOUT seconds from the first wait."""
        rank, timeout = self.ctx.node_rank, self.ctx.dist_timeout
        stamp = os.path.join(self.ctx.work, ".done", stage.id)
        self.say(f"\n==== stage {stage.id}: {stage.title} (node 0's) ====")
        if dry_run:
            self.say(f"node {rank} waits until node 0 has done this stage ({stamp}), at most DIST_TIMEOUT={timeout} s:")
            self.show(stage.argv)
            return
        if self.deadline is None:
            self.deadline = time.monotonic() + timeout
        said = False
        while not os.path.exists(stamp):
            if self.supervisor.signum is not None:
                raise Interrupted(self.supervisor.signum)
            if time.monotonic() >= self.deadline:
                raise StageFailed(
                    1,
                    f"node {rank} waited DIST_TIMEOUT={timeout} s for node 0's stage {stage.id} ({stamp}): start "
                    "node 0 first, on storage every machine sees, or prepare the data beforehand (DATA_ONLY=1 on node "
                    "0)",
                )
            if not said:
                self.say(
                    f"node {rank}: waiting for node 0 to do this stage ({stamp}), at most DIST_TIMEOUT={timeout} s"
                )
                said = True
            time.sleep(0.5)
        done = read_stamp(stamp)
        theirs, ours = done.identity["command"], identity(stage, self.ctx)["command"]
        # node 0's inputs are on node 0: the paths this node names may differ
        same = [w for w in theirs if not w.startswith("$INPUT")] == [w for w in ours if not w.startswith("$INPUT")]
        if not same:
            raise StageFailed(
                2,
                f"node 0 did stage {stage.id} with other settings: {changed_words(theirs, ours)}. "
                "Run every machine with the same variables and WORK",
            )
        self.say("node 0 has done it with these settings")
