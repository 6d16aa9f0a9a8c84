"""fairseq's batch_by_size keeps every sentence once the plugin is imported (fairseq issue #5036)."""

import numpy as np
import pytest
from fairseq.data import data_utils


@pytest.mark.parametrize("max_tokens,max_sentences", [(None, 16), (40, None), (None, 5)])
def test_every_index_lands_in_exactly_one_batch(max_tokens, max_sentences):
    sizes = np.array([10, 10, 4, 6, 5, 5, 9, 8, 7, 7, 9, 7, 3])
    batches = data_utils.batch_by_size(
        np.arange(len(sizes)),
        lambda i: sizes[i],
        max_tokens=max_tokens,
        max_sentences=max_sentences,
        required_batch_size_multiple=8,
    )
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(sizes)))
    for batch in batches:
        if max_sentences:
            assert len(batch) <= max(max_sentences, 8)
        if max_tokens:
            assert len(batch) * sizes[batch].max() <= max_tokens
