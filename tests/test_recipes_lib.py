"""recipes/lib.sh: the launcher of data-parallel workers stops all of them when one fails."""

import os
import subprocess
import sys

from conftest import REPO

FAKE_WORKER = r"""#!/usr/bin/env bash
# rank 1 fails after a second; rank 0 would run for a minute (a worker left waiting on a dead peer)
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --distributed-rank ] && { j=$((i + 1)); rank=${!j}; }; done
echo "rank $rank started" > "$MARKERS/rank$rank"
if [ "$rank" = 1 ]; then sleep 1; exit 3; fi
exec sleep 60  # one process, like fairseq-train
"""


def test_one_failing_worker_stops_the_others(tmp_path):
    worker = tmp_path / "fake-train"
    worker.write_text(FAKE_WORKER)
    worker.chmod(0o755)
    script = f'set -euo pipefail; WORK="{tmp_path}"; source "{REPO}/recipes/lib.sh"; ' \
             f'train_workers 2 "{tmp_path}/train.log" "{worker}" --some-flag'
    env = dict(os.environ, MARKERS=str(tmp_path), PYTHON=sys.executable)
    # rank 0 alone would take 60 s: finishing within the timeout means it was stopped, not waited for
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=45)
    assert proc.returncode == 3, proc.stderr
    assert "a training worker failed (exit 3)" in proc.stderr
    assert (tmp_path / "rank0").exists() and (tmp_path / "rank1").exists()
