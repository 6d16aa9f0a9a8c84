"""--compile-layers (modules/compiled_layers.py): the compiled layers compute the paper's layers' function, and
are used only where they are meant to be.

The tests that compile are marked ``compiles``: make test runs them, the kernel paths of make test-kernels do not
(under their ATEN_CPU_CAPABILITY the layers stay eager, as test_a_cpu_kernel_choice_leaves_the_layers_eager holds).
Each asserts that its layers did compile, so that a fallback to the eager layers cannot pass for them."""

import pytest
import torch

from helpers import build_vaswani, make_dictionary, random_batch
from transformer_plugin.modules import compiled_layers
from transformer_plugin.modules.transformer_layer import DecoderLayer, EncoderLayer


def pair(**overrides):
    """The tiny model with compiled layers and the same model eager (the same weights)."""
    torch.manual_seed(0)
    d = make_dictionary(40)
    compiled = build_vaswani(d, compile_layers="on", **overrides)
    eager = build_vaswani(d, compile_layers="off", **overrides)
    eager.load_state_dict(compiled.state_dict())
    return d, compiled, eager


def assert_compiled(graphs_before=0):
    """Both kinds of layer ran compiled (neither fell back to eager), and torch.compile compiled since
    ``graphs_before``; returns the count."""
    for function in (EncoderLayer.sublayers, DecoderLayer.sublayers):
        assert compiled_layers.compiled(function).failed is None, compiled_layers.compiled(function).failed
    graphs = compiled_layers.graphs_compiled()
    assert graphs > graphs_before
    return graphs


def forward_backward(model, batch):
    src, lengths, tgt = batch
    model.zero_grad()
    logits, _ = model(src, lengths, tgt)
    logits.float().pow(2).mean().backward()
    return logits.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.compiles
@pytest.mark.parametrize(
    "normalize_before",
    [False, pytest.param(True, marks=pytest.mark.e2e)],  # pre-norm's compile: 17 s, make test-e2e
    ids=["post-norm", "pre-norm"],
)
def test_compiled_layers_give_the_eager_layers_logits_and_gradients(normalize_before):
    """In training mode with dropout off (the masks are drawn differently), over batches of three shapes, all with
    padding: the logits and every parameter's gradient agree within float32's rounding, and the shapes after the
    first compile nothing new (dynamic shapes; an epoch of real text with dropout on is counted by the e2e tier's
    test_compiled_layers_training.py)."""
    torch._dynamo.reset()
    d, compiled, eager = pair(dropout=0.0, normalize_before=normalize_before)
    compiled.train(), eager.train()
    graphs = None
    for shape in [(3, 7, 6), (5, 11, 9), (2, 4, 13)]:
        batch = random_batch(d, *shape, seed=sum(shape))
        logits, grads = forward_backward(compiled, batch)
        graphs = graphs or assert_compiled()
        expected_logits, expected_grads = forward_backward(eager, batch)
        torch.testing.assert_close(logits, expected_logits, rtol=1e-5, atol=1e-5)
        assert grads.keys() == expected_grads.keys()
        for name in grads:
            torch.testing.assert_close(grads[name], expected_grads[name], rtol=1e-4, atol=1e-6, msg=name)
    assert compiled_layers.graphs_compiled() == graphs


def test_only_training_on_every_position_is_compiled(monkeypatch):
    """Evaluation, beam search's incremental steps and a layer asked for its attention weights run eagerly;
    "auto" compiles only on a CUDA device; "off" never."""
    used = []
    monkeypatch.setattr(compiled_layers, "compiled", lambda function: used.append(function.__qualname__) or function)
    d, compiled, _ = pair()
    src, lengths, tgt = random_batch(d)
    compiled.train()
    compiled(src, lengths, tgt)
    assert used == ["EncoderLayer.sublayers"] * 2 + ["DecoderLayer.sublayers"] * 2
    used.clear()
    compiled.eval()
    with torch.no_grad():
        compiled(src, lengths, tgt)
        encoder_out = compiled.encoder(src, lengths)
        compiled.decoder(tgt[:, :1], encoder_out, incremental_state={})
    compiled.train()
    compiled.encoder(src, lengths, attention_layer=0)
    compiled.decoder(tgt, encoder_out, alignment_layer=1)
    assert used == ["EncoderLayer.sublayers", "DecoderLayer.sublayers"]  # the other layer of each, not asked
    used.clear()

    x = torch.zeros(2, 3, 8)
    layer = torch.nn.Linear(1, 1)
    assert not compiled_layers.applies("auto", layer, x)
    assert not compiled_layers.applies("off", layer, x)
    assert compiled_layers.applies("on", layer, x)
    assert compiled_layers.applies("auto", layer, x.to("meta").as_subclass(FakeCuda))
    layer.eval()
    assert not compiled_layers.applies("on", layer, x)


class FakeCuda(torch.Tensor):
    @property
    def device(self):
        return torch.device("cuda")


def test_the_flag_is_checked_and_old_configurations_get_auto():
    assert compiled_layers.mode_of(object()) == "auto"
    with pytest.raises(ValueError, match="--compile-layers sometimes: choose from auto, on, off"):
        compiled_layers.mode_of(type("Cfg", (), {"compile_layers": "sometimes"})())


def test_the_compiled_functions_are_the_paper_layers():
    """What is compiled is each layer's own ``sublayers``, once for all layers of its class."""
    assert compiled_layers.compiled(EncoderLayer.sublayers) is compiled_layers.compiled(EncoderLayer.sublayers)
    assert compiled_layers.compiled(DecoderLayer.sublayers) is not compiled_layers.compiled(EncoderLayer.sublayers)


@pytest.mark.compiles
@pytest.mark.e2e  # a second compile: 17 s, make test-e2e
def test_the_cuda_attention_kernels_choice_compiles_into_the_layer(monkeypatch):
    """On a CUDA device attention runs inside fast_paths.fused_kernels' ``sdpa_kernel`` context (every kernel but
    cuDNN's): torch.compile must trace it whole (``fullgraph``), here on a CPU with the same context."""
    from torch.nn.attention import sdpa_kernel

    from transformer_plugin.modules import fast_paths

    torch._dynamo.reset()
    entered = []

    def kernels(q):
        entered.append(q.device.type)
        return sdpa_kernel(fast_paths.WITHOUT_CUDNN)

    monkeypatch.setattr(fast_paths, "fused_kernels", kernels)
    d, compiled, eager = pair(dropout=0.0)
    batch = random_batch(d, 4, 9, 7, seed=3)
    logits, grads = forward_backward(compiled, batch)
    expected_logits, _ = forward_backward(eager, batch)
    assert entered  # traced through the context
    assert_compiled()
    torch.testing.assert_close(logits, expected_logits, rtol=1e-5, atol=1e-5)


@pytest.mark.compiles
def test_a_failing_compiler_leaves_the_layers_eager_and_says_so(monkeypatch, caplog):
    """torch.compile's backend failing (here: as it fails without a C++ compiler) costs the run its speed, not the
    run: a warning names the error, and the layers compute eagerly, the same function."""
    d, compiled, eager = pair(dropout=0.0)

    def failing(*args):
        raise torch._dynamo.exc.BackendCompilerFailed(failing, RuntimeError("no C++ compiler found\nmore"), None)

    function = compiled_layers.CompiledFunction(EncoderLayer.sublayers)
    monkeypatch.setattr(function, "compiled", failing)
    real = compiled_layers.compiled
    monkeypatch.setattr(compiled_layers, "compiled", lambda f: function if f is EncoderLayer.sublayers else real(f))
    batch = random_batch(d, 3, 7, 6)
    with caplog.at_level("WARNING"):
        for _ in range(2):
            logits, _ = forward_backward(compiled, batch)
    warnings = [r.getMessage() for r in caplog.records if "backend failed" in r.getMessage()]
    assert len(warnings) == 1 and "EncoderLayer.sublayers (RuntimeError: no C++ compiler found)" in warnings[0]
    torch.testing.assert_close(logits, forward_backward(eager, batch)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.compiles
def test_compiled_layers_under_activation_checkpointing_give_the_eager_gradients():
    """--checkpoint-activations runs each layer's forward pass without autograd, then again with it in the backward
    pass: both compiled, the gradients are the eager layers'."""
    torch._dynamo.reset()
    d, compiled, eager = pair(dropout=0.0, checkpoint_activations=True)
    batch = random_batch(d, 4, 8, 7, seed=5)
    logits, grads = forward_backward(compiled, batch)
    assert_compiled()
    expected_logits, expected_grads = forward_backward(eager, batch)
    torch.testing.assert_close(logits, expected_logits, rtol=1e-5, atol=1e-5)
    for name in expected_grads:
        torch.testing.assert_close(grads[name], expected_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_cpu_kernel_choice_leaves_the_layers_eager(monkeypatch, caplog):
    """Under ATEN_CPU_CAPABILITY (another processor's kernels) torch.compile's code is not trusted on a CPU: the
    layers compute eagerly, the same function, nothing is compiled, and the log says why once."""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    d, compiled, eager = pair(dropout=0.0)
    function = compiled_layers.CompiledFunction(EncoderLayer.sublayers)

    def never(*args):
        raise AssertionError("compiled under ATEN_CPU_CAPABILITY")

    monkeypatch.setattr(function, "compiled", never)
    real = compiled_layers.compiled
    monkeypatch.setattr(compiled_layers, "compiled", lambda f: function if f is EncoderLayer.sublayers else real(f))
    src, lengths, _ = random_batch(d, 3, 7, 6)
    compiled.train(), eager.train()
    with caplog.at_level("WARNING"):
        for _ in range(2):
            out = compiled.encoder(src, lengths)["encoder_out"][0]
    warnings = [r.getMessage() for r in caplog.records if "ATEN_CPU_CAPABILITY=avx2" in r.getMessage()]
    assert len(warnings) == 1 and "EncoderLayer.sublayers runs eagerly" in warnings[0]
    torch.testing.assert_close(out, eager.encoder(src, lengths)["encoder_out"][0])
