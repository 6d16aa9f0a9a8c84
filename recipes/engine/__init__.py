"""The recipes' engine: what recipes/lib.sh asks of Python. The recipes declare their stages in shell; the engine
decides every stage before any work, runs them in order, and stops every process a stage started when the
recipe is interrupted. Not a console script: lib.sh runs ``python -m recipes.engine``
(:mod:`.__main__`) with the environment's python. Nothing here imports torch or fairseq (it runs at every start
of a recipe), except :func:`recipes.planner.layout.cuda_devices` in a real run on GPUs.

- :mod:`.verbs`: the engine's own verbs a stage's command may start with (capture, train_workers, launch_training);
- :mod:`.stamps`: a stage, what it makes (its identity: command, digests of what it reads) and its stamp;
- :mod:`.decisions`: skip, run, redo, stop or wait, for every stage, from what each reads and writes;
- :mod:`.space`: what the stages that run will write, against the disk's free space;
- :mod:`recipes.planner.layout`: machines, processes and batch of a training; :mod:`.failures`: why a stage failed, in
  words;
- :mod:`.processes`: process groups, signals, leftovers; :mod:`.launching`: one stage's command, run or shown;
- :mod:`.runner`: the run, stage after stage.
"""

from recipes.engine.decisions import (  # noqa: F401
    Decision,
    changed_settings,
    changed_words,
    decide,
    reads_from,
    stop_message,
    why_changed,
)
from recipes.engine.failures import FAILURES, StageFailed, exit_status, training_failure  # noqa: F401
from recipes.planner.layout import LayoutError, free_port, layout, worker_commands, worker_threads  # noqa: F401
from recipes.engine.stamps import (  # noqa: F401
    Context,
    DigestCache,
    Stage,
    digest,
    identity,
    read_stamp,
    setting_names,
    write_stamp,
)
from recipes.engine.runner import Runner, read_plan  # noqa: F401
