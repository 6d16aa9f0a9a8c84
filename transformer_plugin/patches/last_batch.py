"""Every sentence gets a batch.

fairseq's ``data_utils.batch_by_size`` drops the last batch when its size is not a multiple of
``--required-batch-size-multiple`` (8 by default): fairseq-generate then silently translates fewer
sentences than the test set holds, and fairseq-validate scores a subset. fairseq 0.12.2 kept that
batch; so does this patch: the dropped tail comes back as one last batch, which respects
--max-tokens and --batch-size like every other.
"""

import numpy as np
from fairseq.data import data_utils

from ._patching import replace

UPSTREAM = "fairseq #5036"
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _keep_the_tail(original):
    def batch_by_size(indices, *args, **kwargs):
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = original(indices, *args, **kwargs)
        kept = sum(len(batch) for batch in batches)
        if kept < len(indices):  # the tail fairseq dropped
            batches = list(batches) + [indices[kept:]]
        return batches

    return batch_by_size


def apply() -> None:
    replace(data_utils, "batch_by_size", _keep_the_tail)
