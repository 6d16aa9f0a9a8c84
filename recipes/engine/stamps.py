"""Stages and their stamps: what a stage makes (its identity), and what a completed stage left behind.

A stage is done when its stamp, ``$WORK/.done/ID``, says it was made by what the stage would make now: a JSON
object holding the stage's command as a list (:func:`identity`: where the checkout, the Python environment and
``WORK`` lie is left out, and so are the options that change only how a stage runs, :data:`HOW_ONLY_OPTIONS`),
the digests of the files it reads from outside ``WORK`` (the content: another copy of the same corpus is the
same input), and the recipe's settings with their values (to name the one that changed). Which stages read
which stage's outputs is :mod:`.decisions`' business.
"""

import contextlib
import datetime
import hashlib
import json
import os
import re
import shutil
import socket
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from transformer_plugin_cli.files import write_json
from recipes.engine.verbs import call

# options that change how a stage runs, not what it makes, left out of its identity with their values:
# the processes and threads of data preparation (sentencepiece's BPE is the same for any thread count; a
# unigram model's scores differ in the sixth digit and the one made stays, consistent with what was made
# from it), where and how long the machines of a training wait for each other, and which of its epochs'
# checkpoints a training keeps beside those averaging reads.
HOW_ONLY_OPTIONS = (
    "--workers",
    "--threads",
    "--heartbeat-timeout",
    "--rdzv-conf",
    "--master-addr",
    "--master-port",
    "--distributed-port",
    "--keep-last-epochs",
    "--input-sentence-size-name",
)
HOW_ONLY_FLAGS = ("--no-epoch-checkpoints",)
# The options by which a command names what it writes (one value; --outputs: every value up to the next option).
# A stage declares anything else it writes with ``stage --writes PATH``.
OUTPUT_OPTIONS = (
    "--out",
    "--output",
    "--outputs",
    "--destdir",
    "--save-dir",
    "--model-prefix",
    "--out-dir",
    "--output-dir",
    "--output_dir",
    "--hypotheses-out",
    "--json",
)
STAMP_VERSION = 3  # 3: the declared reads' digests ("reads"); 2: without them (a stamp of 2 that holds is rewritten)


@dataclass
class Stage:
    """A stage as the recipe declared it: ``kind`` is ``run``, or ``data`` (every machine reads its outputs:
    with LAUNCH=torchrun, nodes other than 0 wait for node 0's); ``reads`` and ``writes``: the paths it
    declared beside those its command names."""

    id: str
    title: str
    kind: str
    clears: str
    argv: List[str]
    reads: List[str] = field(default_factory=list)
    writes: List[str] = field(default_factory=list)

    @property
    def trains(self) -> bool:
        return call(self.argv).trains

    def outputs(self) -> List[str]:
        """What the stage writes: declared, cleared, written by the engine's verb, or named by OUTPUT_OPTIONS."""
        found = [*self.writes, *([self.clears] if self.clears else []), *call(self.argv).written_files()]
        words = self.argv
        for i, word in enumerate(words[:-1]):
            if word in OUTPUT_OPTIONS:
                j = i + 1
                while j < len(words) and not words[j].startswith("--"):
                    found.append(words[j])
                    j += 1
                    if word != "--outputs":
                        break
        return [w for w in found if w]

    def names(self) -> List[str]:
        """Every path its command names (in ``a:b``, ``NAME=PATH`` and ``PATH,PATH`` too) or it declared reading."""
        out = list(self.reads)
        for word in self.argv:
            for value in {word, word.rsplit("=", 1)[-1]}:  # LABEL=PATH (a report's --scores), NAME=PATH
                for part in re.split(r"[:,]", value):
                    if "/" in part and "\n" not in part:
                        out.append(part)
        return out


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

    def inside(self, real: str, *places: str) -> bool:
        return any(real == p or real.startswith(p + os.sep) for p in map(os.path.realpath, places))

    def external_input(self, word: str) -> Optional[str]:
        """The real path of ``word`` if it names an existing file or directory outside WORK and the
        checkout (a path: absolute, or with a slash), else None."""
        if "/" not in word or "\n" in word or not os.path.exists(word):
            return None
        real = os.path.realpath(word)
        if self.inside(real, self.work_abs, self.repo_abs) or os.path.dirname(os.path.abspath(word)) == self.bin_dir:
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


def as_torchrun(words: Sequence[str]) -> List[str]:
    """``words`` with ``PYTHON -m torch.distributed.run`` written ``torchrun``: the launcher of a training is
    torchrun in its identity, whether the command names it or runs it as the environment's python."""
    out = list(words)
    for i in range(len(out) - 2):
        if out[i + 1 : i + 3] == ["-m", "torch.distributed.run"] and os.path.basename(out[i]).startswith("python"):
            out[i : i + 3] = ["torchrun"]
            break
    return out


def identity(stage: Stage, ctx: Context) -> Dict:
    """What the stage makes: its command as a list (placed, without the options of how it runs), the digests
    of its inputs outside WORK and the checkout, whose paths the command holds as ``$INPUT<i>``, and those of
    the files it declared reading (``reads``: outside WORK, in the checkout too: a corpus under runs/)."""
    command, inputs, seen = [], [], set()
    for word in without_how_only(stage.argv):
        real = ctx.external_input(word)
        if real is not None:
            inputs.append({"path": word, "digest": digest(real, ctx.digest_cache)})
            command.append(f"$INPUT{len(inputs)}")
            seen.add(real)
        else:
            command.append(ctx.placed(word))
    command = as_torchrun(command)
    reads = []
    for path in stage.reads:
        real = os.path.realpath(path)
        if real in seen or ctx.inside(real, ctx.work_abs):
            continue
        seen.add(real)
        reads.append(
            {"path": ctx.placed(path), "digest": digest(real, ctx.digest_cache) if os.path.exists(real) else "missing"}
        )
    return {"command": command, "inputs": inputs, "reads": reads}


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
    or ``NAME=${TOY_NAME:-default}`` at toy size. For a recipe on lib.sh whose variables are not declared in
    recipes/planner/ (a user's own); the project's recipes' are (``python -m recipes.engine run --recipe``)."""
    names = set()
    for source in sources:
        with contextlib.suppress(OSError):
            with open(source, encoding="utf-8") as f:
                names.update(re.findall(r"(?<![\w$])([A-Z][A-Z0-9_]*)=\$\{[A-Z][A-Z0-9_]*:-", f.read()))
    return sorted(names)


OLD_FORMAT = "a command line, as older versions of the recipes wrote their stamps, not JSON"


@dataclass
class Done:
    """A stamp as read: the identity it records and the settings of the run that wrote it; ``unread`` says why a
    stamp that is there could not be read (it counts as made by something else)."""

    identity: Dict
    settings: Dict[str, str]
    unread: str = ""


def read_stamp(path: str) -> Optional[Done]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    if not text.lstrip().startswith("{"):
        return Done({"command": [], "inputs": []}, {}, unread=OLD_FORMAT)
    try:
        data = json.loads(text)
        ident = {"command": data["command"], "inputs": data.get("inputs", [])}
        if "reads" in data:  # a stamp of version 2 has none: it holds if the rest does, and is rewritten
            ident["reads"] = data["reads"]
        return Done(ident, data.get("settings", {}))
    except (ValueError, KeyError, TypeError):
        return Done({"command": [], "inputs": []}, {}, unread="it is not the JSON object a stamp holds")


def write_stamp(path: str, stage: Stage, ident: Dict, ctx: Context) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json(
        path,
        {
            "stamp": STAMP_VERSION,
            "stage": stage.id,
            "title": stage.title,
            "command": ident["command"],
            "inputs": ident["inputs"],
            "reads": ident["reads"],
            "settings": ctx.settings,
            # where and when it was made: for people, not part of its identity
            "made": {
                "at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "host": socket.gethostname(),
                "argv": stage.argv,
            },
        },
    )
    with contextlib.suppress(FileNotFoundError):
        os.remove(path + ".settings")  # an old stamp's
