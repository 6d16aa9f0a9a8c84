"""The fixes to fairseq the plugin applies: every sentence batched (fairseq issue #5036), checkpoint
copies that never leave a half-written file under the final name, and --bf16 inference in bfloat16."""

import shutil

import numpy as np
import pytest
from fairseq import checkpoint_utils
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


def test_checkpoint_copy_is_atomic(tmp_path, monkeypatch):
    src, dst = tmp_path / "checkpoint_3_300.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"new" * 1000)
    dst.write_bytes(b"old complete checkpoint")
    real_copyfile = shutil.copyfile

    def crash_half_way(a, b):
        with open(b, "wb") as f:
            f.write(open(a, "rb").read()[:1500])
        raise OSError("killed while copying")

    monkeypatch.setattr(shutil, "copyfile", crash_half_way)
    with pytest.raises(OSError, match="killed"):
        checkpoint_utils.PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == b"old complete checkpoint"  # the last complete one survives
    monkeypatch.setattr(shutil, "copyfile", real_copyfile)
    assert checkpoint_utils.PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == src.read_bytes()


def test_bf16_inference_casts_every_fairseq_model(dictionary):
    """prepare_for_inference_ (what fairseq-generate, fairseq-interactive and from_pretrained call)
    casts to bfloat16 under --bf16: the plugin's model and fairseq's own transformer alike, so that a
    comparison of the two in bfloat16 is one."""
    import torch
    from fairseq.models.transformer import TransformerModel, base_architecture
    from omegaconf import OmegaConf

    from helpers import DummyTask, build_vaswani, vaswani_args

    args = vaswani_args("vaswani_tiny")  # the fairseq namespace, then fairseq's own names
    args.arch, args.encoder_layers, args.decoder_layers = "transformer", 1, 1
    args.encoder_embed_dim = args.decoder_embed_dim = 32
    base_architecture(args)
    for model in (build_vaswani(dictionary), TransformerModel.build_model(args, DummyTask(dictionary))):
        model.prepare_for_inference_(OmegaConf.create({"common": {"bf16": False}, "generation": {"beam": 4}}))
        assert {p.dtype for p in model.parameters()} == {torch.float32}
        model.prepare_for_inference_(OmegaConf.create({"common": {"bf16": True}, "generation": {"beam": 4}}))
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}, type(model).__name__
