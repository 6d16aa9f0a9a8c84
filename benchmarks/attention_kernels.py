"""Which of torch's attention kernels computes each attention of the model, and with which mask.

For the three attentions (encoder self-attention, decoder self-attention, encoder-decoder
attention), in training (a forward and backward pass over a batch with padded sources and
right-padded targets, and over a batch without padding) and in beam search (fairseq's
SequenceGenerator, beam 4, padded sources), it records every call of Eq. (1): the mask passed to
torch's ``F.scaled_dot_product_attention`` (none, ``is_causal``, or its shape) and the kernel
torch's dispatcher picks for those arguments (``torch._fused_sdp_choice``: flash, memory-efficient,
cuDNN or math), or "explicit" where the plugin computes Eq. (1) itself (fast_paths.py says when).

    python -m benchmarks.attention_kernels --device cuda --dtype bfloat16 --arch vaswani_big
    python -m benchmarks.attention_kernels            # this CPU, float32, vaswani_base

No (B, h, T, S) mask is ever built: key padding is passed as (B, 1, 1, S) and broadcast, the
decoder's future mask as ``is_causal`` (see ``attention`` in modules/multihead_attention.py).
"""

import argparse
import os
import sys
from collections import Counter

import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import print_table  # noqa: E402

BACKENDS = {0: "math", 1: "flash", 2: "memory-efficient", 3: "cuDNN", 4: "overrideable"}


def mask_form(mask, is_causal) -> str:
    if mask is None:
        return "is_causal" if is_causal else "none"
    return f"{tuple(mask.shape)} {str(mask.dtype).replace('torch.', '')}"


def kernel_choice(q, k, v, mask, dropout_p, is_causal) -> str:
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return "unknown (this torch has no _fused_sdp_choice)"
    return BACKENDS.get(int(choose(q, k, v, mask, dropout_p, is_causal)), "other")


class Recorder:
    """Labels each MultiHeadAttention call and records what reaches F.scaled_dot_product_attention."""

    def __init__(self, model):
        self.calls = Counter()
        self.phase = ""
        self._current = []
        self._seen_sdpa = []
        self._handles = []
        for name, module in model.named_modules():
            if type(module).__name__ != "MultiHeadAttention":
                continue
            kind = (
                "encoder self-attention"
                if name.startswith("encoder.")
                else "decoder self-attention"
                if module.self_attention
                else "encoder-decoder attention"
            )
            self._handles.append(module.register_forward_pre_hook(self._enter(kind), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._exit))

    def _enter(self, kind):
        def hook(module, args, kwargs):
            step = " (step)" if kwargs.get("incremental_state") is not None else ""
            self._current.append(kind + step)
            self._seen_sdpa.append(False)

        return hook

    def _exit(self, module, args, output):
        kind = self._current.pop()
        if not self._seen_sdpa.pop():
            self.calls[(self.phase, kind, "-", "explicit (matmul, softmax, matmul)")] += 1

    def __enter__(self):
        self._original = F.scaled_dot_product_attention

        def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
            if self._current:
                self._seen_sdpa[-1] = True
                choice = kernel_choice(q, k, v, attn_mask, dropout_p, is_causal)
                self.calls[(self.phase, self._current[-1], mask_form(attn_mask, is_causal), choice)] += 1
            return self._original(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kwargs)

        F.scaled_dot_product_attention = sdpa
        return self

    def __exit__(self, *exc):
        F.scaled_dot_product_attention = self._original
        for handle in self._handles:
            handle.remove()


def batch(dictionary, B, S, T, padded, device, seed=0):
    """Sources left-padded (fairseq's default), targets right-padded, lengths down to 3/4 when ``padded``."""
    g = torch.Generator().manual_seed(seed)
    pad, eos, nspecial = dictionary.pad(), dictionary.eos(), dictionary.nspecial
    src = torch.full((B, S), pad)
    prev = torch.full((B, T), pad)
    for i in range(B):
        n = S - (i * S // (4 * B) if padded else 0)
        m = T - (i * T // (4 * B) if padded else 0)
        src[i, S - n :] = torch.cat(
            [torch.randint(nspecial, len(dictionary), (n - 1,), generator=g), torch.tensor([eos])]
        )
        prev[i, :m] = torch.cat([torch.tensor([eos]), torch.randint(nspecial, len(dictionary), (m - 1,), generator=g)])
    lengths = src.ne(pad).sum(1)
    return src.to(device), lengths.to(device), prev.to(device)


def survey(arch="vaswani_base", device="cpu", dtype=torch.float32, vocab=1000, B=8, S=32, T=32, beam=4):
    """{(phase, attention, mask, kernel): calls} for one training step (padded and not) and one beam search."""
    from fairseq.data import Dictionary
    from fairseq.models import MODEL_DATACLASS_REGISTRY
    from fairseq.sequence_generator import SequenceGenerator

    import transformer_plugin  # noqa: F401  (registers the plugin's parts with fairseq)
    from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel

    dictionary = Dictionary()
    for i in range(vocab):
        dictionary.add_symbol(f"w{i}")
    dictionary.finalize(padding_factor=8)

    class Task:
        source_dictionary = target_dictionary = dictionary

    cfg = MODEL_DATACLASS_REGISTRY[arch]()  # the architecture's settings, as --arch gives them
    cfg.share_all_embeddings = True
    torch.manual_seed(0)
    model = VaswaniTransformerModel.build_model(cfg, Task()).to(device=device, dtype=dtype)
    recorder = Recorder(model)
    with recorder:
        model.train()
        for padded in (True, False):
            recorder.phase = "training, " + ("padded batch" if padded else "no padding")
            src, lengths, prev = batch(dictionary, B, S, T, padded, device)
            logits, _ = model(src, lengths, prev)
            logits.float().sum().backward()
        model.eval()
        recorder.phase = f"beam search, beam {beam}"
        src, lengths, _ = batch(dictionary, B, S, T, True, device)
        generator = SequenceGenerator([model], dictionary, beam_size=beam, max_len_a=0, max_len_b=8)
        with torch.no_grad():
            generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    return recorder.calls


def table(calls, title) -> str:
    lines = [title, "", "| phase | attention | mask passed | kernel | calls |", "|---|---|---|---|---|"]
    for (phase, kind, mask, kernel), n in calls.items():
        lines.append(f"| {phase} | {kind} | {mask} | {kernel} | {n} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="vaswani_base")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--out", help="write the table here (markdown)")
    a = p.parse_args(argv)
    calls = survey(a.arch, a.device, getattr(torch, a.dtype))
    name = torch.cuda.get_device_name() if a.device.startswith("cuda") else "CPU"
    print_table(table(calls, f"{a.arch}, {a.dtype} on {name}, torch {torch.__version__}"), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
