"""The caches of incremental decoding (fairseq's beam search) for MultiHeadAttention.

Not part of the paper's computation: they let each beam-search step compute only what is new, and
multihead_attention.py reads as Section 3.2 without them. fairseq's SequenceGenerator drives them
through the incremental-state protocol (``incremental_state``, ``reorder_incremental_state``) and
tells the model its beam size k (``set_beam_size``).

- Self-attention caches the keys and values of the previous steps, so that each step projects only
  the newest position; the cache keeps room for one more step, so that following the beams copies
  the past once per step.
- Encoder-decoder attention projects the encoder output to keys and values once, at the first step,
  and, when the rows of the encoder output are the k beam copies of each sentence, into one row per
  sentence that the sentence's k hypotheses attend to together (as k times as many queries).

tests/unit/modules/test_beam_search_caches.py holds them to the full forward pass.
"""

from typing import Dict, Optional

import torch
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


class BeamSearchCaches(FairseqIncrementalState):
    """Mixed into MultiHeadAttention, whose ``h``, ``d_k``, ``d_v``, ``self_attention``, ``kv_proj``
    and ``_split_heads`` it uses."""

    beam_size = 1

    def set_beam_size(self, beam_size: int):
        """Called by fairseq's SequenceGenerator, through the model, with the beam size k."""
        self.beam_size = beam_size

    def _memory_keys_values(self, memory: Tensor, incremental_state: Optional[IncrementalState]):
        """Encoder-decoder attention's keys and values (B', h, S, d): projected at the first step and
        cached; B' is one row per sentence when the rows of ``memory`` are its beam copies."""
        h, d_k, d_v = self.h, self.d_k, self.d_v
        cache = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if cache is not None and "k" in cache:
            return cache["k"], cache["v"]
        shared = cache is not None and self._rows_are_beam_copies(memory)
        if shared:
            memory = memory[:: self.beam_size]
        k, v = self.kv_proj(memory).split([h * d_k, h * d_v], dim=-1)
        k, v = self._split_heads(k, d_k), self._split_heads(v, d_v)
        if cache is not None:  # contiguous once, so that no later step copies them
            cache["k"], cache["v"] = k.contiguous(), v.contiguous()
            if shared:  # k as a length, which is read without waiting for the device (a value would be)
                cache["beam_size"] = k.new_empty(self.beam_size, 0)
            self._set_input_buffer(incremental_state, cache)
        return k, v

    def _rows_are_beam_copies(self, memory: Tensor) -> bool:
        """Whether ``memory`` comes in blocks of beam_size identical rows, as beam search makes it
        (checked: a beam size left over from another generator must not merge different sentences)."""
        k = self.beam_size
        if k == 1 or memory.size(0) % k != 0:
            return False
        blocks = memory.view(-1, k, *memory.shape[1:])
        return torch.equal(blocks, blocks[:, :1].expand_as(blocks))

    @staticmethod
    def _append(cache: Dict[str, Optional[Tensor]], name: str, new: Tensor) -> Tensor:
        """Self-attention keys (``name`` "k") or values ("v") of all steps so far, (B, h, t + T, d).

        ``cache[name]`` holds the t previous steps as the start of ``cache[name + "_room"]``, a
        buffer with room for more steps: ``reorder_incremental_state`` leaves one free step when it
        selects the surviving hypotheses, so that a beam-search step copies the past once (there)
        instead of twice (select, then concatenate).
        """
        past, room = cache.get(name), cache.get(name + "_room")
        if past is None:
            full = room = new
        else:
            t, T = past.size(2), new.size(2)
            if room is not None and room.size(2) >= t + T:
                room[:, :, t : t + T] = new
                full = room[:, :, : t + T]
            else:
                full = room = torch.cat([past, new], dim=2)
        cache[name], cache[name + "_room"] = full, room
        return full

    def _cached_keys_values(self, incremental_state: IncrementalState, k: Tensor, v: Tensor):
        """Self-attention: the keys and values of this step appended to those of the previous steps."""
        cache = self._get_input_buffer(incremental_state)
        k, v = self._append(cache, "k", k), self._append(cache, "v", v)
        self._set_input_buffer(incremental_state, cache)
        return k, v

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "attn_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)

    @torch.jit.unused
    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Follow the beams: select the cached keys/values of the hypotheses that survive.

        Encoder-decoder attention cached with one row per sentence (``cache["beam_size"]``, k rows long)
        changes only when finished sentences leave the batch: beams never move between sentences.
        """
        buffer = self.get_incremental_state(incremental_state, "attn_state")
        if buffer is None or buffer.get("k") is None:
            return incremental_state
        if self.self_attention:  # the (row, head) blocks of t * d values to select
            blocks = (new_order[:, None] * self.h + torch.arange(self.h, device=new_order.device)).view(-1)
        for name in ("k", "v"):
            value = buffer[name]
            assert value is not None
            if self.self_attention:  # into a buffer with one free step (see _append)
                B, h, t, d = value.shape
                room = value.new_empty(new_order.size(0), h, t + 1, d)
                torch.index_select(value.reshape(B * h, t, d), 0, blocks, out=room.view(-1, t + 1, d)[:, :t])
                buffer[name], buffer[name + "_room"] = room[:, :, :t], room
            elif "beam_size" in buffer:  # one row per sentence, shared by its beams
                k = buffer["beam_size"].size(0)
                if value.size(0) * k != new_order.size(0):
                    buffer[name] = value.index_select(0, new_order.view(-1, k)[:, 0] // k)
            else:
                buffer[name] = value.index_select(0, new_order)
        return self._set_input_buffer(incremental_state, buffer)

    def _beams_as_queries(self, q: Tensor, mask: Optional[Tensor], beams: int):
        """q (B, h, T, d_k) -> (B/beams, h, beams*T, d_k): a sentence's hypotheses as queries of its
        keys and values, with the mask of its first hypothesis."""
        if beams == 1:
            return q, mask
        B, h, T, d_k = q.shape
        q = q.view(-1, beams, h, T, d_k).transpose(1, 2).reshape(-1, h, beams * T, d_k)
        return q, mask[::beams] if mask is not None else None
