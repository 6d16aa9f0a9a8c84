"""Shared fixtures: a small joined dictionary and a task-like object, as fairseq's own tests build them."""

import os
import sys
from argparse import Namespace

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import transformer_plugin  # noqa: E402,F401  (registers the plugin's parts)
from fairseq.data import Dictionary  # noqa: E402


def make_dictionary(num_words: int) -> Dictionary:
    d = Dictionary()
    for i in range(num_words):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=1)
    return d


class DummyTask:
    """What build_model needs from a translation task."""

    def __init__(self, src_dict, tgt_dict=None):
        self.source_dictionary = src_dict
        self.target_dictionary = tgt_dict if tgt_dict is not None else src_dict


def vaswani_args(arch: str = "vaswani_tiny", **overrides) -> Namespace:
    """The Namespace fairseq-train would build for ``--arch arch`` plus the given flags."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = Namespace(arch=arch, **overrides)
    ARCH_CONFIG_REGISTRY[arch](args)
    return args


def build_vaswani(dictionary, arch="vaswani_tiny", **overrides):
    from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel

    overrides.setdefault("share_all_embeddings", True)
    return VaswaniTransformerModel.build_model(vaswani_args(arch, **overrides), DummyTask(dictionary))


def random_batch(dictionary, batch_size=3, src_len=7, tgt_len=6, seed=0, left_pad_source=True):
    """src_tokens (B, S) with different lengths and padding; prev_output_tokens (B, T) right-padded."""
    g = torch.Generator().manual_seed(seed)
    nspecial, V = dictionary.nspecial, len(dictionary)
    pad, eos = dictionary.pad(), dictionary.eos()
    src = torch.full((batch_size, src_len), pad)
    tgt = torch.full((batch_size, tgt_len), pad)
    src_lengths = torch.tensor([src_len - (i % 3) for i in range(batch_size)])
    for i in range(batch_size):
        n = int(src_lengths[i])
        words = torch.randint(nspecial, V, (n - 1,), generator=g).tolist() + [eos]
        if left_pad_source:
            src[i, src_len - n :] = torch.tensor(words)
        else:
            src[i, :n] = torch.tensor(words)
        m = tgt_len - (i % 2)
        tgt[i, :m] = torch.tensor([eos] + torch.randint(nspecial, V, (m - 1,), generator=g).tolist())
    return src, src_lengths, tgt


@pytest.fixture
def dictionary():
    return make_dictionary(40)
