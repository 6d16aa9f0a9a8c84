"""The patches to fairseq the plugin applies (transformer_plugin/patches/): every sentence batched (fairseq issue
#5036), checkpoint copies that never leave a half-written file under the final name, --bf16 inference in bfloat16,
--replace-unk (#3533), --no-repeat-ngram-size on a CPU (#5206), and alignments from a generator
built without fairseq-generate's --print-alignment, and distributed workers that join their gloo threads
before they exit."""

import math
import os
import shutil

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils, utils
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


@pytest.mark.parametrize(
    "n,generated,banned",
    [
        (2, [5, 6, 5], {6}),  # "5 6" seen: after 5, not 6 again
        (2, [5, 6, 7], set()),
        (2, [5, 6, 5, 7, 5], {6, 7}),
        (3, [5, 6, 7, 5, 6], {7}),
        (3, [5, 6], set()),  # shorter than n: nothing to block yet
    ],
)
def test_no_repeat_ngram_blocks_on_a_cpu(n, generated, banned):
    """fairseq's blocker without its CUDA extension, as SequenceGenerator calls it: the whole token
    buffer (the beginning-of-sentence </s>, the tokens so far, then padding) at step len(generated)."""
    from fairseq.ngram_repeat_block import NGramRepeatBlock

    pad, eos, vocab = 1, 2, 10
    tokens = torch.full((2, 12), pad)
    tokens[:, 0] = eos
    tokens[0, 1 : len(generated) + 1] = torch.tensor(generated)
    tokens[1, 1 : len(generated) + 1] = torch.arange(3, 3 + len(generated))  # nothing repeats
    lprobs = torch.zeros(2, vocab)
    out = NGramRepeatBlock(n, use_extension=False)(tokens, lprobs, bsz=1, beam_size=2, step=len(generated))
    assert {i for i in range(vocab) if out[0, i] == -math.inf} == banned
    assert torch.isfinite(out[1]).all()


def test_replace_unk_copies_the_aligned_source_word(tmp_path):
    """--replace-unk without a dictionary (fairseq's placeholder "@@ ") copies the source word each
    <unk> is aligned to, with hard alignments ((source, target) word pairs) and soft ones (a row of
    source probabilities per target word); with a dictionary, its translation."""
    no_dictionary = utils.load_align_dict("@@ ")
    assert no_dictionary == {}
    hard = [(0, 0), (2, 1), (1, 2)]
    assert utils.replace_unk("v1 <unk> <unk>", "w1 r7 r8", hard, no_dictionary, "<unk>") == "v1 r8 r7"
    soft = [["0.9", "0.05", "0.05", "0"], ["0.1", "0.1", "0.8", "0"], ["0.1", "0.7", "0.2", "0"]]
    assert utils.replace_unk("v1 <unk> <unk>", "w1 r7 r8", soft, no_dictionary, "<unk>") == "v1 r8 r7"
    (tmp_path / "align.dict").write_text("r7 s7\n")
    dictionary = utils.load_align_dict(str(tmp_path / "align.dict"))
    assert utils.replace_unk("v1 <unk> <unk>", "w1 r7 r8", hard, dictionary, "<unk>") == "v1 r8 s7"
    assert utils.replace_unk("v1 v2", "w1 w2", [], no_dictionary, "<unk>") == "v1 v2"  # nothing to replace
    with pytest.raises(ValueError, match="--replace-unk needs the alignment.*--print-alignment"):
        utils.replace_unk("v1 <unk>", "w1 r7", [], no_dictionary, "<unk>")


@pytest.mark.parametrize("alignment", ["hard", "soft"])
def test_an_aligning_generator_asks_the_model_for_attention(dictionary, alignment):
    """The hub interface's generate(print_alignment=...) builds fairseq's aligning generator on a model
    prepared without --print-alignment: every hypothesis gets its alignment all the same."""
    from fairseq.sequence_generator import SequenceGeneratorWithAlignment

    from helpers import build_vaswani, random_batch

    model = build_vaswani(dictionary).eval()
    model.make_generation_fast_()  # as prepare_for_inference_ does without --print-alignment
    src, src_lengths, _ = random_batch(dictionary)
    generator = SequenceGeneratorWithAlignment([model], dictionary, beam_size=2, max_len_b=5, print_alignment=alignment)
    sample = {"id": torch.arange(len(src)), "net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    for hypos in generator.generate([model], sample):
        for hypo in hypos:
            words = int((hypo["tokens"] != dictionary.eos()).sum())
            assert len(hypo["alignment"]) == words + (alignment == "soft")  # soft: a row for </s> too


@pytest.mark.parametrize(
    "flags,tpu", [(["--bf16"], False), (["--memory-efficient-bf16"], False), (["--bf16", "--tpu"], True), ([], False)]
)
def test_bf16_is_not_tpu_unless_asked(flags, tpu):
    """fairseq's options turn --bf16 into TPU mode (#4696); with the patch tpu is what the command said."""
    from fairseq import options

    from helpers import PLUGIN

    args = options.parse_args_and_arch(
        options.get_training_parser(), ["data", "--user-dir", PLUGIN, "--arch", "vaswani_tiny", *flags]
    )
    assert args.tpu is tpu and args.bf16 is bool(flags)


def test_every_patch_is_applied_once_named_and_dated(caplog):
    """register() applies patches.PATCHES in order, once; each module says what it fixes, the upstream
    issue (or None) and the fairseq version it was checked against; a second apply changes nothing."""
    import importlib
    import logging

    from fairseq import utils

    from transformer_plugin import patches

    before = utils.replace_unk
    with caplog.at_level(logging.INFO):
        applied = patches.apply_all()
    assert len(applied) == len(patches.PATCHES) and "replace_unk (fairseq #3533)" in applied
    assert "patches fairseq" not in caplog.text  # logged when first applied, not again
    for name in patches.PATCHES:
        module = importlib.import_module(f"transformer_plugin.patches.{name}")
        assert module.__doc__ and module.CHECKED_AGAINST.startswith("fairseq") and hasattr(module, "UPSTREAM")
        module.apply()
    assert utils.replace_unk is before


def _gloo_threads():
    """Names of this process's gloo threads (Linux)."""
    names = (open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task"))
    return sorted(name for name in names if "gloo" in name)


def test_a_finished_worker_joins_its_process_groups_threads(tmp_path, monkeypatch):
    """fairseq's distributed_main returns with its process groups alive, and a gloo thread may then
    abort the worker as it exits (pytorch #190489); with the patch the groups are gone when training
    returns, fairseq's cached global group (the one its final barrier runs on) included, and with them
    every gloo thread."""
    import torch.distributed as dist
    from fairseq.distributed import utils as distributed_utils
    from omegaconf import OmegaConf

    def init_one_worker(cfg):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
        return 0

    def train(cfg):
        dist.all_reduce(torch.ones(3), group=distributed_utils.get_global_group())
        trained.append(_gloo_threads() != before)

    monkeypatch.setattr(distributed_utils, "distributed_init", init_one_worker)
    cfg = OmegaConf.create(
        {"common": {"cpu": True, "tpu": False}, "distributed_training": {"device_id": 0, "distributed_rank": 0}}
    )
    before, trained = _gloo_threads(), []
    distributed_utils.distributed_main(0, train, cfg, {})
    assert trained == [True] and not dist.is_initialized()
    assert not hasattr(distributed_utils.get_global_group, "_global_group")
    assert _gloo_threads() == before


@pytest.mark.parametrize("max_norm", [0.0, 0.5])
def test_the_gradient_norm_is_fairseqs_in_a_few_calls(max_norm):
    """foreach_grad_norm: the same total norm as fairseq's loop over tensors, the gradients clipped alike,
    in far fewer operator calls; half-precision gradients still go through fairseq's own code."""
    from fairseq import utils

    from transformer_plugin.patches import foreach_grad_norm

    def parameters(dtype=torch.float32):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(n, 7, dtype=dtype)) for n in range(1, 41)]
        for p in params:
            p.grad = torch.randn_like(p)
        return params

    fairseqs = getattr(utils.clip_grad_norm_, "__wrapped__", utils.clip_grad_norm_)  # beneath the patch
    ours = foreach_grad_norm._foreach(fairseqs)
    their_params, our_params = parameters(), parameters()
    with torch.profiler.profile() as their_profile:
        their_norm = fairseqs(their_params, max_norm)
    with torch.profiler.profile() as our_profile:
        our_norm = ours(our_params, max_norm)
    torch.testing.assert_close(our_norm, their_norm, rtol=1e-6, atol=0)
    for theirs, mine in zip(their_params, our_params):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-6, atol=0)
    # operator calls that compute (detaching a gradient, or moving a tensor where it already is, computes nothing)
    calls = [
        sum(
            e.name.startswith("aten::")
            and e.name not in ("aten::to", "aten::detach")
            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
            for e in profile.events()
        )
        for profile in (their_profile, our_profile)
    ]
    assert calls[0] >= 40 and calls[1] <= 8, calls
    called = []
    spy = foreach_grad_norm._foreach(lambda *args: called.append(args) or torch.tensor(1.0))
    spy(parameters(torch.bfloat16), max_norm)
    assert len(called) == 1  # bfloat16 gradients: fairseq's norms in float32, not these


def test_a_fine_tuning_starts_its_clock_at_zero_and_a_resumed_run_keeps_its_own(data_bin, tmp_path):
    """finetune_clock: a parent's checkpoint carries 10 hours of training; fine-tuned from it under --stop-time-hours
    1, the child trains its 4 updates (fairseq: 1, the parent's hours counted); resumed from its own checkpoint, a
    run keeps its own time."""
    from helpers import trained_updates

    def train(save_dir, *flags):
        return trained_updates(data_bin, save_dir, *flags)

    parent = tmp_path / "parent"
    train(parent, "--max-update", "2")
    state = torch.load(parent / "checkpoint_last.pt", weights_only=False)
    state["extra_state"]["previous_training_time"] = 10 * 3600.0
    torch.save(state, parent / "checkpoint_last.pt")
    updates, _ = train(
        tmp_path / "child",
        "--finetune-from-model",
        str(parent / "checkpoint_last.pt"),
        "--max-update",
        "4",
        "--stop-time-hours",
        "1",
    )
    assert updates == 4
    # resuming the parent itself: its 10 hours count, and it stops after one more update
    updates, _ = train(parent, "--max-update", "6", "--stop-time-hours", "1")
    assert updates == 3
