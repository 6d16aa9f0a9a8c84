"""A fix to fairseq itself that this plugin applies on import: every sentence gets a batch.

fairseq's ``data_utils.batch_by_size`` (upstream main, which both Python 3.11 forks ship) drops the
last batch when its size is not a multiple of ``--required-batch-size-multiple`` (8 by default):
fairseq-generate then silently translates fewer sentences than the test set holds, and
fairseq-validate scores a subset (fairseq issue #5036). fairseq 0.12.2 kept that batch; so does
this plugin: the dropped tail comes back as one last batch, which respects --max-tokens and
--batch-size like every other.
"""

import numpy as np
from fairseq.data import data_utils


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


_wrap_batch_by_size()
