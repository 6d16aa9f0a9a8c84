"""What a decoding step asks of the host: operator calls and reads from the device, in the search and in the model.

fairseq's generator (``SequenceGenerator``, beam search) decodes one position a step. On a GPU every operator call is
a kernel launched from the host, and every read of a device value on the host (``item``, ``tolist``, ``bool`` of a
tensor, and the operations whose result's size depends on the data: ``nonzero``, ``masked_select``, ``unique``,
boolean indexing) waits until the device has done all it was given, so that the host cannot run ahead. Counted on
the CPU with a ``TorchDispatchMode``, which sees every operator call on any device (views left out: they compute
nothing), and by wrapping ``Tensor.tolist`` (which reads a CPU tensor without one): the counts are the same on a GPU,
but for a read of a tensor that stays on the host there, which a run on the CPU cannot tell apart (none is left in
the plugin's decoding step).
The encoder's calls are left out (once a batch); a batch's reads at its end (its hypotheses) and at its first step
are spread over its steps. Then the time of each way of decoding, in rounds of alternating order, and whether their
hypotheses are the same.

The ways: the plugin's models with the tensor beam search (modules/beam_search.py), the same models with fairseq's
loop (``TRANSFORMER_PLUGIN_BEAM_SEARCH=fairseq``), and with ``--builtin``, fairseq's ``transformer`` with fairseq's
loop (the checkpoint ``benchmarks.speed`` trained; its converted twin is ``--path``):

    python -m benchmarks.speed --work runs/bench --repeats 1 --generate-repeats 1
    python -m benchmarks.decoding_profile --data runs/bench/data-bin --path runs/bench/ckpt_builtin/as_vaswani.pt \\
        --builtin runs/bench/ckpt_builtin/checkpoint_last.pt --out runs/bench/decoding.md
"""

import argparse
import collections
import contextlib
import os
import time
from typing import Dict, List

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.common import PLUGIN, print_table

OFF = "TRANSFORMER_PLUGIN_BEAM_SEARCH"  # transformer_plugin/patches/beam_search_in_tensors.py
# operator calls whose result the host must have: a value (item, bool) or a size that depends on the data
READS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive", "equal"}
INDEXING = {"index", "index_put", "index_put_"}


def is_read(func, args) -> bool:
    """Whether an operator call makes the host wait for the device: READS, and indexing by a boolean mask."""
    name = func.overloadpacket.__name__
    if name in READS:
        return True
    if name in INDEXING and len(args) > 1:
        return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in args[1] or ())
    return False


class Calls(TorchDispatchMode):
    """Counts operator calls that compute (views left out) and reads, under the label ``where`` holds at each
    call."""

    def __init__(self):
        super().__init__()
        self.where = "search"
        self.calls: Dict[str, int] = collections.Counter()
        self.reads: Dict[str, int] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:  # a view (a slice, a transpose) computes nothing: on a GPU it launches no kernel
            self.calls[self.where] += 1
        if is_read(func, args):
            self.reads[self.where] += 1
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def reading_lists(self):
        """``Tensor.tolist`` counted as a read (on a CPU it reads without an operator call)."""
        original = torch.Tensor.tolist

        def tolist(tensor):
            self.reads[self.where] += 1
            return original(tensor)

        torch.Tensor.tolist = tolist
        try:
            yield
        finally:
            torch.Tensor.tolist = original


def labelled(calls: Calls, where: str, fn):
    def run(*args, **kwargs):
        before, calls.where = calls.where, where
        try:
            return fn(*args, **kwargs)
        finally:
            calls.where = before

    return run


def count(models, dictionary, samples, **settings) -> Dict[str, float]:
    """Operator calls and reads a decoding step over ``samples`` (fairseq batches), in the search (the generator's
    own bookkeeping) and in the model (its decoder steps and the reordering of its caches), the encoder left out (once
    a batch); ``settings``: SequenceGenerator's."""
    from fairseq.sequence_generator import SequenceGenerator

    generator = SequenceGenerator(models, dictionary, **settings)
    calls, steps = Calls(), 0
    ensemble = generator.model
    forward_decoder = ensemble.forward_decoder

    def step(*args, **kwargs):
        nonlocal steps
        steps += 1
        return forward_decoder(*args, **kwargs)

    ensemble.forward_decoder = labelled(calls, "model", step)
    for name in ("reorder_incremental_state", "reorder_encoder_out"):
        setattr(ensemble, name, labelled(calls, "model", getattr(ensemble, name)))
    ensemble.forward_encoder = labelled(calls, "encoder", ensemble.forward_encoder)
    with torch.no_grad(), calls, calls.reading_lists():
        for sample in samples:
            generator.forward(sample)
    found = {"steps": steps, "batches": len(samples)}
    for where in ("search", "model"):
        found[f"{where} calls a step"] = calls.calls[where] / steps
        found[f"{where} reads a step"] = calls.reads[where] / steps
    found["calls a step"] = found["search calls a step"] + found["model calls a step"]
    found["reads a step"] = found["search reads a step"] + found["model reads a step"]
    return found


@contextlib.contextmanager
def search_path(path: str):
    before = os.environ.get(OFF)
    os.environ[OFF] = path
    try:
        yield
    finally:
        if before is None:
            del os.environ[OFF]
        else:
            os.environ[OFF] = before


def load(path: str, data: str, device: str = "cpu", dtype: torch.dtype = torch.float32):
    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=PLUGIN))
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": data})
    for model in models:
        model.prepare_for_inference_(cfg)
        model.to(device=device, dtype=dtype).eval()
    return models, task, cfg


def batches(task, subset: str, batch_size: int, max_sentences: int, device: str = "cpu") -> List[dict]:
    from fairseq import utils

    task.load_dataset(subset)
    dataset = task.dataset(subset)
    iterator = task.get_batch_iterator(dataset=dataset, max_sentences=batch_size, seed=1, num_workers=0)
    found, sentences = [], 0
    for sample in iterator.next_epoch_itr(shuffle=False):
        found.append(utils.move_to_cuda(sample) if device == "cuda" else sample)
        sentences += len(sample["id"])
        if max_sentences and sentences >= max_sentences:
            break
    return found


def decode(models, dictionary, samples, settings) -> Dict[int, List[int]]:
    """Every sentence's best hypothesis (token ids), by its id."""
    from fairseq.sequence_generator import SequenceGenerator

    generator = SequenceGenerator(models, dictionary, **settings)
    found = {}
    with torch.no_grad():
        for sample in samples:
            for i, hyps in zip(sample["id"].tolist(), generator.forward(sample)):
                found[i] = hyps[0]["tokens"].tolist()
    return found


def parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a fairseq data-bin")
    p.add_argument("--path", required=True, help="a vaswani_transformer checkpoint")
    p.add_argument("--builtin", help="fairseq's transformer with the same weights, for fairseq's generation")
    p.add_argument("--subset", default="test")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-sentences", type=int, default=0, help="decode only this many (0: the whole subset)")
    p.add_argument("--count-sentences", type=int, default=128, help="the sentences whose steps are counted")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds, in alternating order")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="auto: cuda where there is one")
    p.add_argument("--bf16", action="store_true", help="the models in bfloat16 (fairseq-generate's --bf16)")
    p.add_argument("--out", help="write the table here (markdown)")
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    settings = dict(beam_size=a.beam, len_penalty=a.lenpen, max_len_a=1, max_len_b=50)  # the recipes' decoding
    ways = {}
    dtype = torch.bfloat16 if a.bf16 else torch.float32
    models, task, _ = load(a.path, a.data, a.device, dtype)
    ways["vaswani_transformer, tensor beam search"] = (models, "tensors")
    ways["vaswani_transformer, fairseq's loop"] = (models, "fairseq")
    if a.builtin:
        ways["fairseq transformer, fairseq's loop"] = (load(a.builtin, a.data, a.device, dtype)[0], "fairseq")
    dictionary = task.target_dictionary
    samples = batches(task, a.subset, a.batch_size, a.max_sentences, a.device)
    counted = batches(task, a.subset, a.batch_size, a.count_sentences, a.device)
    synchronize = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    sentences = sum(len(s["id"]) for s in samples)

    seconds, hypotheses, counts = collections.defaultdict(list), {}, {}
    for name, (models_, path) in ways.items():
        with search_path(path):
            counts[name] = count(models_, dictionary, counted, **settings)
    names = list(ways)
    for r in range(a.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            models_, path = ways[name]
            with search_path(path):
                synchronize()
                start = time.perf_counter()
                hypotheses[name] = decode(models_, dictionary, samples, settings)
                synchronize()
                seconds[name].append(time.perf_counter() - start)
            print(f"round {r + 1} {name}: {sentences / seconds[name][-1]:.1f} sentences/s", flush=True)

    reference = names[-1]
    rows = []
    for name in names:
        c, best = counts[name], min(seconds[name])
        same = sum(hypotheses[name][i] == hypotheses[reference][i] for i in hypotheses[reference])
        rows.append(
            [
                name,
                f"{c['search calls a step']:.0f} / {c['search reads a step']:.1f}",
                f"{c['model calls a step']:.0f} / {c['model reads a step']:.1f}",
                f"{c['calls a step']:.0f} / {c['reads a step']:.1f}",
                f"{sentences / best:.1f}",
                f"{min(seconds[reference]) / best:.2f}x",
                f"{same:,} of {len(hypotheses[reference]):,}",
            ]
        )
    header = [
        "decoding",
        "search: calls / reads a step",
        "model: calls / reads a step",
        "a step",
        f"sentences/s (best of {a.rounds})",
        f"against {reference}",
        "hypotheses as it",
    ]
    note = (
        f"beam {a.beam}, lenpen {a.lenpen}, max length source + 50, batches of {a.batch_size}; {sentences:,} "
        f"sentences of {a.subset}, calls and reads counted over the steps of the first {a.count_sentences}; "
        + (f"{torch.cuda.get_device_name()}" if a.device == "cuda" else f"CPU, {torch.get_num_threads()} threads")
        + (", bfloat16" if a.bf16 else ", float32")
    )
    lines = [note, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    print_table("\n".join(lines), a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
