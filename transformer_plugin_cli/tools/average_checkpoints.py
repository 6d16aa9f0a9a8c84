"""Section 6.1: average the parameters of the last checkpoints (5 for base, 20 for big).

fairseq's ``scripts/average_checkpoints.py`` is not part of the fairseq package; this is the plugin's
own averager with the same flags:

    vaswani-average-checkpoints --inputs CKPT_DIR --num-update-checkpoints 5 --output avg.pt
    python -m transformer_plugin_cli.tools.average_checkpoints --inputs a.pt b.pt c.pt --output avg.pt

- ``--num-update-checkpoints N`` takes the last N saved model states by the update count stored in
  them, whatever name fairseq gave the file (``checkpoint_{epoch}_{update}.pt``, and for a save on
  an epoch end ``checkpoint{epoch}.pt`` or ``checkpoint_last.pt``), and prints the update of each;
  fairseq's script reads only the first kind of name and so leaves out a final state saved on an
  epoch end;
- every checkpoint is loaded through the plugin's allowlist (transformer_plugin/patches/checkpoint_allowlist.py), never
with the
  safety check off;
- floating-point parameters are averaged in float32 (or float64 if stored so) and written back in
  their stored dtype; integer and boolean buffers are not averaged: they must be equal in every
  input and are kept as they are;
- checkpoints of different architectures, parameter names or shapes are refused, naming the files;
- the output is the first input (with --num-*-checkpoints: the newest) with its model replaced by
  the average, so fairseq-generate and --restore-file read it as any checkpoint, plus a list
  ``averaged_from`` of the input paths; it is written to a temporary file and renamed, so a crash
  never leaves a half-written output.
"""

import argparse
import collections
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

import torch
from transformer_plugin.patches.checkpoint_allowlist import CorruptCheckpointError, UnsafeCheckpointError, load_checked

from ..console import console_script
from ..files import save_torch


class CheckpointMismatchError(ValueError):
    """The inputs are not checkpoints of one architecture."""


NUMBERED = re.compile(r"checkpoint_\d+_(\d+)\.pt")  # fairseq's --save-interval-updates: checkpoint_{epoch}_{update}.pt
EPOCH_END = re.compile(r"checkpoint(\d+)\.pt")  # fairseq's epoch ends: checkpoint{epoch}.pt


def saved_update(path: str) -> Optional[int]:
    """The update count at which fairseq saved ``path`` (from the checkpoint itself), or None."""
    state = load_checked(path, mmap=True)
    history = state.get("optimizer_history") or [{}]
    updates = history[-1].get("num_updates")
    return int(updates) if updates is not None else None


def last_checkpoints(
    directory: str, n: int, update_based: bool, upper_bound: Optional[int] = None, fewer: bool = False
) -> List[Tuple[int, str]]:
    """The n last saved model states in ``directory`` as (update or epoch, path), newest first.

    By epoch (``update_based=False``): the ``checkpoint{epoch}.pt`` files, as fairseq's script.

    By update: every model state fairseq saved under any of its names, ordered by the update count
    at which it was saved. ``checkpoint_{epoch}_{update}.pt`` carries it in its name;
    ``checkpoint{epoch}.pt`` and ``checkpoint_last.pt`` are read for it. This matters when a save
    interval lands on an epoch end: fairseq then writes that state only as ``checkpoint{epoch}.pt``
    (or, with ``--no-epoch-checkpoints``, only as ``checkpoint_last.pt``), and going by the numbered
    names alone would leave the newest state out of the average. A state saved under two names is
    taken once (the numbered name first). ``checkpoint_best.pt`` is not a "last" state and is left
    out. ``upper_bound`` is an epoch or an update count like the ordering. ``fewer``: as many as there
    are, at least one, where there are fewer than n (a training that stopped early, --patience).
    """
    found: Dict[int, str] = {}
    names = sorted(os.listdir(directory), key=lambda name: (not NUMBERED.fullmatch(name), name != "checkpoint_last.pt"))
    for name in names:
        path = os.path.join(directory, name)
        numbered, epoch_end = NUMBERED.fullmatch(name), EPOCH_END.fullmatch(name)
        if not update_based:
            key = int(epoch_end.group(1)) if epoch_end else None
        elif numbered:
            key = int(numbered.group(1))
        elif epoch_end or name == "checkpoint_last.pt":
            key = saved_update(path)
        else:
            key = None
        if key is not None and key not in found and (upper_bound is None or key <= upper_bound):
            found[key] = path
    kind = "update" if update_based else "epoch"
    if len(found) < n and not (fewer and found):
        raise FileNotFoundError(
            f"asked for the last {n} {kind} checkpoints in {directory}, found {len(found)}"
            + (f" at or below {upper_bound}" if upper_bound is not None else "")
            + (f" ({', '.join(f'{kind} {k}' for k in sorted(found))})" if found else "")
        )
    return sorted(found.items(), reverse=True)[:n]


def _architecture(state) -> Optional[str]:
    cfg = state.get("cfg")
    if cfg is not None and cfg.get("model") is not None:
        model = cfg["model"]
        return model.get("_name") if isinstance(model, dict) else getattr(model, "_name", None)
    args = state.get("args")
    return getattr(args, "arch", None) if args is not None else None


def average_checkpoints(paths: List[str]) -> Dict:
    """The element-wise mean of the models in ``paths``; see the module doc for what else is kept."""
    if not paths:
        raise ValueError("no checkpoints to average")
    if len(set(map(os.path.abspath, paths))) != len(paths):
        raise ValueError(f"a checkpoint is listed twice: {paths}")
    sums: "collections.OrderedDict[str, torch.Tensor]" = collections.OrderedDict()
    first_path, first_arch, first_state = paths[0], None, None
    for i, path in enumerate(paths):
        state = load_checked(path)
        if "model" not in state:
            raise CheckpointMismatchError(f"{path} has no 'model' entry: not a fairseq checkpoint")
        model, arch = state["model"], _architecture(state)
        if i == 0:
            first_arch, first_state = arch, state
        elif arch != first_arch:
            raise CheckpointMismatchError(f"{path} is a {arch} checkpoint, {first_path} a {first_arch} checkpoint")
        if i > 0 and list(model) != list(sums):
            missing, extra = set(sums) - set(model), set(model) - set(sums)
            raise CheckpointMismatchError(
                f"{path} and {first_path} hold different parameters (only in {first_path}: {sorted(missing)[:5]};"
                f" only in {path}: {sorted(extra)[:5]})"
            )
        for name, tensor in model.items():
            if i > 0 and tensor.shape != sums[name].shape:
                raise CheckpointMismatchError(
                    f"{name} has shape {tuple(tensor.shape)} in {path} but {tuple(sums[name].shape)} in {first_path}"
                )
            if tensor.is_floating_point():
                accumulated = tensor.to(torch.float64 if tensor.dtype == torch.float64 else torch.float32)
                sums[name] = accumulated.clone() if i == 0 else sums[name] + accumulated
            elif i == 0:
                sums[name] = tensor.clone()
            elif not torch.equal(tensor, sums[name]):
                raise CheckpointMismatchError(f"integer buffer {name} differs between {path} and {first_path}")
    dtypes = {name: t.dtype for name, t in first_state["model"].items()}
    averaged = collections.OrderedDict(
        (name, (t / len(paths)).to(dtypes[name]) if t.is_floating_point() else t) for name, t in sums.items()
    )
    output = dict(first_state)
    output["model"] = averaged
    output["averaged_from"] = [str(p) for p in paths]
    return output


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Average the parameters of fairseq checkpoints (Section 6.1 of the paper)."
    )
    parser.add_argument("--inputs", required=True, nargs="+", help="checkpoint files, or one directory")
    parser.add_argument("--output", required=True, help="where to write the averaged checkpoint")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpoint{epoch}.pt")
    group.add_argument("--num-update-checkpoints", type=int, help="average the last N checkpoint_{epoch}_{update}.pt")
    parser.add_argument("--checkpoint-upper-bound", type=int, help="ignore checkpoints after this epoch/update")
    parser.add_argument(
        "--or-fewer",
        action="store_true",
        help="with a directory: average the last N, or all there are when a training that stopped early "
        "(--patience) saved fewer, saying so",
    )
    args = parser.parse_args(argv)

    count = args.num_epoch_checkpoints or args.num_update_checkpoints
    if count is not None and (len(args.inputs) != 1 or not os.path.isdir(args.inputs[0])):
        parser.error("--num-epoch-checkpoints/--num-update-checkpoints need --inputs to be one directory")
    if count is None and any(os.path.isdir(p) for p in args.inputs):
        parser.error("a directory as --inputs needs --num-epoch-checkpoints or --num-update-checkpoints")
    if count is not None and count < 1:
        parser.error("the number of checkpoints must be at least 1")
    try:
        if count is not None:
            update_based = args.num_update_checkpoints is not None
            chosen = last_checkpoints(
                args.inputs[0], count, update_based, args.checkpoint_upper_bound, fewer=args.or_fewer
            )
            kind = "update" if update_based else "epoch"
            if len(chosen) < count:
                print(
                    f"{args.inputs[0]} holds {len(chosen)} {kind} checkpoints, not {count}: training stopped early; "
                    f"averaging the {len(chosen)} there are"
                )
            labels = [f"{kind} {key}: {path}" for key, path in chosen]
            paths = [path for _, path in chosen]
        else:
            paths = args.inputs
            labels = paths
        averaged = average_checkpoints(paths)
    except (CheckpointMismatchError, CorruptCheckpointError, UnsafeCheckpointError, OSError, ValueError) as e:
        print(f"average_checkpoints: error: {e}", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    save_torch(averaged, args.output)
    print(f"averaged {len(paths)} checkpoints into {args.output}:")
    for label in labels:
        print(f"  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
