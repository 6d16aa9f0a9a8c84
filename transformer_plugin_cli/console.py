"""What every ``vaswani-*`` command does alike, applied to each ``main`` as ``@console_script``:

- output closed early (``vaswani-prepare-debian-l10n packages | head -5``, a pager quit): the command ends at
  once, quietly, with status 141 (128 + SIGPIPE, what the shell reports of a Unix tool that SIGPIPE ended),
  where Python would print a BrokenPipeError traceback, and another at exit. Only standard output counts:
  a broken pipe to a program the tool started is an error, and raised as one;
- a full disk or quota: one line naming the file and the space free (:func:`..files.exits_on_a_full_disk`).

Nothing here imports fairseq: the light tools stay light.
"""

import argparse
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


def kebab_case_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every long option of ``parser`` spelled ``--kebab-case``, as every tool spells its own, the options that
    CTranslate2's converters declare (``--output_dir``, ``--vocab_mapping``) too; each also parses spelled
    ``--snake_case``, as the exports' options were and users' scripts type them. ``--help`` shows the kebab-case
    spelling alone."""
    for action in parser._actions:
        for i, option in enumerate(action.option_strings):
            if option.startswith("--"):
                kebab, snake = option.replace("_", "-"), "--" + option[2:].replace("-", "_")
                action.option_strings[i] = kebab
                for spelling in (kebab, snake):
                    parser._option_string_actions.setdefault(spelling, action)
    return parser
