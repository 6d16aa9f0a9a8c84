"""Fixes to fairseq itself that this plugin applies on import.

Every sentence gets a batch. fairseq's ``data_utils.batch_by_size`` (upstream main, which both Python 3.11 forks ship) drops the
last batch when its size is not a multiple of ``--required-batch-size-multiple`` (8 by default):
fairseq-generate then silently translates fewer sentences than the test set holds, and
fairseq-validate scores a subset (fairseq issue #5036). fairseq 0.12.2 kept that batch; so does
this plugin: the dropped tail comes back as one last batch, which respects --max-tokens and
--batch-size like every other.

No half-written checkpoint under its final name. fairseq's ``save_checkpoint`` writes the first
checkpoint file atomically (a temporary file, then a rename) but copies it to the others, among
them ``checkpoint_last.pt``, with a plain copy: a crash during that copy leaves a truncated
``checkpoint_last.pt``, the file a re-run resumes from. The plugin makes that copy atomic too, for
local paths (remote paths keep fairseq's own handling).

Resuming gives the batches an uninterrupted run would have had. When a task may reuse its training
iterator across epochs (translation does), fairseq builds the batches once, from the dataset order
drawn with ``seed + epoch`` for the epoch the process *starts* in, and reshuffles those batches every
epoch. A run resumed from an end-of-epoch checkpoint therefore starts with epoch 2's draw and trains
on differently composed batches than a run that never stopped (sentences of equal length are
grouped differently). The plugin always builds the reusable batches with epoch 1's draw, so every
run, however often resumed, sees the same batches; the per-epoch shuffle is unchanged.

``--bf16`` trains in bfloat16, not on a TPU. fairseq's option post-processing sets ``tpu`` whenever
``bf16`` is set (``options.py``: ``if args.bf16: args.tpu = True``; fairseq issue #4696), and
fairseq-train then looks for an XLA device and dies on a CPU or a GPU. Unless ``--tpu`` itself was
given, the plugin unsets ``tpu`` before fairseq-train's ``call_main`` reads it; bf16 then means what
fairseq's trainer does with it elsewhere: the model and the batches in bfloat16, fp32 master weights
in fairseq's FP16Optimizer (no loss scaling).

``--bf16`` generates in bfloat16. fairseq-generate and fairseq-interactive cast the model to float16
for ``--fp16`` but leave it in float32 for ``--bf16``. Every fairseq model's
``prepare_for_inference_``, which they (and ``from_pretrained``) call on each loaded model, now
casts it to bfloat16 when the configuration says ``bf16``. ``from_pretrained`` passes the
checkpoint's own configuration, so a model trained with ``--bf16`` loads in bfloat16 unless
``bf16=False`` is given.

``--replace-unk`` works (fairseq issue #3533). fairseq's flag takes an optional alignment dictionary;
given alone, its placeholder value ``"@@ "`` is opened as a file and fairseq-generate dies. And the
alignments fairseq now makes (``--print-alignment``: (source, target) pairs, or rows of source
probabilities with ``soft``) are indexed as if they were one source position per target word. The
plugin reads the placeholder as "no dictionary" (an <unk> becomes the source word it is aligned to),
reads both forms of alignment, and refuses, naming the flag, a hypothesis with an <unk> but no
alignment: fairseq aligns only with --print-alignment.

``--no-repeat-ngram-size`` blocks repeated n-grams on a CPU too (fairseq issue #5206). Without
fairseq's CUDA extension, its blocker compares the n-grams of each hypothesis with the last n - 1
entries of the generator's whole token buffer, which are padding, so it never blocks anything.
The plugin compares them with the last n - 1 tokens generated, as the CUDA kernel does.

A generator that aligns asks its models for attention. fairseq's protocol for a model that computes
attention weights only on request is ``make_generation_fast_(need_attn=...)``, which fairseq-generate
calls with --print-alignment; but the hub interface's ``generate(..., print_alignment=...)`` builds
the aligning generator without it, and the generator then dies on the missing weights
(``IndexError: Dimension out of range``). fairseq's own transformer always computes them; the
paper's model, like fairseq's fconv, does so when asked. The aligning generator now sets
``need_attn`` on the decoders of its models that have one.
"""

import os
import shutil
import sys

import numpy as np
import torch
from fairseq import checkpoint_utils, utils
from fairseq.data import data_utils
from fairseq.distributed import utils as distributed_utils
from fairseq.file_io import PathManager
from fairseq.models import BaseFairseqModel
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.sequence_generator import SequenceGeneratorWithAlignment
from fairseq.tasks import FairseqTask


def _wrap_batch_by_size() -> None:
    original = data_utils.batch_by_size
    if getattr(original, "_transformer_plugin_wrapped", False):
        return

    def batch_by_size(indices, *args, **kwargs):
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = original(indices, *args, **kwargs)
        kept = sum(len(batch) for batch in batches)
        if kept < len(indices):  # the tail fairseq dropped
            batches = list(batches) + [indices[kept:]]
        return batches

    batch_by_size.__doc__ = original.__doc__
    batch_by_size._transformer_plugin_wrapped = True
    data_utils.batch_by_size = batch_by_size


class AtomicCopyPathManager(PathManager):
    """fairseq's PathManager whose ``copy`` of local files goes through a temporary file and a rename."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if PathManager.path_requires_pathmanager(dst_path) or "://" in dst_path:
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        if not overwrite and os.path.exists(dst_path):
            return False
        tmp = dst_path + ".tmp"
        shutil.copyfile(src_path, tmp)
        os.replace(tmp, dst_path)
        return True


def _wrap_get_batch_iterator() -> None:
    original = FairseqTask.get_batch_iterator
    if getattr(original, "_transformer_plugin_wrapped", False):
        return

    def get_batch_iterator(self, dataset, *args, epoch=1, **kwargs):
        reusable = (
            not kwargs.get("disable_iterator_cache", False)
            and not kwargs.get("update_epoch_batch_itr", False)
            and self.can_reuse_epoch_itr(dataset)
        )
        if not reusable or epoch == 1 or dataset in self.dataset_to_epoch_iter:
            return original(self, dataset, *args, epoch=epoch, **kwargs)
        iterator = original(self, dataset, *args, epoch=1, **kwargs)  # epoch 1's batches, as a run from the start
        iterator.epoch = epoch  # and on from the epoch being resumed
        dataset.set_epoch(epoch)
        return iterator

    get_batch_iterator.__doc__ = original.__doc__
    get_batch_iterator._transformer_plugin_wrapped = True
    FairseqTask.get_batch_iterator = get_batch_iterator


def _wrap_call_main() -> None:
    original = distributed_utils.call_main
    if getattr(original, "_transformer_plugin_wrapped", False):
        return

    def call_main(cfg, main, **kwargs):
        if cfg.common.bf16 and cfg.common.tpu and "--tpu" not in sys.argv:
            cfg.common.tpu = False  # set by fairseq's options.py for --bf16 alone
        return original(cfg, main, **kwargs)

    call_main.__doc__ = original.__doc__
    call_main._transformer_plugin_wrapped = True
    distributed_utils.call_main = call_main


def _wrap_prepare_for_inference() -> None:
    original = BaseFairseqModel.prepare_for_inference_
    if getattr(original, "_transformer_plugin_wrapped", False):
        return

    def prepare_for_inference_(self, cfg):
        original(self, cfg)
        if getattr(cfg.common, "bf16", False):
            self.to(torch.bfloat16)

    prepare_for_inference_.__doc__ = original.__doc__
    prepare_for_inference_._transformer_plugin_wrapped = True
    BaseFairseqModel.prepare_for_inference_ = prepare_for_inference_


REPLACE_UNK_WITHOUT_DICTIONARY = "@@ "  # what fairseq's --replace-unk holds when given no file


def source_positions(alignment) -> dict:
    """{target word: the source word aligned to it} from either of fairseq's alignments: hard, a list
    of (source, target) pairs; soft, one row of source probabilities (as strings) per target token."""
    if isinstance(alignment[0][0], str):  # soft
        return {tgt: max(range(len(row)), key=lambda i: float(row[i])) for tgt, row in enumerate(alignment)}
    return {int(tgt): int(src) for src, tgt in alignment}


def _wrap_replace_unk() -> None:
    original_load, original_replace = utils.load_align_dict, utils.replace_unk
    if getattr(original_replace, "_transformer_plugin_wrapped", False):
        return

    def load_align_dict(replace_unk):
        if replace_unk == REPLACE_UNK_WITHOUT_DICTIONARY:
            return {}  # copy the aligned source word
        return original_load(replace_unk)

    def replace_unk(hypo_str, src_str, alignment, align_dict, unk):
        hypo_tokens = hypo_str.split()
        if unk not in hypo_tokens:
            return hypo_str
        if alignment is None or len(alignment) == 0:
            raise ValueError(f"--replace-unk needs the alignment of each hypothesis: add --print-alignment ({hypo_str!r})")
        aligned = source_positions(alignment)
        src_tokens = src_str.split() + ["<eos>"]
        for i, token in enumerate(hypo_tokens):
            if token == unk and i in aligned:
                hypo_tokens[i] = align_dict.get(src_tokens[aligned[i]], src_tokens[aligned[i]])
        return " ".join(hypo_tokens)

    load_align_dict.__doc__, replace_unk.__doc__ = original_load.__doc__, original_replace.__doc__
    replace_unk._transformer_plugin_wrapped = True
    utils.load_align_dict, utils.replace_unk = load_align_dict, replace_unk


def _fix_no_repeat_ngram() -> None:
    if getattr(NGramRepeatBlock._no_repeat_ngram, "_transformer_plugin_wrapped", False):
        return

    def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        """Set to -inf the log-probability of every token that would repeat an n-gram of its hypothesis."""
        n = self.no_repeat_ngram_size
        start = step + 2 - n  # the n-grams that end before the last n - 1 tokens generated
        for row, generated in enumerate(tokens[:, : step + 1].tolist() if start > 0 else []):
            last = generated[start:]
            banned = [generated[i + n - 1] for i in range(start) if generated[i : i + n - 1] == last]
            if banned:
                lprobs[row, banned] = float("-inf")
        return lprobs

    _no_repeat_ngram._transformer_plugin_wrapped = True
    NGramRepeatBlock._no_repeat_ngram = _no_repeat_ngram


def _wrap_aligning_generator() -> None:
    original = SequenceGeneratorWithAlignment.__init__
    if getattr(original, "_transformer_plugin_wrapped", False):
        return

    def __init__(self, models, *args, **kwargs):
        original(self, models, *args, **kwargs)
        for model in self.model.models:  # fairseq's protocol for asking a model for attention
            decoder = getattr(model, "decoder", None)
            if hasattr(decoder, "need_attn"):
                decoder.need_attn = True

    __init__.__doc__ = original.__doc__
    __init__._transformer_plugin_wrapped = True
    SequenceGeneratorWithAlignment.__init__ = __init__


_wrap_batch_by_size()
_wrap_get_batch_iterator()
_wrap_call_main()
_wrap_prepare_for_inference()
_wrap_replace_unk()
_fix_no_repeat_ngram()
_wrap_aligning_generator()
checkpoint_utils.PathManager = AtomicCopyPathManager
