"""What a recipe hands to Python, read as data: lib.sh writes its stages, its variables and its files as
NUL-separated records on a pipe (``recipe_variables`` and ``run_stages``); the engine (:mod:`recipes.engine`) and
the planner (:mod:`recipes.planner`) read them here, and nothing is evaluated as code."""

from typing import Dict, List, Tuple


def read_records(data: bytes) -> Tuple[List[tuple], Dict[str, str], List[str]]:
    """lib.sh's plan: NUL-separated records, ``stage ID TITLE KIND CLEARS NR READS... NW WRITES... N ARGV...``,
    ``var NAME VALUE`` (every upper-case shell variable) and ``source FILE`` (the recipe's files). A stage
    comes back as the arguments of :class:`recipes.engine.stamps.Stage`, in its order."""
    tokens = data.decode("utf-8", errors="surrogateescape").split("\0")
    if tokens and tokens[-1] == "":
        tokens.pop()
    stages, variables, sources, i = [], {}, [], 0

    def counted(at: int) -> Tuple[List[str], int]:
        n = int(tokens[at])
        return tokens[at + 1 : at + 1 + n], at + 1 + n

    while i < len(tokens):
        kind = tokens[i]
        if kind == "":  # printf's one empty word for an empty list
            i += 1
        elif kind == "stage":
            sid, title, stage_kind, clears = tokens[i + 1 : i + 5]
            reads, i = counted(i + 5)
            writes, i = counted(i)
            argv, i = counted(i)
            stages.append((sid, title, stage_kind, clears, argv, reads, writes))
        elif kind == "var":
            variables[tokens[i + 1]] = tokens[i + 2]
            i += 3
        elif kind == "source":
            sources.append(tokens[i + 1])
            i += 2
        else:
            raise ValueError(f"recipe plan: unknown record {kind!r}")
    return stages, variables, sources
