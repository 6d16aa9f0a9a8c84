"""What every ``vaswani-*`` command does alike, applied to each ``main`` as ``@console_script``:

- output closed early (``vaswani-prepare-debian-l10n packages | head -5``, a pager quit): the command ends at
  once, quietly, with status 141 (128 + SIGPIPE, what the shell reports of a Unix tool that SIGPIPE ended),
  where Python would print a BrokenPipeError traceback, and another at exit. Only standard output counts:
  a broken pipe to a program the tool started is an error, and raised as one;
- a full disk or quota: one line naming the file and the space free (:func:`..files.exits_on_a_full_disk`).

Nothing here imports fairseq: the light tools stay light.
"""

import functools
import os
import select
import signal
import sys
from typing import Callable

from transformer_plugin_cli.files import exits_on_a_full_disk

CLOSED_OUTPUT_STATUS = 128 + signal.SIGPIPE  # 141


def output_closed() -> bool:
    """Whether standard output is a pipe (or socket) whose reading end is gone: poll reports an error or a
    hang-up on it."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file (a test's capture)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def console_script(main: Callable) -> Callable:
    """``main`` as a command: quiet with status 141 once its output is closed, one line on a full disk."""
    main = exits_on_a_full_disk(main)

    @functools.wraps(main)
    def command(*args, **kwargs):
        try:
            status = main(*args, **kwargs)
            sys.stdout.flush()  # what is still buffered fails here, not in the interpreter's exit
            return status
        except BrokenPipeError:
            if not output_closed():
                raise
            # the rest of what is buffered goes nowhere, so that Python's exit has nothing to say
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            return CLOSED_OUTPUT_STATUS

    command.__console_script__ = True
    return command
