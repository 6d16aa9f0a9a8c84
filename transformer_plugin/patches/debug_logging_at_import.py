"""Importing fairseq does not turn on every library's debug messages.

``fairseq/models/wav2vec/wav2vec2_classification.py`` calls ``logging.basicConfig(level=logging.DEBUG)``
when it is imported, and ``import fairseq`` imports every model. Unless logging was configured
before, the root logger then passes on every library's debug messages, in Python's bare format: a
plot drawn after it (the recipes' reports) prints about 290 lines of matplotlib's font search, and
fairseq-generate prints hydra's. fairseq's own ``logging.basicConfig(format=..., level=LOGLEVEL)``
in fairseq-generate, -preprocess and -interactive then does nothing, because the root logger already
has a handler (the mechanism of fairseq #3592, which fixed it for fairseq-train only).

This patch gives the root logger the level that fairseq's CLIs ask for, ``LOGLEVEL`` from the
environment (``INFO`` unset), and that handler fairseq's format, when the handler is fairseq's doing:
- where this module is imported before fairseq (a program that imports the plugin first, the
  plugin's own tools), when importing fairseq added it;
- where fairseq came first (fairseq's CLIs with ``--user-dir``), when the root logger is at DEBUG
  with nothing but one stderr handler in the bare format, as that call leaves it.
``LOGLEVEL=DEBUG`` brings the debug messages back, as it does for fairseq-train. A program that
configured its logging before it imported fairseq is left as it is; one that set DEBUG with
``logging.basicConfig`` after importing fairseq and before the plugin needs ``LOGLEVEL=DEBUG`` as well.
The handler's stream is not changed (stderr).
"""

import logging
import os
import sys

# The root logger's handlers before fairseq is imported, where the plugin comes first (patches/__init__
# imports this module before any other patch, and nothing of the plugin imports fairseq before it).
_HANDLERS_BEFORE_FAIRSEQ = None if "fairseq" in sys.modules else tuple(logging.getLogger().handlers)

import fairseq.models  # noqa: E402, F401  (imports every model, wav2vec2_classification among them)

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"

FAIRSEQ_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"  # fairseq_cli's
FAIRSEQ_DATEFMT = "%Y-%m-%d %H:%M:%S"


def _bare_format(handler: logging.Handler) -> bool:
    """Python's own format, as ``logging.basicConfig()`` without ``format=`` leaves it."""
    return handler.formatter is None or handler.formatter._fmt == logging.BASIC_FORMAT


def _bare_stderr_handler(handler: logging.Handler) -> bool:
    return type(handler) is logging.StreamHandler and handler.stream is sys.stderr and _bare_format(handler)


def _set_by_fairseq(root: logging.Logger) -> list:
    """The root logger's handlers that importing fairseq added; empty when it added none."""
    if root.level != logging.DEBUG:
        return []
    if _HANDLERS_BEFORE_FAIRSEQ is not None:
        return [h for h in root.handlers if h not in _HANDLERS_BEFORE_FAIRSEQ]
    return list(root.handlers) if len(root.handlers) == 1 and _bare_stderr_handler(root.handlers[0]) else []


def apply() -> None:
    root = logging.getLogger()
    added = _set_by_fairseq(root)
    if not added:
        return
    try:
        root.setLevel(os.environ.get("LOGLEVEL", "INFO").upper())
    except ValueError:  # not a level's name: fairseq's CLIs would stop on it; the plugin takes INFO
        root.setLevel(logging.INFO)
    for handler in added:
        if _bare_format(handler):
            handler.setFormatter(logging.Formatter(FAIRSEQ_FORMAT, FAIRSEQ_DATEFMT))
