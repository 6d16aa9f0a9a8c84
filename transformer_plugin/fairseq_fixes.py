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
"""

import os
import shutil
import sys

import numpy as np
import torch
from fairseq import checkpoint_utils
from fairseq.data import data_utils
from fairseq.distributed import utils as distributed_utils
from fairseq.file_io import PathManager
from fairseq.models import BaseFairseqModel
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


_wrap_batch_by_size()
_wrap_get_batch_iterator()
_wrap_call_main()
_wrap_prepare_for_inference()
checkpoint_utils.PathManager = AtomicCopyPathManager
