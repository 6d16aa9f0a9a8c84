"""Every stage decided before any work: skip it (done with these settings and inputs), run it (never done), redo
it (its command or the files it reads changed, or a stage whose outputs it reads is redone), stop (a training
stage that would be redone: fairseq-train would continue its old checkpoints under the new settings), or wait
for node 0's (data, on another node of LAUNCH=torchrun).

A training that was stopped before it was done (a signal, a crash, a session that ended) left checkpoints, and
its ``ID.begun`` stamp says under which settings they were trained: run again with the same ones it continues
them; with others (another MAX_UPDATE, and so another warm-up; another DROPOUT; an edited corpus) it stops, as a
training done would, rather than continue those checkpoints under settings they were not trained with.

Which stage reads which: a stage reads an earlier stage's outputs (:meth:`Stage.outputs`) when a path it names
or declares reading (:meth:`Stage.names`) is one of them, lies inside one, holds one, or is the prefix of one
(``--trainpref spm/train.sp`` reads ``spm/train.sp.en``). A stage whose outputs are unknown is read by every
stage after it. A change redoes what reads it, and nothing else.
"""

import difflib
import os
import re
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from recipes.engine.stamps import Context, Done, Stage, identity, read_stamp

CHANGED = "its settings changed since it was done: "  # then the settings, named
BEGUN = ".begun"  # beside a training's stamp: written as it starts, removed once it is done


def _differences(before: Sequence[str], after: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The words of ``before`` that ``after`` replaced or dropped, and those it put in their place or
    added, in order (a value that changed is found where it stands, even if it is a word elsewhere too)."""
    removed, added = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op != "equal":
            removed += before[i1:i2]
            added += after[j1:j2]
    return removed, added


def changed_words(before: Sequence[str], after: Sequence[str]) -> str:
    old, new = _differences(before, after)
    if not old and not new:
        return "the same words in another order"
    return f"was {' '.join(old[:8]) or '(nothing)'}, now {' '.join(new[:8]) or '(nothing)'}"


def changed_settings(before: Sequence[str], after: Sequence[str], old: Dict[str, str], new: Dict[str, str]) -> str:
    """The recipe's variables whose values differ between ``old`` and ``new`` and which explain how the
    command changed from ``before`` to ``after``: a variable is named only if the command lost its old
    value and gained its new one (an empty value puts nothing on it), so that one whose value changed
    elsewhere (GPUS on another machine) is not."""
    removed, added = _differences(before, after)

    def within(value: str, words: Sequence[str]) -> bool:  # each part of value, as a word or inside one
        return all(any(re.search(rf"(?<![\w.]){re.escape(part)}(?![\w.])", w) for w in words) for part in value.split())

    found = []
    for name in sorted(set(old) & set(new)):
        was, now = old[name], new[name]
        if was == now:
            continue
        if (not was or within(was, removed)) and (not now or within(now, added)):
            found.append(f"{name} was {was or '(empty)'}, now {now or '(empty)'}")
    return ", ".join(found)


def _files_changed(old: Sequence[Dict], new: Sequence[Dict]) -> List[str]:
    before = {i["path"]: i["digest"] for i in old}
    return [i["path"] for i in new if before.get(i["path"]) != i["digest"]] + [
        p for p in before if p not in {i["path"] for i in new}
    ]


def why_changed(done: Done, stage: Stage, ctx: Context, now: Dict) -> Tuple[str, bool]:
    """Why the stage must be redone ('' if it need not be), and whether a stamp that holds is to be rewritten
    (one of an earlier version of the stamps)."""
    if done.unread:
        return f"its stamp could not be read: {done.unread}", False
    before, after = done.identity["command"], now["command"]
    if before != after:
        found = changed_settings(before, after, done.settings, ctx.settings)
        return (
            CHANGED + found
            if found
            else f"its settings or inputs changed since it was done: {changed_words(before, after)}"
        ), False
    old_inputs, new_inputs = done.identity["inputs"], now["inputs"]
    changed = [new["path"] for old, new in zip(old_inputs, new_inputs) if old["digest"] != new["digest"]]
    if changed or len(old_inputs) != len(new_inputs):
        return (
            f"its inputs changed since it was done: the content of {', '.join(changed) or 'its inputs'} changed",
            False,
        )
    if "reads" not in done.identity:  # a stamp from before the engine digested declared reads (version 2)
        return "", True
    changed = _files_changed(done.identity["reads"], now["reads"])
    if changed:
        return f"its inputs changed since it was done: the content of {', '.join(changed)} changed", False
    return "", False


def _related(output: str, name: str) -> bool:
    """Whether naming ``name`` reads ``output`` (both absolute): the same, one inside the other, or a prefix of it."""
    return output == name or any(
        a.startswith(b + sep) for a, b in ((output, name), (name, output)) for sep in (os.sep, ".")
    )


def reads_from(stage: Stage, earlier: Stage, work: str) -> Optional[str]:
    """The output of ``earlier`` that ``stage`` reads, '' where ``earlier`` declares no outputs (then every stage
    after it may read them), or None."""
    outputs = earlier.outputs()
    if not outputs or any(os.path.abspath(o) in ("/", os.path.abspath(work)) for o in outputs):  # none, or all of WORK
        return ""
    names = [os.path.abspath(n) for n in stage.names()]
    for output in outputs:
        if any(_related(os.path.abspath(output), n) for n in names):
            return output
    return None


@dataclass
class Decision:
    action: str  # skip | run | redo | stop | wait
    why: str = ""
    identity: Optional[Dict] = None
    upgrade: bool = False  # an old stamp that holds: rewrite it when skipped
    origin: Tuple[str, str] = ("", "")  # the stage whose own change this decision comes from, and that change
    begun: bool = False  # a stop of a training begun and not done (its checkpoints, not its stamp)


def _summary(why: str) -> str:
    """A stage's own reason, as a cause of another's: 'VOCAB_SIZE was 500, now 400', 'the content of F changed'."""
    return why.split(": ", 1)[1] if why.startswith("its ") else why


def decide(stages: Sequence[Stage], ctx: Context) -> List[Decision]:
    """What a run does with each stage (see the module's docstring)."""
    decisions: List[Decision] = []
    for k, stage in enumerate(stages):
        if stage.kind == "data" and ctx.waits_for_node0:
            decisions.append(Decision("wait"))
            continue
        now = identity(stage, ctx)
        done = read_stamp(os.path.join(ctx.stamp_dir, stage.id))
        begun = None  # a training stopped before it was done, whose checkpoints fairseq-train would continue
        if done is None and stage.trains and os.path.exists(os.path.join(save_dir(stage), "checkpoint_last.pt")):
            begun = read_stamp(os.path.join(ctx.stamp_dir, stage.id + BEGUN))
        kept = done or begun
        why, upgrade = why_changed(kept, stage, ctx, now) if kept else ("", False)
        if begun:
            why, upgrade = why.replace("since it was done", "since it was begun"), False
        origin = (stage.id, _summary(why) if why else "it was never done")
        if kept and not why:
            for earlier, decision in zip(stages[:k], decisions):
                path = reads_from(stage, earlier, ctx.work) if decision.action in ("run", "redo", "stop") else None
                if path is not None:
                    origin = decision.origin
                    where = "" if origin[0] == earlier.id else f", in stage {origin[0]}"
                    reads = (
                        f"whose outputs it reads ({ctx.placed(path)})"
                        if path
                        else "whose outputs it may read (it declares none)"
                    )
                    why = f"stage {earlier.id}, {reads}, is redone ({origin[1]}{where})"
                    break
        if done and not why:
            decisions.append(Decision("skip", identity=now, upgrade=upgrade))
        elif why and stage.trains:
            decisions.append(Decision("stop", why, now, origin=origin, begun=begun is not None))
        else:
            decisions.append(Decision("redo" if why else "run", why, now, origin=origin))
    return decisions


def save_dir(stage: Stage) -> str:
    found = "checkpoints"  # fairseq's default --save-dir
    for i, word in enumerate(stage.argv[:-1]):
        if word == "--save-dir":
            found = stage.argv[i + 1] or found
    return found


def stop_message(stage: Stage, why: str, ctx: Context, begun: bool = False) -> str:
    checkpoints = shlex.quote(save_dir(stage))
    if begun:
        stamp = shlex.quote(os.path.join(ctx.stamp_dir, stage.id + BEGUN))
        return (
            f"stage {stage.id} (training) was begun and stopped before it was done, but {why}. Its checkpoints in\n"
            f"{checkpoints} were trained under the old settings, and fairseq-train would continue them under the new.\n"
            f"Run with the old settings to continue them. To train from scratch, delete {checkpoints} and {stamp};\n"
            f"to continue them under the new settings deliberately, delete {stamp} only. Or set another WORK."
        )
    stamp = shlex.quote(os.path.join(ctx.stamp_dir, stage.id))
    return (
        f"stage {stage.id} (training) was done, but {why}. fairseq-train would continue its checkpoints under the new\n"
        f"settings. To train from scratch, delete {checkpoints} and {stamp}; to continue those checkpoints\n"
        f"deliberately (a larger MAX_UPDATE, say), delete {stamp} only. Or set another WORK."
    )
