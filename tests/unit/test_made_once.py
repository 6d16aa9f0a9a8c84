"""tests/helpers.py's made_once: what several test files read is made once a run, whichever pytest-xdist worker
asks first; the others wait for it."""

import os
import subprocess
import sys
import textwrap

import pytest

from helpers import REPO, made_once

ASK = textwrap.dedent("""
    import os, sys, time, pathlib
    sys.path.insert(0, os.path.join(sys.argv[1], "tests"))
    from helpers import made_once

    class Factory:  # what made_once asks of pytest's tmp_path_factory: this worker's base directory
        def getbasetemp(self):
            return pathlib.Path(sys.argv[2]) / os.environ["PYTEST_XDIST_WORKER"]

    def make(where):
        with open(pathlib.Path(sys.argv[2]) / "made", "a") as f:
            f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
        time.sleep(1)  # long enough that the other worker asks meanwhile
        (where / "model.pt").write_text("trained")

    print(made_once(Factory(), "model", make))
""")


def test_two_workers_get_one_directory_made_once(tmp_path):
    asks = [
        subprocess.Popen(
            [sys.executable, "-c", ASK, REPO, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTEST_XDIST_WORKER": worker},
        )
        for worker in ("gw0", "gw1")
    ]
    answers = {ask.communicate(timeout=60)[0].strip() for ask in asks}
    assert answers == {str(tmp_path / "made-once" / "model")} and all(ask.returncode == 0 for ask in asks)
    assert len((tmp_path / "made").read_text().splitlines()) == 1
    assert (tmp_path / "made-once" / "model" / "model.pt").read_text() == "trained"


def test_a_make_that_fails_leaves_nothing_and_the_next_asks_again(tmp_path_factory):
    def fails(where):
        (where / "half.pt").write_text("half")
        raise RuntimeError("training failed")

    with pytest.raises(RuntimeError):
        made_once(tmp_path_factory, "fails-once", fails)
    where = made_once(tmp_path_factory, "fails-once", lambda where: (where / "model.pt").write_text("trained"))
    assert sorted(os.listdir(where)) == [".made", "model.pt"]
