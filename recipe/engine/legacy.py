"""Stamps written before the engine (recipes/lib.sh until 2026-11): a quoted command line, with ``ID.settings``
beside it. They still count: a stage whose old stamp holds is skipped, and its stamp rewritten as JSON."""

import os
import re
import subprocess
from typing import List, Sequence

from recipe.engine.stamps import Context, Stage, as_torchrun, without_how_only

# data preparation that moved to preprocess/: a stamp that names the old module is the same stage
MOVED_MODULES = re.compile(
    r"^transformer_plugin_cli\.(?:data|parsing)\.(wmt14|sentencepiece_vocab|synthetic_pair|debian_l10n|ptb)$"
)


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
        old = subprocess.run(
            [
                "bash",
                "-c",
                "find -L \"$0\" -type f -printf '%P %s %T@\\n' 2> /dev/null | sort | md5sum | cut -c1-16",
                real,
            ],
            capture_output=True,
            text=True,
        ).stdout.strip()
        words.append(f"{arg}={old}")
    return normalised_legacy(words)


def normalised_legacy(words: Sequence[str]) -> List[str]:
    return [
        f"preprocess.{m.group(1)}" if (m := MOVED_MODULES.match(w)) else w for w in as_torchrun(without_how_only(words))
    ]
