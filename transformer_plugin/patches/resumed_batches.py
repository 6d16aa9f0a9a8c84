"""Resuming gives the batches an uninterrupted run would have had.

When a task may reuse its training iterator across epochs (translation does), fairseq builds the
batches once, from the dataset order drawn with ``seed + epoch`` for the epoch the process *starts*
in, and reshuffles those batches every epoch. A run resumed from an end-of-epoch checkpoint
therefore starts with epoch 2's draw and trains on differently composed batches than a run that
never stopped (sentences of equal length are grouped differently). This patch always builds the
reusable batches with epoch 1's draw, so every run, however often resumed, sees the same batches;
the per-epoch shuffle is unchanged.
"""

from fairseq.tasks import FairseqTask

from ._patching import replace

UPSTREAM = None  # no upstream issue found
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _epoch_one_batches(original):
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

    return get_batch_iterator


def apply() -> None:
    replace(FairseqTask, "get_batch_iterator", _epoch_one_batches)
