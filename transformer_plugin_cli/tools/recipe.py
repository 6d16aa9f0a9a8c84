"""The recipes' engine: what recipes/lib.sh asks of Python. The recipes declare their stages in shell;
this module checks every stage before any work, runs them in order, and stops every process a stage
started when the recipe is interrupted.

    python -m transformer_plugin_cli.tools.recipe run --work W --repo R --python PY ... < PLAN
    python -m transformer_plugin_cli.tools.recipe layout --launch local --gpus 8 ... --tokens 25000 --cap 4096
    python -m transformer_plugin_cli.tools.recipe why-training-failed LOG OFFSET --launch torchrun ...

Not a console script: lib.sh runs it with the environment's python. Nothing here imports torch or
fairseq (it runs at every start of a recipe), except :func:`cuda_devices` in a real run on GPUs.

**Stages and stamps.** A stage is done when its stamp, ``$WORK/.done/ID``, says it was made by what the
stage would make now: a JSON object holding the stage's command as a list (:func:`identity`: where the
checkout, the Python environment and ``WORK`` lie is left out, and so are the options that change only
how a stage runs, :data:`HOW_ONLY_OPTIONS`), the digests of its inputs outside ``WORK`` and the checkout
(the content of the files: another copy of the same archives is the same input), and the recipe's
settings with their values (to name the one that changed). A stage whose identity changed is redone,
and so is every stage after it (they read its outputs); a training stage that would be redone stops
the recipe before any work, naming the setting, because fairseq-train would continue the old
checkpoints under the new settings. Stamps written before this module (a quoted command line, with
``ID.settings`` beside it) still count, and are rewritten as JSON when their stage is skipped.

**Processes.** Each stage runs in a process group of its own, as a child that gets SIGTERM if this
process dies (PR_SET_PDEATHSIG), and this process gets SIGTERM if the recipe's shell dies. SIGINT
(Ctrl-C), SIGTERM and SIGHUP, here or through the shell's death, send SIGTERM to the stage's group (CPU
workers, torchrun and its workers, fairseq's own spawn, srun, which passes it to its tasks), then
SIGKILL after ``--grace`` seconds, and the recipe stops, saying where a re-run resumes. Local CPU workers
are started here too (:meth:`Runner.train_workers`), rank 0's output shown and appended to the log, each other
rank's in ``LOG.rank<r>``; the first to fail stops the others. A small supervisor rather than
``torchrun --standalone`` for them, because the recipe's own death must end torchrun as well (it does not
notice its parent dying), and each worker's exit status and log stay as they were.
"""

import argparse
import contextlib
import ctypes
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

# ---- what a stage makes ---------------------------------------------------------------------------

# options that change how a stage runs, not what it makes, left out of its identity with their values:
# the processes and threads of data preparation (sentencepiece's BPE is the same for any thread count; a
# unigram model's scores differ in the sixth digit and the one made stays, consistent with what was made
# from it), where and how long the machines of a training wait for each other, and which of its epochs'
# checkpoints a training keeps beside those averaging reads (the recipes kept them until 2026-11-26).
HOW_ONLY_OPTIONS = ("--workers", "--threads", "--heartbeat-timeout", "--rdzv-conf", "--master-addr",
                    "--master-port", "--distributed-port", "--keep-last-epochs", "--input-sentence-size-name")  # fmt: skip
HOW_ONLY_FLAGS = ("--no-epoch-checkpoints",)
# the functions of lib.sh a stage's command may start with: the engine runs them (see run_command)
TRAINING_LAUNCHERS = ("train_workers", "launch_training")
# data preparation that moved to preprocess/: a stamp that names the old module is the same stage
MOVED_MODULES = re.compile(r"^transformer_plugin_cli\.(?:data|parsing)\.(wmt14|sentencepiece_vocab|synthetic_pair|debian_l10n|ptb)$")
STAMP_VERSION = 2


@dataclass
class Stage:
    """A stage as the recipe declared it: ``kind`` is ``run``, or ``data`` (every machine reads its
    outputs: with LAUNCH=torchrun, nodes other than 0 wait for node 0's)."""

    id: str
    title: str
    kind: str
    clears: str
    argv: List[str]

    @property
    def trains(self) -> bool:
        return bool(self.argv) and self.argv[0] in TRAINING_LAUNCHERS


@dataclass
class Context:
    """Where the recipe runs: its WORK, the checkout, the environment's python, the machine's place."""

    work: str
    repo: str
    python: str = "python"
    launch: str = "local"
    node_rank: str = "0"
    dist_timeout: int = 600
    settings: Dict[str, str] = field(default_factory=dict)  # the recipe's variables and their values now
    digest_cache: Optional["DigestCache"] = None

    def __post_init__(self):
        self.work_abs = os.path.abspath(self.work)
        self.repo_abs = os.path.abspath(self.repo)
        found = shutil.which(self.python) or self.python
        self.python_abs = os.path.abspath(found)
        self.bin_dir = os.path.dirname(self.python_abs)  # the environment's console scripts
        # longest first, so that a WORK inside the checkout (runs/...) is WORK
        places = [(self.work_abs, "$WORK"), (self.repo_abs, "$REPO")]
        if not os.path.isabs(self.work):
            places.append((os.path.normpath(self.work), "$WORK"))
        places.sort(key=lambda p: -len(p[0]))
        alternatives = "|".join(re.escape(p) for p, _ in places if p not in (".", "/"))
        self._places = dict(places)
        self._place = re.compile(rf"(?<![^\s=:,'\"])({alternatives})(?=/|$|[\s:,'\"])") if alternatives else None

    @property
    def stamp_dir(self) -> str:
        """node 0's stamps are $WORK/.done; with LAUNCH=torchrun another node's (its training only) are
        $WORK/.done/node<NODE_RANK>, so that no node overwrites another's."""
        if self.launch == "torchrun" and self.node_rank != "0":
            return os.path.join(self.work, ".done", f"node{self.node_rank}")
        return os.path.join(self.work, ".done")

    @property
    def waits_for_node0(self) -> bool:
        return self.launch == "torchrun" and self.node_rank != "0"

    def placed(self, word: str) -> str:
        """``word`` with the checkout's and WORK's paths as ``$REPO`` and ``$WORK``, and the environment's
        console scripts by name."""
        if word == self.python or word == self.python_abs:
            return "python"
        if os.path.isabs(word) and os.path.dirname(word) == self.bin_dir:
            return os.path.basename(word)
        if self._place is None:
            return word
        return self._place.sub(lambda m: self._places[m.group(1)], word)

    def external_input(self, word: str) -> Optional[str]:
        """The real path of ``word`` if it names an existing file or directory outside WORK and the
        checkout (a path: absolute, or with a slash), else None."""
        if "/" not in word or "\n" in word or not os.path.exists(word):
            return None
        real = os.path.realpath(word)
        for inside in (os.path.realpath(self.work_abs), os.path.realpath(self.repo_abs)):
            if real == inside or real.startswith(inside + os.sep):
                return None
        if os.path.dirname(os.path.abspath(word)) == self.bin_dir:
            return None
        return real


def without_how_only(words: Sequence[str]) -> List[str]:
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in HOW_ONLY_OPTIONS:
            skip = True
        elif word not in HOW_ONLY_FLAGS:
            out.append(word)
    return out


def identity(stage: Stage, ctx: Context) -> Dict:
    """What the stage makes: its command as a list (placed, without the options of how it runs), and the
    digests of its inputs outside WORK and the checkout, whose paths the command holds as ``$INPUT<i>``."""
    command, inputs = [], []
    for word in without_how_only(stage.argv):
        real = ctx.external_input(word)
        if real is not None:
            inputs.append({"path": word, "digest": digest(real, ctx.digest_cache)})
            command.append(f"$INPUT{len(inputs)}")
        else:
            command.append(ctx.placed(word))
    return {"command": command, "inputs": inputs}


# ---- the identity of inputs ------------------------------------------------------------------------


class DigestCache:
    """Content digests of files, kept by (real path, size, modification time) in digests.json beside the stamps,
    so that archives of gigabytes are read once, not at every start of the recipe."""

    def __init__(self, path: Optional[str]):
        self.path, self.entries, self.changed = path, {}, False
        if path and os.path.exists(path):
            with contextlib.suppress(ValueError, OSError):
                with open(path, encoding="utf-8") as f:
                    self.entries = json.load(f)

    def file_digest(self, real: str) -> str:
        st = os.stat(real)
        key = [st.st_size, st.st_mtime_ns]
        known = self.entries.get(real)
        if known and known[:2] == key:
            return known[2]
        h = hashlib.blake2b(digest_size=16)
        with open(real, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        self.entries[real] = [*key, h.hexdigest()]
        self.changed = True
        return h.hexdigest()

    def save(self) -> None:
        if self.path and self.changed:
            from transformer_plugin_cli.files import write_json

            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            write_json(self.path, self.entries, indent=None)
            self.changed = False


def digest(real: str, cache: Optional[DigestCache] = None) -> str:
    """A digest of the names, sizes and contents of the files at or below ``real`` (links followed)."""
    cache = cache or DigestCache(None)
    h = hashlib.blake2b(digest_size=16)
    if os.path.isfile(real):
        files = [("", real)]
    else:
        files = []
        for directory, dirs, names in os.walk(real, followlinks=True):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(directory, name)
                if os.path.isfile(path):
                    files.append((os.path.relpath(path, real), os.path.realpath(path)))
    for name, path in sorted(files):
        h.update(f"{name}\0{os.path.getsize(path)}\0{cache.file_digest(path)}\n".encode())
    return h.hexdigest()


# ---- stamps ------------------------------------------------------------------------------------------


def setting_names(sources: Sequence[str]) -> List[str]:
    """The variables a recipe lets the environment set, from its source files: ``NAME=${NAME:-default}``,
    or ``NAME=${TOY_NAME:-default}`` at toy size."""
    names = set()
    for source in sources:
        with contextlib.suppress(OSError):
            with open(source, encoding="utf-8") as f:
                names.update(re.findall(r"(?<![\w$])([A-Z][A-Z0-9_]*)=\$\{[A-Z][A-Z0-9_]*:-", f.read()))
    return sorted(names)


@dataclass
class Done:
    """A stamp as read: the identity it records (None for an old stamp, whose ``legacy`` words are kept
    instead) and the settings of the run that wrote it."""

    identity: Optional[Dict]
    settings: Dict[str, str]
    legacy: Optional[List[str]] = None


def read_stamp(path: str) -> Optional[Done]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
            return Done({"command": data["command"], "inputs": data.get("inputs", [])}, data.get("settings", {}))
        except (ValueError, KeyError, TypeError):
            return Done({"command": ["(an unreadable stamp)"], "inputs": []}, {})
    settings = {}
    with contextlib.suppress(FileNotFoundError):
        with open(path + ".settings", encoding="utf-8") as f:
            for line in f:
                name, _, value = line.rstrip("\n").partition("=")
                words = bash_words(value)
                settings[name] = words[0] if words else ""
    return Done(None, settings, legacy=bash_words(text.strip("\n")))


def write_stamp(path: str, stage: Stage, ident: Dict, ctx: Context) -> None:
    from transformer_plugin_cli.files import write_json

    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json(path, {
        "stamp": STAMP_VERSION, "stage": stage.id, "title": stage.title,
        "command": ident["command"], "inputs": ident["inputs"], "settings": ctx.settings,
        # where and when it was made: for people, not part of its identity
        "made": {"at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                 "host": socket.gethostname(), "argv": stage.argv},
    })  # fmt: skip
    with contextlib.suppress(FileNotFoundError):
        os.remove(path + ".settings")  # an old stamp's


_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
              "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


def bash_words(text: str) -> List[str]:
    """The words of a line written by bash's ``printf %q`` (backslash escapes, '...' and $'...')."""
    words, word, i, n, in_word = [], [], 0, len(text), False
    while i < n:
        c = text[i]
        if c in " \t\n":
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        in_word = True
        if c == "\\" and i + 1 < n:
            word.append(text[i + 1])
            i += 2
        elif c == "'":
            j = text.index("'", i + 1)
            word.append(text[i + 1 : j])
            i = j + 1
        elif c == "$" and text.startswith("$'", i):
            i += 2
            while i < n and text[i] != "'":
                if text[i] == "\\" and i + 1 < n:
                    e = text[i + 1]
                    if e in _C_ESCAPES:
                        word.append(_C_ESCAPES[e])
                        i += 2
                    elif e == "x":
                        m = re.match(r"[0-9a-fA-F]{1,2}", text[i + 2 :])
                        word.append(chr(int(m.group(), 16)))
                        i += 2 + len(m.group())
                    elif e in "01234567":
                        m = re.match(r"[0-7]{1,3}", text[i + 1 :])
                        word.append(chr(int(m.group(), 8)))
                        i += 1 + len(m.group())
                    else:
                        word.append("\\" + e)
                        i += 2
                else:
                    word.append(text[i])
                    i += 1
            i += 1
        else:
            word.append(c)
            i += 1
    if in_word:
        words.append("".join(word))
    return words


def legacy_words(stage: Stage, ctx: Context) -> List[str]:
    """The words an old stamp of this stage would hold today (recipes/lib.sh before this module: the
    command line as it ran, and ``PATH=`` a digest of the names, sizes and times of the files below each
    argument that named a path outside WORK and the checkout), as that code compared them."""
    words = list(stage.argv)
    work, repo = os.path.realpath(ctx.work_abs), os.path.realpath(ctx.repo_abs)
    for arg in stage.argv:
        if not os.path.exists(arg):
            continue
        real = os.path.realpath(arg)
        if any(real + "/" == p + "/" or (real + "/").startswith(p + "/") for p in (work, repo)):
            continue
        old = subprocess.run(["bash", "-c", "find -L \"$0\" -type f -printf '%P %s %T@\\n' 2> /dev/null | sort | md5sum | cut -c1-16", real],
                             capture_output=True, text=True).stdout.strip()  # fmt: skip
        words.append(f"{arg}={old}")
    return normalised_legacy(words)


def normalised_legacy(words: Sequence[str]) -> List[str]:
    return [f"preprocess.{m.group(1)}" if (m := MOVED_MODULES.match(w)) else w for w in without_how_only(words)]


# ---- what changed ------------------------------------------------------------------------------------


def _differences(before: Sequence[str], after: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The words of ``before`` that ``after`` replaced or dropped, and those it put in their place or
    added, in order (a value that changed is found where it stands, even if it is a word elsewhere too)."""
    import difflib

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


def why_changed(done: Done, stage: Stage, ctx: Context, now: Dict) -> str:
    """Why the stage must be redone ('' if it need not be)."""
    if done.identity is None:  # an old stamp
        current = legacy_words(stage, ctx)
        before = normalised_legacy(done.legacy)
        if before == current:
            return ""
        found = changed_settings(before, current, done.settings, ctx.settings)
        return f"its settings changed since it was done: {found}" if found else \
            f"its settings or inputs changed since it was done: {changed_words(before, current)}"  # fmt: skip
    before, after = done.identity["command"], now["command"]
    if before != after:
        found = changed_settings(before, after, done.settings, ctx.settings)
        if found:
            return f"its settings changed since it was done: {found}"
        return f"its settings or inputs changed since it was done: {changed_words(before, after)}"
    old_inputs, new_inputs = done.identity["inputs"], now["inputs"]
    changed = [new["path"] for old, new in zip(old_inputs, new_inputs) if old["digest"] != new["digest"]]
    if changed or len(old_inputs) != len(new_inputs):
        return f"its settings or inputs changed since it was done: the files of {', '.join(changed) or 'its inputs'} changed"
    return ""


# ---- the plan: every stage decided before any work -----------------------------------------------------


@dataclass
class Decision:
    action: str  # skip | run | redo | stop | wait
    why: str = ""
    identity: Optional[Dict] = None
    upgrade: bool = False  # an old stamp that holds: rewrite it as JSON when skipped


def decide(stages: Sequence[Stage], ctx: Context) -> List[Decision]:
    """What a run does with each stage: skip it (done with these settings), run it (never done), redo it
    (its settings or inputs changed, or an earlier stage whose outputs it reads is redone), stop (a
    training stage that would be redone), or wait for node 0's (data on another node)."""
    decisions, redone, redone_why = [], None, ""
    for stage in stages:
        if stage.kind == "data" and ctx.waits_for_node0:
            decisions.append(Decision("wait"))
            continue
        now = identity(stage, ctx)
        done = read_stamp(os.path.join(ctx.stamp_dir, stage.id))
        why = why_changed(done, stage, ctx, now) if done else ""
        if done and not why and redone:
            why = f"stage {redone}, whose outputs it reads, is redone" + (f" ({redone_why})" if redone_why else "")
        if done and not why:
            decisions.append(Decision("skip", identity=now, upgrade=done.identity is None))
            continue
        if redone is None:
            redone, redone_why = stage.id, why.replace("its settings changed since it was done: ", "", 1)
        if why and stage.trains:
            decisions.append(Decision("stop", why, now))
        else:
            decisions.append(Decision("redo" if why else "run", why, now))
    return decisions


def stop_message(stage: Stage, why: str, ctx: Context) -> str:
    save_dir = "checkpoints"  # fairseq's default --save-dir
    for i, word in enumerate(stage.argv[:-1]):
        if word == "--save-dir":
            save_dir = stage.argv[i + 1] or save_dir
    stamp = os.path.join(ctx.stamp_dir, stage.id)
    return (f"stage {stage.id} (training) was done, but {why}. fairseq-train would continue its checkpoints under the new\n"
            f"settings. To train from scratch, delete {save_dir} and {stamp}; to continue those checkpoints\n"
            f"deliberately (a larger MAX_UPDATE, say), delete {stamp} only. Or set another WORK.")  # fmt: skip


# ---- the layout of a training: machines, processes, batch ---------------------------------------------


class LayoutError(ValueError):
    pass


def layout(launch: str, nnodes: str, node_rank: str, master_addr: str, master_port: str, gpus: str,
           cpu_workers: str, dist_timeout: str, tokens: int, cap: int, real: bool = False,
           slurm_job_id: str = "", slurm_job_num_nodes: str = "", cuda_devices: Callable[[], int] = lambda: 0,
           hostname: str = "") -> Dict[str, str]:  # fmt: skip
    """The variables of a training's layout, or LayoutError naming the variables that cannot work
    together: PER_NODE (processes per machine), DEVICES (in all), UPDATE_FREQ and MAX_TOKENS so that
    MAX_TOKENS x DEVICES x UPDATE_FREQ ~ ``tokens`` with MAX_TOKENS <= ``cap``, BATCH_SUMMARY, and
    MASTER_ADDR and MASTER_PORT as given, or their defaults (127.0.0.1; 29500, or under SLURM a port from
    the job id, so that jobs sharing a node do not collide). ``real``: also what only the machine tells
    (its CUDA devices, the SLURM allocation)."""
    if not master_port:
        master_port = str(10000 + int(slurm_job_id) % 50000) if launch == "slurm" and slurm_job_id.isdigit() else "29500"
    digits = re.compile(r"^[0-9]+$")
    positive = re.compile(r"^[1-9][0-9]*$")
    if launch not in ("local", "torchrun", "slurm"):
        raise LayoutError(f"LAUNCH={launch}: use local, torchrun or slurm")
    if not positive.match(nnodes):
        raise LayoutError(f"NNODES={nnodes}: the number of machines, 1 or more")
    if not digits.match(gpus):
        raise LayoutError(f"GPUS={gpus}: GPUs per machine, or 0 for CPU workers")
    if not positive.match(cpu_workers):
        raise LayoutError(f"CPU_WORKERS={cpu_workers}: processes per machine, 1 or more")
    if not positive.match(dist_timeout):
        raise LayoutError(f"DIST_TIMEOUT={dist_timeout}: seconds, 1 or more")
    if launch == "local" and nnodes != "1":
        raise LayoutError(f"NNODES={nnodes}: training on several machines needs LAUNCH=torchrun or LAUNCH=slurm")
    if launch != "torchrun" and node_rank != "0":
        raise LayoutError(f"NODE_RANK={node_rank} with LAUNCH={launch}: only LAUNCH=torchrun runs the recipe on every machine")
    if launch == "torchrun" and not (digits.match(node_rank) and int(node_rank) < int(nnodes)):
        raise LayoutError(f"NODE_RANK={node_rank}: with NNODES={nnodes}, each machine's number, 0 to {int(nnodes) - 1}")
    if launch == "torchrun" and int(nnodes) > 1 and not master_addr:
        raise LayoutError(f"LAUNCH=torchrun NNODES={nnodes} needs MASTER_ADDR: node 0's address, the same on every machine")
    if real and launch == "slurm" and not slurm_job_id:
        raise LayoutError("LAUNCH=slurm runs inside a SLURM allocation (sbatch or salloc): SLURM_JOB_ID is not set")
    if real and launch == "slurm" and (slurm_job_num_nodes or nnodes) != nnodes:
        raise LayoutError(f"NNODES={nnodes}, but this SLURM allocation has {slurm_job_num_nodes} nodes (sbatch --nodes)")
    if real and int(gpus) > 0:
        seen = cuda_devices()
        if seen < int(gpus):
            raise LayoutError(f"GPUS={gpus}, but torch sees {seen} CUDA devices on {hostname or socket.gethostname()}: "
                              "GPUS=0 trains on CPU_WORKERS processes")  # fmt: skip
    per_node = int(gpus) if int(gpus) > 0 else int(cpu_workers)
    devices = per_node * int(nnodes)
    update_freq = -(-tokens // (devices * cap))
    max_tokens = -(-tokens // (devices * update_freq))
    summary = f"{devices} {'GPUs' if int(gpus) > 0 else 'CPU workers'}"
    if nnodes != "1":
        summary += f" ({nnodes} machines x {per_node})"
    summary += f" x --max-tokens {max_tokens} x --update-freq {update_freq} = {devices * max_tokens * update_freq} tokens per update"
    return {"PER_NODE": str(per_node), "DEVICES": str(devices), "UPDATE_FREQ": str(update_freq),
            "MAX_TOKENS": str(max_tokens), "BATCH_SUMMARY": summary, "MASTER_ADDR": master_addr or "127.0.0.1",
            "MASTER_PORT": master_port}  # fmt: skip


def cuda_devices() -> int:
    """The CUDA devices torch sees here (what fairseq-train will use); 0 if torch cannot tell."""
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


# ---- why a training stopped ------------------------------------------------------------------------------

PEER = r"\[([0-9A-Fa-f.:]+)\]"
# What stopped a launcher (torchrun, srun, fairseq-train), read from its output: the first that applies.
# Each: a name, a pattern over the output, and the message, formatted with the pattern's groups ({0}: the
# first) and the layout (MASTER_ADDR, MASTER_PORT, DIST_TIMEOUT, NNODES, LAST_NODE). A task that srun saw
# die by a signal of its own (Killed, Segmentation fault, Out Of Memory) comes first, whatever its peers
# printed before srun ended them: their lost connection is only its consequence.
FAILURES: List[Tuple[str, str, str]] = [
    ("a task died", r"^srun: error: (.*task [0-9]+: (?!Terminated|Exited with exit code).*)$",
     "a task failed ({0}), and srun ended the others"),
    ("a peer lost", rf"{PEER}:[0-9]+:? Connection (?:reset|closed) by peer|Connection closed by peer {PEER}:[0-9]+",
     "the connection to the worker at {0} was lost (it died, or its machine did: see that machine's log)"),
    ("rendezvous incomplete", r"waiting for clients",
     "not every machine joined torchrun's rendezvous at {MASTER_ADDR}:{MASTER_PORT} within DIST_TIMEOUT={DIST_TIMEOUT} s "
     "(start the recipe on every machine, NODE_RANK=0 to {LAST_NODE})"),
    ("no rendezvous", r"failed to connect to any network address|client socket has timed out",
     "node 0's rendezvous at {MASTER_ADDR}:{MASTER_PORT} did not answer within DIST_TIMEOUT={DIST_TIMEOUT} s "
     "(is the recipe running there with NODE_RANK=0, and is MASTER_ADDR its address?)"),
    ("silence", r"Timed out waiting [0-9]+ms|Killing job for not making progress",
     "no word from the other machines for DIST_TIMEOUT={DIST_TIMEOUT} s: a machine or the network between them "
     "was lost (or one worker spent longer than that alone, writing a checkpoint: raise DIST_TIMEOUT)"),
    ("a task failed", r"^srun: error: (.*task [0-9]+: .*)$", "a task failed ({0}), and srun ended the others"),
    ("a local process failed", r"(exitcode +: -?[0-9]+(?: \(pid: [0-9]+\))?(?: \(SIG[A-Z]+\))?)",
     "a training process on this machine failed ({0})"),
]  # fmt: skip


def training_failure(output: str, layout_vars: Dict[str, str]) -> str:
    """What stopped a launcher, from its output (FAILURES), or 'fairseq-train failed'."""
    names = dict(layout_vars)
    names.setdefault("LAST_NODE", str(int(names.get("NNODES", "1") or 1) - 1))
    for _, pattern, message in FAILURES:
        m = re.search(pattern, output, flags=re.M)
        if m:
            groups = [" ".join(g.split()) if g else g for g in m.groups() if g is not None]
            return message.format(*groups, **names)
    return "fairseq-train failed"


# ---- processes ----------------------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1
try:  # looked up once, here: a child between fork and exec must not load anything
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Supervisor:
    """Starts a stage's processes each in the stage's process group, and ends that group when asked to
    stop (a signal) or when one of the processes fails: SIGTERM, then SIGKILL after ``grace`` seconds."""

    def __init__(self, grace: float = 10.0):
        self.grace = grace
        self.group: Optional[int] = None
        self.signum: Optional[int] = None
        self.stop_sent = 0.0

    def handle(self, signum, _frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:  # a second Ctrl-C: at once
            self.kill_group(signal.SIGKILL)
        self.signum = self.signum or signum
        self.stop_group()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.handle)

    def start(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None, **kwargs) -> subprocess.Popen:
        if self.signum is not None:
            raise Interrupted(self.signum)
        group = 0 if self.group is None else self.group
        us = os.getpid()

        def in_the_child():  # between fork and exec: end with us, even if we ended before this ran
            die_with_parent(signal.SIGTERM)
            if os.getppid() != us:
                os._exit(1)

        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, env=env, process_group=group,
                                preexec_fn=in_the_child, **kwargs)  # fmt: skip
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
        if self.group is None:
            return False
        try:
            os.killpg(self.group, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def wait(self, procs: Sequence[subprocess.Popen], stop_on_failure: bool = True) -> Tuple[int, Optional[subprocess.Popen]]:
        """Wait for ``procs``; returns (status, the first that failed). The first failure stops the others;
        a signal stops them all and raises Interrupted once none is left (after SIGKILL if need be)."""
        failed: Optional[subprocess.Popen] = None
        while True:
            if self.signum is not None:  # a signal that came while the processes were being started
                self.stop_group()
            for p in procs:
                if p.poll() is not None and p.returncode != 0 and failed is None and self.signum is None:
                    failed = p
                    if stop_on_failure:
                        self.stop_group()
            running = [p for p in procs if p.poll() is None]
            if not running and (self.signum is None and failed is None or not self.group_alive()):
                break
            if self.stop_sent and time.monotonic() - self.stop_sent > self.grace:
                self.kill_group(signal.SIGKILL)
            time.sleep(0.05)
        self.end_leftovers()
        if self.signum is not None:
            raise Interrupted(self.signum)
        if failed is not None:
            return failed.returncode, failed
        return 0, None

    def end_leftovers(self) -> None:
        """What the stage's processes left running in its group (a data loader's workers, say)."""
        if self.group_alive():
            self.kill_group(signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            while self.group_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.kill_group(signal.SIGKILL)
        self.group, self.stop_sent = None, 0.0


def tee(source, *sinks) -> threading.Thread:
    """Copies ``source`` (a pipe) to each of ``sinks`` (binary files) as it comes."""

    def copy():
        fd = source.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            for sink in sinks:
                sink.write(chunk)
                sink.flush()
        source.close()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_commands(n: int, argv: Sequence[str], port: str) -> List[List[str]]:
    """``n`` data-parallel fairseq-train processes on this machine: gloo over TCP on 127.0.0.1,
    legacy_ddp (fairseq's c10d DDP rejects CPU models), --distributed-no-spawn."""
    return [[*argv, "--distributed-world-size", str(n), "--distributed-rank", str(r), "--distributed-backend", "gloo",
             "--ddp-backend", "legacy_ddp", "--distributed-no-spawn", "--distributed-init-method", f"tcp://127.0.0.1:{port}"]
            for r in range(n)]  # fmt: skip


def worker_threads(per_node: int) -> str:
    """Each of ``per_node`` CPU processes' torch threads: OMP_NUM_THREADS if set, else SLURM's
    --cpus-per-task, else an equal share of the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return os.environ.get("OMP_NUM_THREADS") or os.environ.get("SLURM_CPUS_PER_TASK") or str(max(1, cores // max(1, per_node)))


# ---- running the plan ---------------------------------------------------------------------------------


class StageFailed(Exception):
    def __init__(self, status: int, message: str = ""):
        super().__init__(message)
        self.status, self.message = status, message


def shown(argv: Sequence[str]) -> str:
    return "+ " + shlex.join(argv)


class Runner:
    """Runs (or, in a dry run, shows) the plan's stages in order, after deciding every one of them."""

    def __init__(self, stages: Sequence[Stage], ctx: Context, dry_run: bool, layout_vars: Dict[str, str],
                 gpus: int = 0, per_node: int = 1, grace: float = 10.0, parent_pid: int = 0):  # fmt: skip
        self.stages, self.ctx, self.dry_run = list(stages), ctx, dry_run
        self.layout_vars, self.gpus, self.per_node, self.parent_pid = layout_vars, gpus, per_node, parent_pid
        self.supervisor = Supervisor(grace)
        self.deadline: Optional[float] = None  # node 0's data: DIST_TIMEOUT from the first wait

    def say(self, text: str, err: bool = False) -> None:
        stream = sys.stderr if err else sys.stdout
        print(text, file=stream, flush=True)

    # -- the whole plan
    def check(self) -> Tuple[List[Decision], List[str]]:
        decisions = decide(self.stages, self.ctx)
        stops = [stop_message(s, d.why, self.ctx) for s, d in zip(self.stages, decisions) if d.action == "stop"]
        return decisions, stops

    def space(self, decisions: Sequence[Decision]):
        """What the stages that will run write under WORK, and whether WORK's disk has room for it."""
        from transformer_plugin_cli.tools import space

        runs = [(s.id, s.argv, d.action in ("run", "redo", "stop")) for s, d in zip(self.stages, decisions) if d.action != "wait"]
        vocabulary = self.ctx.settings.get("VOCAB_SIZE", "")
        plan = space.estimate(runs, int(vocabulary) if vocabulary.isdigit() else None)
        where = self.ctx.work_abs
        while not os.path.exists(where):
            where = os.path.dirname(where)
        return plan, shutil.disk_usage(where).free

    def space_lines(self, plan, free: int) -> List[str]:
        from transformer_plugin_cli.tools.space import size

        lines = [f"this run writes about {size(plan.kept)} under {self.ctx.work} (data {size(plan.total('data'))}, checkpoints "
                 f"{size(plan.total('checkpoints'))}) and needs about {size(plan.needed)} free at its peak; {size(free)} is free there"]  # fmt: skip
        lines += [f"  stage {sid}: {size(w.kept)}" + (f" (+{size(w.transient)} at its peak)" if w.transient else "")
                  + f": {w.how}" for sid, w in plan.stages if w.kept or w.transient or w.how.startswith("checkpoints:")]  # fmt: skip
        return lines

    def run(self, check_only: bool = False) -> int:
        decisions, stops = self.check()
        if check_only:
            for message in stops:
                self.say(message, err=True)
            return 3 if stops else 0
        if stops and not self.dry_run:
            for message in stops:
                self.say(message, err=True)
            self.say("FAILED: stopped before any work (nothing was changed): a training stage would have to be redone", err=True)
            return 3
        plan, free = self.space(decisions)
        if self.dry_run:
            self.say("\n==== space ====\n" + "\n".join(self.space_lines(plan, free)))
        elif plan.needed > free and os.environ.get("IGNORE_FREE_SPACE", "0") != "1":
            from transformer_plugin_cli.tools.space import size

            self.say("\n".join(self.space_lines(plan, free)), err=True)
            self.say(f"FAILED: stopped before any work: {self.ctx.work} needs about {size(plan.needed)} free and its disk has "
                     f"{size(free)}. Make room, set WORK to a larger disk, or keep fewer checkpoints (AVERAGE_LAST); "
                     "IGNORE_FREE_SPACE=1 goes on regardless", err=True)  # fmt: skip
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
            self.say(self.interrupted_message(current, e.signum), err=True)
            return 128 + e.signum
        except StageFailed as e:
            if e.message:
                self.say(e.message, err=True)
            self.say(f"FAILED: stage {current.id}: {current.title} (exit {e.status})", err=True)
            return e.status
        except OSError as e:  # the stage's stamp, log or output could not be written
            self.say(f"FAILED: stage {current.id}: {current.title}: {e.strerror or e}"
                     f"{f': {e.filename}' if e.filename else ''}", err=True)  # fmt: skip
            return 1
        finally:
            if self.ctx.digest_cache and not self.dry_run:
                with contextlib.suppress(OSError):
                    self.ctx.digest_cache.save()
        return 0

    def interrupted_message(self, stage: Optional[Stage], signum: int) -> str:
        name = signal.Signals(signum).name
        if stage is None:
            return f"FAILED: stopped by {name} between stages"
        resume = "training continues from the last checkpoint it saved (checkpoint_last.pt)" if stage.trains else \
            "this stage starts over, and the stages done before it are kept"  # fmt: skip
        return (f"FAILED: stage {stage.id}: {stage.title}: stopped by {name}; every process it started has ended. "
                f"Run the same command again to resume: {resume}")  # fmt: skip

    # -- one stage
    def one(self, stage: Stage, decision: Decision) -> None:
        if decision.action == "wait":
            return self.wait_for_node0(stage)
        self.say(f"\n==== stage {stage.id}: {stage.title} ====")
        stamp = os.path.join(self.ctx.stamp_dir, stage.id)
        if decision.action == "skip":
            self.say(f"done already with these settings: {'a real run skips this stage' if self.dry_run else 'skipping'}")
            if not self.dry_run:
                if decision.upgrade:
                    write_stamp(stamp, stage, decision.identity, self.ctx)
                return
        elif decision.action == "stop":  # only in a dry run: a real run stopped before any work
            self.say(f"(a real run stops here: {stop_message(stage, decision.why, self.ctx)})")
        elif decision.action == "redo":
            self.say(f"{'a real run redoes this stage' if self.dry_run else 'redoing it'}: {decision.why}")
        if self.dry_run:
            if stage.clears:
                self.say(shown(["rm", "-rf", stage.clears]))
            self.show(stage.argv)
            return
        with contextlib.suppress(FileNotFoundError):
            os.remove(stamp)
        if stage.clears:
            shutil.rmtree(stage.clears, ignore_errors=True)
        self.make_directories(stage.argv)
        self.run_command(stage.argv)
        write_stamp(stamp, stage, decision.identity, self.ctx)

    def make_directories(self, argv: Sequence[str]) -> None:
        """WORK, and the directories of the files the engine's own commands write (capture's output,
        a training's log and --save-dir): made when the first stage that writes there runs."""
        os.makedirs(self.ctx.work, exist_ok=True)
        head = argv[0] if argv else ""
        paths = [argv[1]] if head == "capture" else [argv[2]] if head == "train_workers" else [argv[1]] if head == "launch_training" else []
        for path in paths:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if head in TRAINING_LAUNCHERS:
            for i, word in enumerate(argv[:-1]):
                if word == "--save-dir":
                    os.makedirs(argv[i + 1], exist_ok=True)

    def show(self, argv: Sequence[str]) -> None:
        head = argv[0] if argv else ""
        if head == "capture":
            self.say(shown(argv[2:]))
            self.say(f"  > {argv[1]}")
        elif head == "train_workers":
            n, command = int(argv[1]), argv[3:]
            if n <= 1:
                self.say(shown(command))
            else:
                threads = worker_threads(n)
                for worker in worker_commands(n, command, "PORT"):
                    self.say(shown(["env", f"OMP_NUM_THREADS={threads}", *worker]))
        elif head == "launch_training":
            self.say(shown(argv[2:]))
        else:
            self.say(shown(argv))

    def run_command(self, argv: Sequence[str]) -> None:
        head = argv[0]
        if head == "capture":  # FILE appears only when COMMAND succeeded; nothing half-written stays
            out = argv[1]
            try:
                with open(out + ".tmp", "wb") as f:
                    self.expect_ok(self.supervisor.wait([self.supervisor.start(argv[2:], stdout=f)]))
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(out + ".tmp")
                raise
            os.replace(out + ".tmp", out)
        elif head == "train_workers":
            self.train_workers(int(argv[1]), argv[2], argv[3:])
        elif head == "launch_training":
            self.launch_training(argv[1], argv[2:])
        else:
            self.expect_ok(self.supervisor.wait([self.supervisor.start(argv)]))

    @staticmethod
    def expect_ok(result: Tuple[int, Optional[subprocess.Popen]]) -> None:
        status, _ = result
        if status != 0:
            raise StageFailed(status if status > 0 else 128 - status)

    def train_workers(self, n: int, log: str, argv: Sequence[str]) -> None:
        """N data-parallel processes on this machine, each with an equal share of the CPU cores as torch
        threads; rank 0's output shown and appended to LOG, rank r's in LOG.rank<r>. N=1 runs ARGV once (a
        launcher that starts its own processes: fairseq on GPUs), its output shown and appended to LOG."""
        sinks = []
        with open(log, "ab") as main_log:
            if n <= 1:
                proc = self.supervisor.start(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                threads = [tee(proc.stdout, sys.stdout.buffer, main_log)]
                procs = [proc]
            else:
                env = dict(os.environ, OMP_NUM_THREADS=worker_threads(n))
                procs, threads = [], []
                for r, command in enumerate(worker_commands(n, argv, str(free_port()))):
                    if r == 0:
                        procs.append(self.supervisor.start(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
                    else:
                        sink = open(f"{log}.rank{r}", "wb")
                        sinks.append(sink)
                        procs.append(self.supervisor.start(command, env=env, stdout=sink, stderr=subprocess.STDOUT))
                threads = [tee(procs[0].stdout, sys.stdout.buffer, main_log)]
            try:
                status, _ = self.supervisor.wait(procs)
            finally:
                for thread in threads:
                    thread.join(timeout=5)
                for sink in sinks:
                    sink.close()
        if status != 0:
            if n <= 1:
                raise StageFailed(status if status > 0 else 128 - status)
            raise StageFailed(status if status > 0 else 128 - status, f"a training worker failed (exit {status}): see {log} and {log}.rank*")

    def launch_training(self, log: str, argv: Sequence[str]) -> None:
        """A launcher (torchrun, srun) that starts the training processes, its output shown and appended
        to LOG. CPU workers get their share of the cores as torch threads. When training fails, says why,
        from what the launcher printed (training_failure), and how to resume."""
        offset = os.path.getsize(log) if os.path.exists(log) else 0
        env = dict(os.environ)
        if self.gpus == 0:
            env["OMP_NUM_THREADS"] = worker_threads(self.per_node)
        with open(log, "ab") as f:
            proc = self.supervisor.start(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            thread = tee(proc.stdout, sys.stdout.buffer, f)
            try:
                status, _ = self.supervisor.wait([proc])
            finally:
                thread.join(timeout=5)
        if status != 0:
            with open(log, "rb") as f:
                f.seek(offset)
                output = f.read().decode("utf-8", errors="replace")
            launch = self.ctx.launch
            again = " on every machine" if launch == "torchrun" else " (sbatch)" if launch == "slurm" else ""
            raise StageFailed(status if status > 0 else 128 - status,
                              f"training stopped: {training_failure(output, self.layout_vars)}. Once the cause is gone, run the "
                              f"same command again{again}: training resumes from checkpoint_last.pt (full log: {log})")  # fmt: skip

    def wait_for_node0(self, stage: Stage) -> None:
        """A data stage on a node other than 0 (LAUNCH=torchrun): wait until node 0 has done it with the
        same settings (its stamp), at most DIST_TIMEOUT seconds from the first wait."""
        rank, timeout = self.ctx.node_rank, self.ctx.dist_timeout
        stamp = os.path.join(self.ctx.work, ".done", stage.id)
        self.say(f"\n==== stage {stage.id}: {stage.title} (node 0's) ====")
        if self.dry_run:
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
                raise StageFailed(1, f"node {rank} waited DIST_TIMEOUT={timeout} s for node 0's stage {stage.id} ({stamp}): start "
                                     "node 0 first, on storage every machine sees, or prepare the data beforehand (DATA_ONLY=1 on node 0)")  # fmt: skip
            if not said:
                self.say(f"node {rank}: waiting for node 0 to do this stage ({stamp}), at most DIST_TIMEOUT={timeout} s")
                said = True
            time.sleep(0.5)
        done = read_stamp(stamp)
        if done.identity is not None:
            theirs, ours = done.identity["command"], identity(stage, self.ctx)["command"]
            # node 0's inputs are on node 0: the paths this node names may differ
            same = [w for w in theirs if not w.startswith("$INPUT")] == [w for w in ours if not w.startswith("$INPUT")]
        else:
            theirs, ours = normalised_legacy(done.legacy), normalised_legacy(stage.argv)
            same = theirs[: len(ours)] == ours and all(re.match(r"^.+=[0-9a-f]{16}$", w) for w in theirs[len(ours) :])
        if not same:
            raise StageFailed(2, f"node 0 did stage {stage.id} with other settings: {changed_words(theirs, ours)}. "
                                 "Run every machine with the same variables and WORK")  # fmt: skip
        self.say("node 0 has done it with these settings")


# ---- the plan as lib.sh writes it --------------------------------------------------------------------


def read_plan(data: bytes) -> Tuple[List[Stage], Dict[str, str], List[str]]:
    """lib.sh's plan: NUL-separated records, ``stage ID TITLE KIND CLEARS N ARGV...``, ``var NAME VALUE``
    (every upper-case shell variable) and ``source FILE`` (the recipe's files)."""
    tokens = data.decode("utf-8", errors="surrogateescape").split("\0")
    if tokens and tokens[-1] == "":
        tokens.pop()
    stages, variables, sources, i = [], {}, [], 0
    while i < len(tokens):
        kind = tokens[i]
        if kind == "":  # printf's one empty word for an empty list
            i += 1
        elif kind == "stage":
            sid, title, stage_kind, clears, n = tokens[i + 1 : i + 6]
            argv = tokens[i + 6 : i + 6 + int(n)]
            stages.append(Stage(sid, title, stage_kind, clears, argv))
            i += 6 + int(n)
        elif kind == "var":
            variables[tokens[i + 1]] = tokens[i + 2]
            i += 3
        elif kind == "source":
            sources.append(tokens[i + 1])
            i += 2
        else:
            raise ValueError(f"recipe plan: unknown record {kind!r}")
    return stages, variables, sources


def main_run(args) -> int:
    stages, variables, sources = read_plan(sys.stdin.buffer.read())
    settings = {name: variables.get(name, "") for name in setting_names(sources)}
    ctx = Context(args.work, args.repo, args.python, args.launch, args.node_rank, int(args.dist_timeout), settings)
    ctx.digest_cache = DigestCache(os.path.join(ctx.stamp_dir, "digests.json"))  # each node its own
    layout_vars = {k: variables.get(k, "") for k in ("MASTER_ADDR", "MASTER_PORT", "DIST_TIMEOUT", "NNODES")}
    runner = Runner(stages, ctx, args.dry_run, layout_vars, gpus=int(variables.get("GPUS") or 0),
                    per_node=int(variables.get("PER_NODE") or 1), grace=args.grace, parent_pid=args.parent_pid)  # fmt: skip
    return runner.run(check_only=args.check)


def main_layout(args) -> int:
    try:
        found = layout(args.launch, args.nnodes, args.node_rank, args.master_addr, args.master_port, args.gpus,
                       args.cpu_workers, args.dist_timeout, args.tokens, args.cap, real=args.real,
                       slurm_job_id=os.environ.get("SLURM_JOB_ID", ""),
                       slurm_job_num_nodes=os.environ.get("SLURM_JOB_NUM_NODES", ""), cuda_devices=cuda_devices)  # fmt: skip
    except LayoutError as e:
        print(e, file=sys.stderr)
        return 2
    for name, value in found.items():
        print(f"{name}={shlex.quote(value)}")
    return 0


def main_why(args) -> int:
    with open(args.log, "rb") as f:
        f.seek(args.offset)
        output = f.read().decode("utf-8", errors="replace")
    print(training_failure(output, {"MASTER_ADDR": args.master_addr, "MASTER_PORT": args.master_port,
                                    "DIST_TIMEOUT": args.dist_timeout, "NNODES": args.nnodes}))  # fmt: skip
    return 0


def parse(argv: Sequence[str]):
    parser = argparse.ArgumentParser(prog="python -m transformer_plugin_cli.tools.recipe", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="check every stage of the plan on stdin, then run (or show) them in order")
    run.add_argument("--work", required=True)
    run.add_argument("--repo", required=True)
    run.add_argument("--python", default="python")
    run.add_argument("--launch", default="local")
    run.add_argument("--node-rank", default="0")
    run.add_argument("--dist-timeout", default="600")
    run.add_argument("--dry-run", action="store_true")
    run.add_argument("--check", action="store_true", help="decide every stage, run none; exit 3 if a run would stop")
    run.add_argument("--grace", type=float, default=float(os.environ.get("RECIPE_STOP_GRACE", "10")),
                     help="seconds between SIGTERM and SIGKILL when a stage is stopped")  # fmt: skip
    run.add_argument("--parent-pid", type=int, default=0, help="the recipe's shell: if it is gone already, stop")
    run.set_defaults(main=main_run)
    lay = sub.add_parser("layout", help="the training's layout and batch as shell assignments")
    for name in ("launch", "nnodes", "node-rank", "master-addr", "master-port", "gpus", "cpu-workers", "dist-timeout"):
        lay.add_argument(f"--{name}", default="")
    lay.add_argument("--tokens", type=int, required=True)
    lay.add_argument("--cap", type=int, required=True)
    lay.add_argument("--real", action="store_true", help="also check what only this machine tells")
    lay.set_defaults(main=main_layout)
    why = sub.add_parser("why-training-failed", help="what stopped a launcher, from its log after OFFSET bytes")
    why.add_argument("log")
    why.add_argument("offset", type=int)
    for name in ("master-addr", "master-port", "dist-timeout", "nnodes"):
        why.add_argument(f"--{name}", default="")
    why.set_defaults(main=main_why)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    sys.exit(arguments.main(arguments))
