"""fairseq reads its own checkpoints under torch >= 2.6, without switching off torch's safety check.

torch >= 2.6 unpickles with ``weights_only=True``: only tensors, plain containers and an allowlist of
classes may be rebuilt. Stock fairseq then fails on its own checkpoints (fairseq #5603, #5610).
``apply()`` (fairseq imports ``--user-dir`` before it loads any checkpoint) allowlists exactly the
classes that fairseq checkpoints hold, and nothing else:

- ``argparse.Namespace``: the ``args`` of checkpoints written by older fairseq versions;
- numpy int64 and float64 arrays (their class, dtypes and rebuild function): the ``--eval-bleu``
  counts saved in ``extra_state`` (float64 where data-parallel workers summed them);
- omegaconf containers and nodes, ``typing.Any``, ``collections.defaultdict`` and fairseq's
  ``_TensorPlaceholder``: in distributed training rank 0 loads the checkpoint and re-pickles the
  loaded state (its config as a ``DictConfig``) to broadcast it to the other ranks.

It also replaces ``fairseq.checkpoint_utils.load_checkpoint_to_cpu`` (the one function through which
fairseq-train's ``--restore-file``, fairseq-generate, fairseq-validate and fairseq-interactive load
checkpoints) so that a refused or damaged checkpoint fails with an error naming the file:
:class:`UnsafeCheckpointError` for a checkpoint that holds anything else (its pickle is never run),
:class:`CorruptCheckpointError` for a truncated or unreadable one.
"""

import argparse
import collections
import functools
import os
import pickle
import re
import traceback
import typing

import numpy as np
import omegaconf
import torch
from fairseq import checkpoint_utils
from fairseq.distributed.utils import _TensorPlaceholder

from ._patching import replace

UPSTREAM = "fairseq #5603"
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


class UnsafeCheckpointError(pickle.UnpicklingError):
    """The checkpoint holds a class or function outside the allowlist; nothing in it was run."""


class CorruptCheckpointError(RuntimeError):
    """The checkpoint file is truncated or not a torch checkpoint."""


_reconstruct = (np._core if hasattr(np, "_core") else np.core).multiarray._reconstruct

FAIRSEQ_CHECKPOINT_GLOBALS = [
    argparse.Namespace,
    # --eval-bleu metrics: numpy arrays of int64 counts (float64 once data-parallel workers summed them),
    # written under numpy 2 or numpy 1
    np.ndarray,
    np.dtype,
    type(np.dtype(np.int64)),
    type(np.dtype(np.float64)),
    (_reconstruct, "numpy._core.multiarray._reconstruct"),
    (_reconstruct, "numpy.core.multiarray._reconstruct"),
    # distributed resume: the re-pickled state of rank 0
    omegaconf.DictConfig,
    omegaconf.ListConfig,
    omegaconf.base.ContainerMetadata,
    omegaconf.base.Metadata,
    omegaconf.nodes.AnyNode,
    typing.Any,
    collections.defaultdict,
    dict,
    list,
    int,
    _TensorPlaceholder,
]


def allow_fairseq_checkpoint_globals() -> None:
    """Add exactly FAIRSEQ_CHECKPOINT_GLOBALS to torch's weights_only allowlist (idempotent)."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_GLOBALS)


_REFUSED = re.compile(r"Unsupported global|unsupported GLOBAL|Can only build|is blocked")


def _raised_by_torch_load(e: BaseException) -> bool:
    return any(
        frame.filename.endswith(os.path.join("torch", "serialization.py"))
        for frame in traceback.extract_tb(e.__traceback__)
    )


def _named_error(path, e: BaseException):
    """The plugin's error, naming ``path``, for an exception raised inside torch.load (None: not ours)."""
    if isinstance(e, (UnsafeCheckpointError, CorruptCheckpointError, FileNotFoundError)) or not _raised_by_torch_load(
        e
    ):
        return None  # a missing file stays FileNotFoundError, which already names it
    message = str(e)
    if isinstance(e, pickle.UnpicklingError) and _REFUSED.search(message):
        return UnsafeCheckpointError(
            f"refused to load checkpoint {path}: it holds objects outside the allowlist of fairseq checkpoint"
            f" classes (transformer_plugin.patches.checkpoint_allowlist); nothing in it was run. {message}"
        )
    return CorruptCheckpointError(
        f"checkpoint {path} is truncated or not a torch checkpoint: {type(e).__name__} {message}"
    )


def load_checked(path, **kwargs):
    """``torch.load(path, weights_only=True)`` on CPU; errors name ``path``.

    Raises FileNotFoundError, :class:`UnsafeCheckpointError` or :class:`CorruptCheckpointError`.
    """
    kwargs.setdefault("map_location", "cpu")
    try:
        return torch.load(path, weights_only=True, **kwargs)
    except Exception as e:
        error = _named_error(path, e)
        if error is None:
            raise
        raise error from None


def _named_errors(original):
    @functools.wraps(original)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return original(path, *args, **kwargs)
        except Exception as e:
            error = _named_error(path, e)
            if error is None:
                raise
            raise error from None

    return load_checkpoint_to_cpu


def apply() -> None:
    allow_fairseq_checkpoint_globals()
    replace(checkpoint_utils, "load_checkpoint_to_cpu", _named_errors)
