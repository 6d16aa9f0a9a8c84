"""fairseq's own command-line tools with ``--user-dir transformer_plugin``, in a temp dir.

preprocess -> train (single process, restore, two CPU processes with gloo, half precision) ->
generate, loading the checkpoints under torch's weights_only check; averaging; the CTranslate2 export.
fairseq's other features with the plugin (validate, interactive, --eval-bleu, ...):
test_fairseq_features.py.
"""

import math
import os
import re
import subprocess
import sys

import pytest

from helpers import BIN, PLUGIN, REPO, TRAIN_FLAGS, WORDS, free_port, logged_losses, run_in_process, run_tool
from transformer_plugin_cli.fairseq_output import sentence_lines


@pytest.fixture(scope="module")
def trained(data_bin):
    """Six updates with --user-dir given relative to the repository root, as the README shows."""
    save_dir = data_bin / "ckpt"
    log = run_tool(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        "transformer_plugin",
        *TRAIN_FLAGS,
        "--max-update",
        "6",
        "--save-dir",
        str(save_dir),
        cwd=REPO,
    )
    return save_dir, log


def logged_lr(log):
    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"num_updates=(\d+), lr=([0-9.e-]+)", log)}


def test_train_uses_model_schedule_and_criterion(trained):
    save_dir, log = trained
    assert "VaswaniTransformerModel" in log and "VaswaniLabelSmoothedCrossEntropy" in log
    assert "Eq. (3) with d_model=64, warmup_steps=20" in log  # d_model came from the model's flags
    lrs = logged_lr(log)
    assert sorted(lrs) == [1, 2, 3, 4, 5, 6]
    for n, lr in lrs.items():  # logged after update n: the rate set for update n + 1
        assert lr == pytest.approx(64**-0.5 * min((n + 1) ** -0.5, (n + 1) * 20**-1.5), rel=1e-4)
    assert (save_dir / "checkpoint_last.pt").exists()


def test_installed_copy_works_from_any_directory(data_bin, trained, tmp_path):
    save_dir, _ = trained
    module = [sys.executable, "-m", "transformer_plugin_cli.tools.user_dir"]
    printed = subprocess.run(module, capture_output=True, text=True, check=True)
    plugin_dir = printed.stdout.strip()
    assert os.path.isfile(os.path.join(plugin_dir, "__init__.py"))
    console = subprocess.run([os.path.join(BIN, "vaswani-user-dir")], capture_output=True, text=True, check=True)
    assert console.stdout.strip() == plugin_dir
    out = run_tool(
        "fairseq-generate",
        str(data_bin / "bin"),
        "--user-dir",
        plugin_dir,
        "--path",
        str(save_dir / "checkpoint_last.pt"),
        "--beam",
        "2",
        "--batch-size",
        "8",
        cwd=tmp_path,
    )
    assert len([line for line in out.splitlines() if line.startswith("H-")]) == 12


def test_restore_file_continues_training(data_bin, trained, tmp_path):
    save_dir, _ = trained
    log = run_in_process(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        "8",
        "--save-dir",
        str(tmp_path),
        "--restore-file",
        str(save_dir / "checkpoint_last.pt"),
    )
    assert "Loaded checkpoint" in log and "@ 6 updates" in log
    assert sorted(logged_lr(log)) == [7, 8]


def test_unsafe_checkpoint_is_refused_by_fairseq_generate(data_bin, tmp_path):
    import torch

    marker = tmp_path / "code_was_run"

    class RunsCode:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": None, "x": RunsCode()}, evil)
    code, out = run_tool(
        "fairseq-generate", str(data_bin / "bin"), "--user-dir", PLUGIN, "--path", str(evil), expect_ok=False
    )
    assert code != 0
    assert "UnsafeCheckpointError" in out and str(evil) in out
    assert not marker.exists()


@pytest.fixture(scope="module")
def fp32_run(data_bin):
    """4 float32 updates: the losses and the checkpoint the half-precision runs are compared with."""
    save_dir = data_bin / "fp32"
    log = run_in_process(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        "4",
        "--cpu",
        "--save-dir",
        str(save_dir),
        "--no-epoch-checkpoints",
    )
    return logged_losses(log), save_dir / "checkpoint_last.pt"


@pytest.mark.parametrize(
    "precision",
    [
        # fairseq turns --bf16 into TPU mode (options.py); with the plugin it trains in bfloat16 here
        ["--bf16"],
        # fairseq flattens fp16 master weights on a CUDA device; on a CPU they must stay unflattened
        ["--fp16", "--fp16-no-flatten-grads"],
    ],
    ids=["bf16", "fp16"],
)
@pytest.mark.e2e
def test_half_precision_trains_and_generates(data_bin, fp32_run, tmp_path, precision):
    """On the CPU, the path a GPU takes: the losses of 4 updates are close to float32's from the same
    seed but not equal (rounding), and fairseq-generate with the same flag translates in that
    precision (its scores differ from float32's for the same checkpoint)."""
    fp32_losses, fp32_checkpoint = fp32_run
    log = run_tool(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        "4",
        "--cpu",
        *precision,
        "--save-dir",
        str(tmp_path),
        "--no-epoch-checkpoints",
    )
    losses = logged_losses(log)
    assert len(losses) == len(fp32_losses) == 4 and losses != fp32_losses, (losses, fp32_losses)
    assert all(abs(a - b) < 0.2 for a, b in zip(losses, fp32_losses)), (losses, fp32_losses)
    scores = {}
    for name, flags in (("fp32", []), ("half", precision[:1])):
        out = run_in_process(
            "fairseq-generate",
            str(data_bin / "bin"),
            "--user-dir",
            PLUGIN,
            "--path",
            str(fp32_checkpoint),
            "--cpu",
            *flags,
        )
        scores[name] = sentence_lines(out, "H")
        assert len(scores[name]) == 12
    assert scores["half"] != scores["fp32"]


def _train_two_workers(data_bin, save_dir, max_update):
    port = str(free_port())
    flags = [
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        str(max_update),
        "--save-dir",
        str(save_dir),
        "--distributed-world-size",
        "2",
        "--distributed-backend",
        "gloo",
        "--ddp-backend",
        "legacy_ddp",
        "--distributed-no-spawn",
        "--distributed-init-method",
        f"tcp://127.0.0.1:{port}",
    ]
    procs = [
        subprocess.Popen(
            [os.path.join(BIN, "fairseq-train"), *flags, "--distributed-rank", str(rank)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        if p.returncode != 0:
            pytest.fail(f"rank {rank} failed:\n{out[-4000:]}")
    return outputs[0]


@pytest.mark.e2e
def test_distributed_training_and_resume(data_bin, tmp_path):
    log = _train_two_workers(data_bin, tmp_path, 4)
    assert "distributed init (rank 0)" in log and sorted(logged_lr(log)) == [1, 2, 3, 4]
    log = _train_two_workers(data_bin, tmp_path, 6)  # resume: rank 0 loads, broadcasts to rank 1
    assert "Loaded checkpoint" in log and "@ 4 updates" in log
    assert sorted(logged_lr(log)) == [5, 6]


@pytest.mark.e2e
def test_average_of_a_run_whose_saves_all_land_on_epoch_ends(data_bin, tmp_path):
    """With --save-interval-updates equal to an epoch, fairseq writes every state only as checkpoint{epoch}.pt
    (checkpoint_last.pt with --no-epoch-checkpoints), never as checkpoint_{epoch}_{update}.pt; "the last 3" are
    still the states at the last three saves, the final one included."""
    log = run_in_process(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-epoch",
        "1",
        "--no-save",
        "--disable-validation",
    )
    per_epoch = int(re.findall(r"epoch 001 \|.*num_updates (\d+)", log)[-1])
    save_dir = tmp_path / "ckpt"
    run_in_process(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--max-update",
        str(4 * per_epoch),
        "--save-interval-updates",
        str(per_epoch),
        "--keep-interval-updates",
        "3",
        "--keep-last-epochs",
        "3",
        "--save-dir",
        str(save_dir),
    )
    assert not [p for p in os.listdir(save_dir) if re.fullmatch(r"checkpoint_\d+_\d+\.pt", p)]
    output = run_tool(
        sys.executable,
        "-m",
        "transformer_plugin_cli.tools.average_checkpoints",
        "--inputs",
        str(save_dir),
        "--num-update-checkpoints",
        "3",
        "--output",
        str(tmp_path / "average.pt"),
        cwd=REPO,
    )
    averaged = re.findall(r"update (\d+): ", output)
    assert averaged == [str(k * per_epoch) for k in (4, 3, 2)], output


# ---- serving: the CTranslate2 export ------------------------------------------------------------

CT2_VARIANTS = {  # name: (flags added, embeddings shared)
    "paper": ([], True),  # post-norm, the paper's interleaved sinusoids
    "pre-norm, learned positions": (["--normalize-before", "--positional-encoding", "learned"], True),
    "fairseq sinusoids, separate embeddings": (["--sinusoid-variant", "fairseq"], False),
    "MarianMT's activation and output bias": (["--activation-fn", "swish", "--output-bias"], True),
}


@pytest.mark.parametrize("variant", list(CT2_VARIANTS))
def test_ctranslate2_export_scores_and_translates_as_fairseq(data_bin, tmp_path, variant):
    import ctranslate2

    added, shared = CT2_VARIANTS[variant]
    flags = [f for f in TRAIN_FLAGS if shared or f != "--share-all-embeddings"] + added
    run_in_process(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *flags,
        "--max-update",
        "80",
        "--save-dir",
        str(tmp_path / "ckpt"),
        "--no-epoch-checkpoints",
    )
    ckpt = str(tmp_path / "ckpt" / "checkpoint_last.pt")
    from transformer_plugin_cli.serving.export_ctranslate2 import main as export

    assert (
        export(["--model-path", ckpt, "--data-dir", str(data_bin / "bin"), "--output-dir", str(tmp_path / "ct2")]) == 0
    )
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    common = ["--user-dir", PLUGIN, "--path", ckpt, "--batch-size", "16", "--gen-subset", "test"]
    # the same log-probability for every reference token (fairseq prints base 2, CTranslate2 base e)
    scored = run_in_process("fairseq-generate", str(data_bin / "bin"), *common, "--score-reference")
    sources, targets, positional = (sentence_lines(scored, k) for k in ("S", "H", "P"))
    ids = sorted(sources)
    results = translator.score_batch([sources[i][0].split() for i in ids], [targets[i][1].split() for i in ids])
    for i, result in zip(ids, results):
        expected = [float(p) * math.log(2) for p in positional[i][0].split()]
        assert result.log_probs == pytest.approx(expected, abs=2e-4)
    # the same translations, greedy and with the paper's beam
    for beam in ("1", "4"):
        out = run_in_process(
            "fairseq-generate",
            str(data_bin / "bin"),
            *common,
            "--beam",
            beam,
            "--lenpen",
            "0.6",
            "--max-len-a",
            "0",
            "--max-len-b",
            "30",
        )
        hypotheses = sentence_lines(out, "H")
        translated = translator.translate_batch(
            [sources[i][0].split() for i in ids], beam_size=int(beam), length_penalty=0.6, max_decoding_length=30
        )
        # sentences where either system reached the length cap of 30 are left out: these 80-update models
        # loop on some inputs, and the two end a search cut at the cap differently (fairseq forces </s>)
        pairs = {i: (r.hypotheses[0], hypotheses[i][1].split()) for i, r in zip(ids, translated)}
        ended = {i: pair for i, pair in pairs.items() if max(map(len, pair)) < 29}
        differ = {i: pair for i, pair in ended.items() if pair[0] != pair[1]}
        assert ended and len(differ) <= 0.01 * len(ended), f"beam {beam}, of {len(ended)} that ended: {differ}"


def test_ctranslate2_export_refuses_what_it_cannot_hold():
    from types import SimpleNamespace

    from transformer_plugin_cli.serving.export_ctranslate2 import UnsupportedModelError, check_supported

    sizes = dict(d_model=64, attention_heads=4, encoder_layers=2, decoder_layers=2)
    check_supported(SimpleNamespace(d_k=16, d_v=16, **sizes))
    with pytest.raises(UnsupportedModelError, match=r"--d-k 8 with --attention-heads 4 and --d-model 64"):
        check_supported(SimpleNamespace(d_k=8, d_v=16, **sizes))
    with pytest.raises(UnsupportedModelError, match=r"--d-v 32"):
        check_supported(SimpleNamespace(d_k=16, d_v=32, **sizes))
    with pytest.raises(UnsupportedModelError, match=r"--decoder-start pad: not exported to CTranslate2"):
        check_supported(SimpleNamespace(d_k=16, d_v=16, decoder_start="pad", **sizes))


@pytest.mark.e2e  # 23 s: make test-e2e
def test_a_test_sentence_longer_than_1024_positions_is_translated(data_bin, trained, tmp_path):
    """Sinusoids extrapolate (Section 3.5): a source of 1,100 tokens, more than the 1,024 positions of the
    task and of the model, is translated once both are raised as recipes/parallel_text.sh raises them. A
    held-out test line that long failed the recipe's generation after training."""
    save_dir, _ = trained
    long_line = " ".join(WORDS[i % len(WORDS)] for i in range(1100))
    for side in ("src", "tgt"):
        (tmp_path / f"test.{side}").write_text(f"{WORDS[0]} {WORDS[1]}\n{long_line}\n{WORDS[2]}\n")
    run_tool(
        "fairseq-preprocess",
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        "--testpref",
        str(tmp_path / "test"),
        "--srcdict",
        str(data_bin / "bin" / "dict.src.txt"),
        "--tgtdict",
        str(data_bin / "bin" / "dict.tgt.txt"),
        "--destdir",
        str(tmp_path / "bin"),
        "--workers",
        "1",
    )
    generate = (
        "fairseq-generate",
        str(tmp_path / "bin"),
        "--user-dir",
        PLUGIN,
        "--path",
        str(save_dir / "checkpoint_last.pt"),
        "--beam",
        "2",
        "--max-len-a",
        "0",
        "--max-len-b",
        "20",
        "--batch-size",
        "8",
    )
    code, refused = run_tool(*generate, expect_ok=False)
    assert code != 0 and "is invalid" in refused and "max_positions=(1024, 1024)" in refused  # fairseq's task limit
    out = run_tool(
        *generate,
        "--max-source-positions",
        "100000",
        "--max-target-positions",
        "100000",
        "--model-overrides",
        "{'max_source_positions': 100000, 'max_target_positions': 100000}",
    )
    hypotheses = sentence_lines(out, "H")
    assert sorted(hypotheses) == [0, 1, 2]


def test_the_decoding_profile_counts_and_times_both_searches(data_bin, trained, tmp_path):
    """python -m benchmarks.decoding_profile on a trained model: the tensor beam search and fairseq's loop find the
    same hypotheses for every test sentence, and the tensor search reads from the device a fraction as often (the
    exact count: tests/unit/modules/test_beam_search.py)."""
    save_dir, _ = trained
    out = tmp_path / "decoding.md"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.decoding_profile", "--data", str(data_bin / "bin"), "--path",
         str(save_dir / "checkpoint_last.pt"), "--rounds", "1", "--batch-size", "12", "--out", str(out)],
        cwd=REPO, check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.read_text().splitlines()}
    tensors, loop = rows["vaswani_transformer, tensor beam search"], rows["vaswani_transformer, fairseq's loop"]
    assert tensors[-1].strip(" |") == "12 of 12" and loop[-1].strip(" |") == "12 of 12"
    reads = [float(row[3].split(" / ")[1]) for row in (tensors, loop)]
    assert reads[0] * 5 < reads[1], reads
