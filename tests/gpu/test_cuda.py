"""On a CUDA device: half-precision training and generation through fairseq's CLIs, fused attention
against Eq. (1) computed in float32, and the kernels torch picks for each attention."""

import pytest
import torch

from helpers import PLUGIN, TRAIN_FLAGS, logged_losses, run_tool
from transformer_plugin_cli.fairseq_output import sentence_lines
from transformer_plugin.modules.multihead_attention import attention, attention_bias, scaled_dot_product_attention

PRECISIONS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"], "amp": ["--amp"]}


@pytest.fixture(scope="module")
def runs(data_bin):
    """20 updates in each precision from the same seed: {precision: (losses, checkpoint)}."""
    out = {}
    for name, flags in PRECISIONS.items():
        save_dir = data_bin / f"gpu_{name}"
        log = run_tool(
            "fairseq-train",
            str(data_bin / "bin"),
            "--user-dir",
            PLUGIN,
            *TRAIN_FLAGS,
            "--max-update",
            "20",
            *flags,
            "--save-dir",
            str(save_dir),
            "--no-epoch-checkpoints",
        )
        assert "capabilities =" in log, log[-2000:]  # fairseq lists the CUDA devices it trains on
        out[name] = logged_losses(log), save_dir / "checkpoint_last.pt"
    return out


@pytest.mark.parametrize("precision", ["fp16", "bf16", "amp"])
def test_half_precision_trains_close_to_float32(runs, precision):
    reference, _ = runs["fp32"]
    values, _ = runs[precision]
    assert len(values) == len(reference) == 20
    assert all(abs(a - b) < 0.3 for a, b in zip(values, reference)), (values, reference)
    assert values[-1] < values[0]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_generates_in_half_precision(data_bin, runs, precision):
    """fairseq-generate with --fp16 or --bf16 gives the float32 translations of most sentences."""
    _, checkpoint = runs[precision]
    hypotheses = {}
    for name, flags in (("fp32", []), (precision, PRECISIONS[precision])):
        out = run_tool(
            "fairseq-generate",
            str(data_bin / "bin"),
            "--user-dir",
            PLUGIN,
            "--path",
            str(checkpoint),
            "--beam",
            "4",
            *flags,
        )
        hypotheses[name] = {i: fields[1] for i, fields in sentence_lines(out, "H").items()}
    assert len(hypotheses["fp32"]) == len(hypotheses[precision]) == 12
    same = sum(hypotheses["fp32"][i] == hypotheses[precision][i] for i in hypotheses["fp32"])
    assert same >= 10, hypotheses


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["causal", "key padding", "beams as queries", "none"])
def test_fused_attention_equals_eq1(dtype, case):
    """torch's fused kernels on the GPU against Eq. (1) in float32, within the precision's rounding."""
    g = torch.Generator(device="cuda").manual_seed(0)
    B, h, T, S, d = 4, 8, 33, 47, 64
    if case == "causal":
        S = T
    if case == "beams as queries":
        T = 4  # 4 hypotheses of a sentence, one step each, against its keys
    q = torch.randn(B, h, T, d, device="cuda", generator=g)
    k, v = (torch.randn(B, h, S, d, device="cuda", generator=g) for _ in range(2))
    mask = None
    if case in ("key padding", "beams as queries"):
        keep = torch.ones(B, 1, 1, S, dtype=torch.bool, device="cuda")
        keep[1, ..., : S // 3] = False  # left padding, as fairseq pads sources
        mask = attention_bias(keep)
    causal = case == "causal"
    fused, _ = attention(q.to(dtype), k.to(dtype), v.to(dtype), None if mask is None else mask.to(dtype), causal)
    if causal:
        mask = torch.ones(T, S, dtype=torch.bool, device="cuda").tril_()
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    assert fused.dtype == dtype
    torch.testing.assert_close(fused.float(), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("S,T", [(32, 32), (37, 29)])  # lengths aligned to 16 or not
def test_every_attention_runs_a_fused_kernel(S, T):
    """In bfloat16 at the base model's sizes, training and beam search run each attention in a fused
    kernel (never the math fallback, nor cuDNN's, which builds a graph for every new shape: fast_paths.py),
    and decoder self-attention in training in a flash kernel."""
    from benchmarks.attention_kernels import survey

    calls = survey("vaswani_base", device="cuda", dtype=torch.bfloat16, S=S, T=T)
    kernels = {(phase, kind): kernel for phase, kind, _, kernel in calls}
    assert all(kernel not in ("math", "explicit (matmul, softmax, matmul)", "cuDNN") for kernel in kernels.values()), (
        kernels
    )
    for phase in ("training, padded batch", "training, no padding"):
        assert kernels[(phase, "decoder self-attention")] == "flash", kernels


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_tensor_beam_search_finds_fairseqs_hypotheses_on_the_device(monkeypatch, dtype):
    """modules/beam_search.py on a CUDA device against fairseq's loop (TRANSFORMER_PLUGIN_BEAM_SEARCH=fairseq): the
    same tokens, scores and positional scores, in float32 and in bfloat16."""
    from fairseq.sequence_generator import SequenceGenerator

    from helpers import build_vaswani, make_dictionary, random_batch
    from transformer_plugin.patches import beam_search_in_tensors

    dictionary = make_dictionary(40)
    torch.manual_seed(3)
    model = build_vaswani(dictionary, output_bias=True).eval()
    with torch.no_grad():
        model.decoder.output_bias[dictionary.eos()] = 2.5
    model = model.to(device="cuda", dtype=dtype)
    src, src_lengths, _ = random_batch(dictionary, batch_size=7, src_len=9, seed=5)
    sample = {"net_input": {"src_tokens": src.cuda(), "src_lengths": src_lengths.cuda()}}
    found = {}
    for path in ("fairseq", "tensors"):
        monkeypatch.setenv(beam_search_in_tensors.OFF, path)
        with torch.no_grad():
            found[path] = SequenceGenerator([model], dictionary, beam_size=4, len_penalty=0.6, max_len_b=10).forward(
                sample
            )
    for hyps_a, hyps_b in zip(found["fairseq"], found["tensors"]):
        assert len(hyps_a) == len(hyps_b) == 4
        for a, b in zip(hyps_a, hyps_b):
            assert a["tokens"].device.type == "cuda" and torch.equal(a["tokens"], b["tokens"])
            assert torch.equal(a["score"], b["score"]) and torch.equal(a["positional_scores"], b["positional_scores"])
