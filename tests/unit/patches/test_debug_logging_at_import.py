"""Importing fairseq turns on every library's debug messages (its wav2vec2_classification module calls
logging.basicConfig(level=DEBUG)); patches/debug_logging_at_import.py gives the root logger fairseq's
LOGLEVEL and format back, and leaves a program's own logging alone. Each case runs in a fresh
interpreter: the defect happens once per process, at fairseq's import."""

import os
import subprocess
import sys

import pytest

from helpers import REPO

PROBE = """
import logging
logging.getLogger("matplotlib.font_manager").debug("a debug message")
logging.getLogger("probe").info("an info message")
print(logging.getLevelName(logging.getLogger().level))
"""


def _run(imports, loglevel=None):
    env = {k: v for k, v in os.environ.items() if k != "LOGLEVEL"}
    if loglevel:
        env["LOGLEVEL"] = loglevel
    proc = subprocess.run(
        [sys.executable, "-c", imports + PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1], proc.stderr


@pytest.mark.parametrize(
    "imports",
    [
        "import transformer_plugin",  # the plugin first: the plugin's own tools
        "import fairseq, transformer_plugin",  # fairseq first: fairseq's CLIs with --user-dir
    ],
    ids=["plugin-first", "fairseq-first"],
)
def test_importing_fairseq_leaves_info_in_fairseqs_format(imports):
    level, err = _run(imports)
    assert level == "INFO"
    assert "a debug message" not in err
    assert " | INFO | probe | an info message" in err  # fairseq's format, on stderr as before


def test_loglevel_debug_keeps_the_debug_messages():
    level, err = _run("import fairseq, transformer_plugin", loglevel="DEBUG")
    assert level == "DEBUG" and " | DEBUG | matplotlib.font_manager | a debug message" in err


def test_a_programs_own_logging_is_left_alone():
    level, err = _run(
        "import logging; logging.basicConfig(level=logging.DEBUG, format='own %(message)s')\nimport transformer_plugin"
    )
    assert level == "DEBUG" and "own a debug message" in err
