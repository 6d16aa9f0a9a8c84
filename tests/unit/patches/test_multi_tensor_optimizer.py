"""The optimizer step in multi-tensor calls (patches multi_tensor_adam and multi_tensor_master_weights): fairseq's
Adam and bfloat16's master-weight copies, with fairseq's values, in a few operator calls."""

import pytest
import torch
from fairseq.optim import adam

from transformer_plugin.patches import multi_tensor_adam

FAIRSEQS = adam.Adam.step.__wrapped__  # fairseq's loop, beneath the patch


def operator_calls(fn) -> int:
    """Top-level torch operator calls that compute, made by ``fn()`` (as benchmarks/step_profile.py counts)."""
    with torch.profiler.profile() as profile:
        fn()
    return sum(
        e.name.startswith("aten::")
        and e.name not in ("aten::to", "aten::detach")
        and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
        for e in profile.events()
    )


def parameters(dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.nn.Parameter(torch.randn(n, 3 + n % 4, dtype=dtype)) for n in range(1, 31)]


def fairseq_adam(params, step, **settings):
    optimizer = adam.Adam(params, lr=1e-2, **settings)
    optimizer.step = step.__get__(optimizer)
    return optimizer


@pytest.mark.parametrize("settings", [{}, {"weight_decay": 0.01}, {"amsgrad": True, "weight_decay": 0.1}])
def test_adam_is_fairseqs_over_50_updates_in_7_calls_a_group(settings):
    """50 updates of 30 tensors, some without a gradient now and then (so their step counts differ): the
    parameters and the state (an int step, float32 moments) are fairseq's loop's; an update is 7 calls for each
    step count (one more with weight decay, one more with amsgrad), where fairseq's loop makes as many a tensor."""
    theirs, ours = parameters(), parameters()
    their_adam = fairseq_adam(theirs, FAIRSEQS, **settings)
    our_adam = fairseq_adam(ours, multi_tensor_adam._multi_tensor(FAIRSEQS), **settings)
    rng = torch.Generator().manual_seed(1)
    calls = []
    for update in range(50):
        for i, (a, b) in enumerate(zip(theirs, ours)):
            skipped = update % 7 == 3 and i % 5 == 0
            a.grad = None if skipped else torch.randn(a.shape, generator=rng)
            b.grad = None if skipped else a.grad.clone()
        if update in (1, 4):  # all the tensors at one step count; then two (those skipped at update 3 lag)
            calls.append((operator_calls(their_adam.step), operator_calls(our_adam.step)))
        else:
            their_adam.step(), our_adam.step()
    for a, b in zip(theirs, ours):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7)
        mine, theirs_ = our_adam.state[b], their_adam.state[a]
        assert mine.keys() == theirs_.keys() and mine["step"] == theirs_["step"] and isinstance(mine["step"], int)
        for key in mine.keys() - {"step"}:
            assert mine[key].dtype == torch.float32
            torch.testing.assert_close(mine[key], theirs_[key], rtol=1e-6, atol=1e-9)
    per_group = 7 + bool(settings.get("amsgrad")) + bool(settings.get("weight_decay"))
    assert calls[0] == (30 * per_group, per_group)
    assert calls[1] == (30 * per_group, 2 * per_group)


def test_adam_resumes_a_state_that_fairseqs_loop_saved():
    """The state fairseq's loop saves (optimizer.state_dict(), as checkpoints hold it) resumes under the patch, and
    the reverse, to the parameters of an uninterrupted run of fairseq's loop."""

    def grads(params, update):
        rng = torch.Generator().manual_seed(update)
        for p in params:
            p.grad = torch.randn(p.shape, generator=rng)

    def run(steps_by_update, params, state=None):
        optimizer = None
        for update, step in steps_by_update:
            if optimizer is None or optimizer.step.__func__ is not step:
                saved = optimizer.state_dict() if optimizer is not None else state
                optimizer = fairseq_adam(params, step, weight_decay=0.01)
                if saved is not None:
                    optimizer.load_state_dict(saved)
            grads(params, update)
            optimizer.step()
        return params

    ours = multi_tensor_adam._multi_tensor(FAIRSEQS)
    uninterrupted = run([(u, FAIRSEQS) for u in range(20)], parameters())
    switched = run([(u, FAIRSEQS if u < 10 else ours) for u in range(20)], parameters())
    back = run([(u, ours if u < 10 else FAIRSEQS) for u in range(20)], parameters())
    for a, b, c in zip(uninterrupted, switched, back):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(c, a, rtol=1e-6, atol=1e-7)


def test_adam_leaves_half_precision_parameters_and_the_plain_path_to_fairseqs_loop(monkeypatch):
    """The memory-efficient optimizers' bfloat16 parameters, and TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0,
    go to fairseq's loop."""
    called = []
    spy = multi_tensor_adam._multi_tensor(lambda self, closure=None: called.append(self))
    for dtype, off in ((torch.bfloat16, None), (torch.float32, "0")):
        if off:
            monkeypatch.setenv(multi_tensor_adam.OFF, off)
        params = parameters(dtype)
        for p in params:
            p.grad = torch.ones_like(p)
        optimizer = fairseq_adam(params, spy)
        optimizer.step()
        assert called == [optimizer]
        called.clear()


def test_training_is_fairseqs_and_resumes_from_a_checkpoint_of_the_plain_path(data_bin, tmp_path, monkeypatch):
    """fairseq-train, 12 updates in bfloat16 (FP16Optimizer's master weights, stepped by Adam; float32's Adam alone is
    held to fairseq's above, over 50 updates and across a state_dict): a run of the plain path
    (TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0) stopped at update 6 resumes under the multi-tensor path to the
    parameters of the plain path's run straight through (so the two paths' updates agree, and a checkpoint of the
    plain path resumes), since the checkpoint holds the master weights (master_weights_in_checkpoints). Without them
    (a checkpoint of fairseq's) it resumes as fairseq resumes: from the rounded weights, to other parameters."""
    from helpers import PLUGIN, TRAIN_FLAGS, run_in_process

    from transformer_plugin.patches import master_weights_in_checkpoints

    precision = ["--bf16"]

    def train(save_dir, updates, off):
        monkeypatch.setenv(multi_tensor_adam.OFF, "0" if off else "1")
        run_in_process(
            "fairseq-train",
            str(data_bin / "bin"),
            "--user-dir",
            PLUGIN,
            *TRAIN_FLAGS,
            *precision,
            "--weight-decay",
            "0.01",
            "--save-dir",
            str(save_dir),
            "--no-epoch-checkpoints",
            "--disable-validation",
            "--max-update",
            str(updates),
        )
        return torch.load(save_dir / "checkpoint_last.pt", weights_only=False)

    def same(run, straight) -> bool:
        assert run["model"].keys() == straight["model"].keys()
        return all(torch.allclose(run["model"][k], w, rtol=1e-5, atol=1e-6) for k, w in straight["model"].items())

    plain = train(tmp_path / "plain", 12, off=True)
    half = train(tmp_path / "switched", 6, off=True)
    switched = train(tmp_path / "switched", 12, off=False)
    assert same(switched, plain)
    state = switched["last_optimizer_state"]
    assert state["state"].keys() == plain["last_optimizer_state"]["state"].keys()
    assert all(isinstance(s["step"], int) for s in state["state"].values())
    assert master_weights_in_checkpoints.MASTER_WEIGHTS in state
    del half["last_optimizer_state"][master_weights_in_checkpoints.MASTER_WEIGHTS]
    (tmp_path / "fairseqs").mkdir()
    torch.save(half, tmp_path / "fairseqs" / "checkpoint_last.pt")
    assert not same(train(tmp_path / "fairseqs", 12, off=False), plain)
