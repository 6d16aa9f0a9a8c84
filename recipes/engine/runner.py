"""The run: every stage decided (:mod:`.decisions`), the disk checked against what the stages that run will write
(:mod:`.space`), then each stage run in order (:mod:`.launching`), or shown in a dry run, its stamp written when it
succeeds. A failure or a signal stops the recipe, saying which stage, why, and how to resume."""

import contextlib
import os
import shutil
import signal
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from recipes.engine import space
from recipes.engine.decisions import BEGUN, Decision, decide, save_dir, stop_message
from recipes.engine.failures import StageFailed
from recipes.engine.launching import Launcher, shown
from recipes.engine.processes import Interrupted, Supervisor, die_with_parent
from recipes.engine.stamps import Context, Stage, write_stamp
from recipes.planner import repick
from recipes.records import read_records


def say(text: str, err: bool = False) -> None:
    """Print for people; a terminal that is gone (a hang-up under nohup's SIGHUP) does not stop the run."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr if err else sys.stdout, flush=True)


class Runner:
    """Runs (or, in a dry run, shows) the plan's stages in order, after deciding every one of them."""

    def __init__(
        self,
        stages: Sequence[Stage],
        ctx: Context,
        dry_run: bool,
        layout_vars: Dict[str, str],
        gpus: int = 0,
        per_node: int = 1,
        grace: float = 10.0,
        parent_pid: int = 0,
        vocabulary: str = "",
    ):
        self.stages, self.ctx, self.dry_run, self.parent_pid = list(stages), ctx, dry_run, parent_pid
        self.vocabulary = vocabulary  # the recipe's VOCAB_SIZE (given, or its plan's): the checkpoints' size
        self.supervisor = Supervisor(grace)
        self.launcher = Launcher(ctx, self.supervisor, say, layout_vars, gpus, per_node)

    def check(self) -> Tuple[List[Decision], List[str]]:
        decisions = decide(self.stages, self.ctx)
        stops = [
            stop_message(s, d.why, self.ctx, d.begun) for s, d in zip(self.stages, decisions) if d.action == "stop"
        ]
        return decisions, stops

    def space(self, decisions: Sequence[Decision]) -> Tuple[space.Estimate, int]:
        """What the stages that will run write under WORK, and how much WORK's disk has free."""
        runs = [
            (s.id, s.argv, d.action in ("run", "redo", "stop"), s.reads)
            for s, d in zip(self.stages, decisions)
            if d.action != "wait"
        ]
        plan = space.estimate(runs, int(self.vocabulary) if self.vocabulary.isdigit() else None)
        where = self.ctx.work_abs
        while not os.path.exists(where):
            where = os.path.dirname(where)
        return plan, shutil.disk_usage(where).free

    def run(self, check_only: bool = False) -> int:
        decisions, stops = self.check()
        if check_only:
            for message in stops:
                say(message, err=True)
            return 3 if stops else 0
        if stops and not self.dry_run:
            for message in stops:
                say(message, err=True)
            say(
                "FAILED: stopped before any work (nothing was changed): a training stage would have to be redone",
                err=True,
            )
            return 3
        plan, free = self.space(decisions)
        if self.dry_run:
            say("\n==== space ====\n" + "\n".join(space.lines(plan, free, self.ctx.work)))
        elif plan.needed > free and os.environ.get("IGNORE_FREE_SPACE", "0") != "1":
            say("\n".join(space.lines(plan, free, self.ctx.work)), err=True)
            say(
                f"FAILED: stopped before any work: {self.ctx.work} needs about {space.size(plan.needed)} free and its "
                "disk has "
                f"{space.size(free)}. Make room, set WORK to a larger disk, or keep fewer checkpoints (AVERAGE_LAST); "
                "IGNORE_FREE_SPACE=1 goes on regardless",
                err=True,
            )
            return 4
        if not self.dry_run:
            self.supervisor.install()
            die_with_parent(signal.SIGTERM)
            if self.parent_pid and os.getppid() != self.parent_pid:  # the recipe died before we asked
                self.supervisor.signum = signal.SIGTERM
        current = None
        try:
            for stage, decision in zip(self.stages, decisions):
                current = stage
                self.one(stage, decision)
            current = None
            if self.supervisor.signum is not None:  # after the last stage: the recipe must not go on
                raise Interrupted(self.supervisor.signum)
        except Interrupted as e:
            say(self.interrupted_message(current, e.signum), err=True)
            return 128 + e.signum
        except Repicked as e:
            say(str(e))
            return repick.EXIT
        except StageFailed as e:
            if e.message:
                say(e.message, err=True)
            say(f"FAILED: stage {current.id}: {current.title} (exit {e.status})", err=True)
            return e.status if e.status != repick.EXIT else 1  # EXIT: the recipe starts again, for a re-pick only
        except OSError as e:  # the stage's stamp, log or output could not be written
            say(
                f"FAILED: stage {current.id}: {current.title}: "
                f"{e.strerror or e}{f': {e.filename}' if e.filename else ''}",
                err=True,
            )
            return 1
        finally:
            if self.ctx.digest_cache and not self.dry_run:
                with contextlib.suppress(OSError):
                    self.ctx.digest_cache.save()
        return 0

    @staticmethod
    def interrupted_message(stage: Optional[Stage], signum: int) -> str:
        name = signal.Signals(signum).name
        if stage is None:
            return f"FAILED: stopped by {name} between stages"
        resume = (
            "training continues from the last checkpoint it saved (checkpoint_last.pt)"
            if stage.trains
            else "this stage starts over, and the stages done before it are kept"
        )
        return (
            f"FAILED: stage {stage.id}: {stage.title}: stopped by {name}; every process it started has ended. "
            f"Run the same command again to resume: {resume}"
        )

    def one(self, stage: Stage, decision: Decision) -> None:
        if decision.action == "wait":
            return self.launcher.wait_for_node0(stage, self.dry_run)
        say(f"\n==== stage {stage.id}: {stage.title} ====")
        stamp = os.path.join(self.ctx.stamp_dir, stage.id)
        if decision.action == "skip":
            say(f"done already with these settings: {'a real run skips this stage' if self.dry_run else 'skipping'}")
            if not self.dry_run and decision.upgrade:
                write_stamp(stamp, stage, decision.identity, self.ctx)
            if not self.dry_run:
                return
        elif decision.action == "stop":  # only in a dry run: a real run stopped before any work
            say(f"(a real run stops here: {stop_message(stage, decision.why, self.ctx, decision.begun)})")
        elif decision.action == "redo":
            say(f"{'a real run redoes this stage' if self.dry_run else 'redoing it'}: {decision.why}")
        if self.dry_run:
            if not stage.outputs():
                say(
                    "(it declares no outputs: every stage after it is taken to read them; stage --writes PATH says "
                    "what it writes)"
                )
            if stage.clears:
                say(shown(["rm", "-rf", stage.clears]))
            self.launcher.show(stage.argv)
            return
        with contextlib.suppress(FileNotFoundError):
            os.remove(stamp)
        if stage.clears:
            shutil.rmtree(stage.clears, ignore_errors=True)
        self.launcher.make_directories(stage.argv)
        if stage.trains:  # the settings its checkpoints are trained under, should it stop before it is done
            write_stamp(stamp + BEGUN, stage, decision.identity, self.ctx)
        began, started = time.monotonic(), time.time()
        try:
            self.launcher.run(stage.argv)
        except StageFailed:  # fairseq-train's EXIT, or a launcher's own status for it (torchrun, srun)
            if stage.trains and repick.asked(save_dir(stage), since=started):
                self.set_aside(stage, stamp + BEGUN, time.monotonic() - began)
            raise
        write_stamp(stamp, stage, decision.identity, self.ctx)
        with contextlib.suppress(FileNotFoundError):
            os.remove(stamp + BEGUN)

    def set_aside(self, stage: Stage, begun: str, seconds: float) -> None:
        """A training stopped for its model to be picked again (recipes/planner/repick.py): its checkpoints set
        aside, its begun stamp removed (the next plan's training starts afresh), and the recipe told to start again."""
        checkpoints = save_dir(stage)
        record = repick.set_aside(self.ctx.work_abs, checkpoints, seconds)
        with contextlib.suppress(FileNotFoundError):
            os.remove(begun)
        raise Repicked(
            f"stage {stage.id}: training stopped after {record.get('at_update', 0):,} updates for the model to be "
            f"picked again at the speed it measured ({record.get('factor', 0):.2f} times the plan's seconds a "
            f"target token); its checkpoints are in {checkpoints}{repick.SET_ASIDE}. The recipe starts again with "
            "the plan for the time left"
        )


class Repicked(Exception):
    """A training stopped for a re-pick, its checkpoints set aside: the recipe starts again."""


def read_plan(data: bytes) -> Tuple[List[Stage], Dict[str, str], List[str]]:
    """lib.sh's plan (:func:`recipes.records.read_records`), its stages as :class:`Stage`."""
    stages, variables, sources = read_records(data)
    return [Stage(*record) for record in stages], variables, sources
