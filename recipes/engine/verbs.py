"""The engine's own verbs: the words a stage's command may start with (recipes/lib.sh's ``stage``), run by the
engine rather than as a program. This is their one description; the runner, the decisions and the space
estimate all read a stage's command through :func:`call`.

    capture FILE COMMAND...            COMMAND's standard output into FILE, which appears only when it succeeded
    train_workers N LOG COMMAND...     N data-parallel CPU processes on this machine (N=1: COMMAND once, a
                                       launcher of its own: fairseq on GPUs); rank 0's output shown and appended
                                       to LOG, rank r's appended to LOG.rank<r>
    launch_training LOG COMMAND...     a launcher that starts the training processes (torchrun, srun), its
                                       output shown and appended to LOG
"""

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Verb:
    name: str
    params: Tuple[str, ...]  # the words between the verb and the command
    writes: Tuple[str, ...]  # which of them are files the verb writes
    trains: bool  # its command is a training (a stamp that would be redone stops the recipe)
    help: str


VERBS = {
    v.name: v
    for v in (
        Verb("capture", ("file",), ("file",), False, "COMMAND's standard output into FILE, once it succeeded"),
        Verb("train_workers", ("n", "log"), ("log",), True, "N data-parallel CPU processes here (N=1: one launcher)"),
        Verb("launch_training", ("log",), ("log",), True, "a launcher of the training processes (torchrun, srun)"),
    )
}


@dataclass(frozen=True)
class Call:
    """A stage's command read through VERBS: ``verb`` None for a plain program (``command`` is then argv)."""

    verb: Optional[Verb]
    args: dict
    command: List[str]

    @property
    def trains(self) -> bool:
        return self.verb is not None and self.verb.trains

    @property
    def log(self) -> Optional[str]:
        return self.args.get("log")

    def written_files(self) -> List[str]:
        """The files the verb itself writes (a training's log: its ranks' logs beside it)."""
        return [self.args[name] for name in (self.verb.writes if self.verb else ())]


def call(argv: Sequence[str]) -> Call:
    verb = VERBS.get(argv[0]) if argv else None
    if verb is None:
        return Call(None, {}, list(argv))
    n = len(verb.params)
    if len(argv) < 1 + n + 1:
        raise ValueError(f"{verb.name} needs {' '.join(p.upper() for p in verb.params)} COMMAND...: got {list(argv)}")
    return Call(verb, dict(zip(verb.params, argv[1 : 1 + n])), list(argv[1 + n :]))
