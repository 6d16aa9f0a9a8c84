"""The beam-search shortcuts of incremental decoding (modules/multihead_attention.py) against plain decoding.

With the beam size that fairseq's SequenceGenerator announces (``set_beam_size``), encoder-decoder
attention projects the encoder output once per sentence and the beams of a sentence share those
keys and values; the self-attention cache is selected for the surviving hypotheses into a buffer
with room for the next step. Each test holds a shortcut to what decoding without it computes.
"""

import torch

from helpers import build_vaswani, random_batch


def test_beam_mode_projects_encoder_once_per_sentence(dictionary):
    """With the beam size set (SequenceGenerator calls set_beam_size) and the encoder output expanded
    into beam copies (reorder_encoder_out, as SequenceGenerator calls it), the encoder keys/values
    are cached once per sentence and shared by its beams; results equal the full forward pass of
    every hypothesis, also after a finished sentence leaves the batch."""
    torch.manual_seed(4)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, _ = random_batch(dictionary, batch_size=2, src_len=8)
    beam = 3
    model.set_beam_size(beam)
    expand = torch.arange(2).repeat_interleave(beam)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (2 * beam, 4))
    with torch.no_grad():
        encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, src_lengths), expand)
        state = {}
        for t in range(prev.size(1)):
            step, extra = model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state, alignment_layer=-1)
            full, full_extra = model.decoder(prev[:, : t + 1], encoder_out, alignment_layer=-1)
            torch.testing.assert_close(step[:, 0], full[:, t])
            torch.testing.assert_close(extra["attn"][0][:, 0], full_extra["attn"][0][:, t])
        cross_cache = [v for v in state.values() if v["k"].size(0) == 2]
        assert len(cross_cache) == len(model.decoder.layers)  # one row per sentence, not per beam
        order = torch.tensor([2, 0, 0, 5, 4, 3])  # hypotheses move within their sentence: no copy
        model.decoder.reorder_incremental_state_scripting(state, order)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        kept = [v["k"] for v in state.values() if v["k"].size(0) == 2]
        assert len(kept) == len(cross_cache) and all(a is b for a, b in zip(kept, (v["k"] for v in cross_cache)))
        prev = torch.cat([prev[order], torch.full((6, 1), 8)], dim=1)
        step, _ = model.decoder(prev, encoder_out, incremental_state=state)
        full, _ = model.decoder(prev, encoder_out)
        torch.testing.assert_close(step[:, 0], full[:, -1])
        # sentence 0 finishes: the generator keeps the 3 beams of sentence 1, reordered
        keep = torch.tensor([5, 3, 3])
        model.decoder.reorder_incremental_state_scripting(state, keep)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, keep)
        nxt = torch.cat([prev[keep], torch.full((3, 1), 9)], dim=1)
        step, _ = model.decoder(nxt, encoder_out, incremental_state=state)
        full, _ = model.decoder(nxt, encoder_out)
    torch.testing.assert_close(step[:, 0], full[:, -1])


def test_sequence_generator_projects_the_encoder_once_per_sentence(dictionary):
    """Through fairseq's own SequenceGenerator (beam 4), which calls the model's set_beam_size:
    every projection of encoder keys/values sees one row per sentence, not one per hypothesis."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(7)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, _ = random_batch(dictionary, batch_size=3, src_len=8)
    rows = []
    for layer in model.decoder.layers:
        layer.encoder_attn.kv_proj.register_forward_hook(lambda module, inputs, output: rows.append(inputs[0].size(0)))
    generator = SequenceGenerator([model], dictionary, beam_size=4, max_len_b=5)
    with torch.no_grad():
        hypotheses = generator.forward({"net_input": {"src_tokens": src, "src_lengths": src_lengths}})
    assert len(hypotheses) == 3 and rows == [3] * len(model.decoder.layers)


def test_beam_sharing_finds_the_same_hypotheses_as_without_it(dictionary):
    """Beam 4 through fairseq's SequenceGenerator: the same hypotheses and scores whether or not the
    encoder-decoder attention shares one row of keys/values per sentence."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(8)
    model = build_vaswani(dictionary).eval()
    src, src_lengths, _ = random_batch(dictionary, batch_size=3, src_len=8)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src_lengths}}
    with torch.no_grad():
        shared = SequenceGenerator([model], dictionary, beam_size=4, max_len_b=6).forward(sample)
        model.set_beam_size(1)  # what a model without the hook gets: one row per hypothesis
        model.decoder.set_beam_size = lambda beam_size: None
        unshared = SequenceGenerator([model], dictionary, beam_size=4, max_len_b=6).forward(sample)
    for hyps_a, hyps_b in zip(shared, unshared):
        for a, b in zip(hyps_a, hyps_b):
            assert torch.equal(a["tokens"], b["tokens"])
            torch.testing.assert_close(a["positional_scores"], b["positional_scores"])


def test_beam_steps_do_not_copy_the_cached_keys_and_values(dictionary):
    """A decoding step reads the cached encoder keys/values (and the self-attention cache) in place:
    no copy of them, which torch.matmul makes of a strided cache at every step."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Copies(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.sources = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket in (torch.ops.aten.clone, torch.ops.aten.copy_, torch.ops.aten._to_copy):
                source = args[1] if func.overloadpacket is torch.ops.aten.copy_ else args[0]
                self.sources.add(source.untyped_storage().data_ptr())
            return func(*args, **(kwargs or {}))

    torch.manual_seed(10)
    model = build_vaswani(dictionary).eval()
    model.set_beam_size(3)
    src, src_lengths, _ = random_batch(dictionary, batch_size=2, src_len=8)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (6, 4))
    with torch.no_grad():
        expand = torch.arange(2).repeat_interleave(3)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, src_lengths), expand)
        state = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
            model.decoder.reorder_incremental_state_scripting(state, torch.tensor([1, 0, 0, 5, 3, 4]))
        cached = {buffer[name].untyped_storage().data_ptr() for buffer in state.values() for name in ("k", "v")}
        copies = Copies()
        with copies:
            model.decoder(prev, encoder_out, incremental_state=state)
    assert len(cached) == 4 * len(model.decoder.layers)  # self-attention k/v rooms, encoder k/v
    assert not cached & copies.sources


def test_a_beam_size_left_over_does_not_merge_different_sentences(dictionary):
    """A beam size set by an earlier generator (fairseq's greedy search does not reset it) must not
    make encoder-decoder attention treat 4 different sentences as the beams of one."""
    torch.manual_seed(5)
    model = build_vaswani(dictionary).eval()
    model.set_beam_size(4)
    src, src_lengths, prev = random_batch(dictionary, batch_size=4, src_len=8)
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        state = {}
        for t in range(3):
            step, _ = model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
            full, _ = model.decoder(prev[:, : t + 1], encoder_out)
            torch.testing.assert_close(step[:, 0], full[:, t])
        order = torch.tensor([3, 1, 0, 2])  # a hypothesis-level cache follows any reordering
        model.decoder.reorder_incremental_state_scripting(state, order)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
        step, _ = model.decoder(prev[order, :4], encoder_out, incremental_state=state)
        full, _ = model.decoder(prev[order, :4], encoder_out)
    torch.testing.assert_close(step[:, 0], full[:, -1])
