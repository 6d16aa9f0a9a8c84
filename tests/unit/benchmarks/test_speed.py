"""The speed benchmark's report (benchmarks/speed.py), with the fairseq runs replaced by fixed figures.

The runs themselves take half an hour (``make bench``); what is checked here is the arithmetic
that turns their figures into the README's ratios: order of the rounds, means, medians and the
ratio within each round.
"""

import os

import pytest

from benchmarks import speed

# tokens per second of the three training rounds, sentences per second of the four generation rounds
TRAIN = {"builtin": [2000.0, 2400.0, 2200.0], "vaswani": [2300.0, 2640.0, 2640.0]}
GENERATE = {"builtin": [50.0, 60.0, 40.0, 55.0], "vaswani": [65.0, 75.0, 60.0, 71.5]}


@pytest.fixture
def fake_runs(tmp_path, monkeypatch):
    bin_dir = tmp_path / "data-bin"
    bin_dir.mkdir()
    (bin_dir / "dict.src.txt").write_text("".join(f"w{i} 1\n" for i in range(96)))  # + 4 specials = 100
    (bin_dir / "train.src-tgt.src.bin").write_bytes(b"\0" * 300)
    (bin_dir / "train.src-tgt.tgt.bin").write_bytes(b"\0" * 200)
    calls = []

    def train(impl, bin_dir, save_dir, a, log):
        r = sum(1 for c in calls if c == ("train", impl))
        calls.append(("train", impl))
        loss = 5.0 if impl == "builtin" else 4.0
        return {"wps": TRAIN[impl][r], "loss": loss, "losses": [6.0, loss], "rss": 1000.0, "wpb": 3000.0}

    def generate(checkpoint, bin_dir, a, log):
        impl = "vaswani" if checkpoint.endswith("as_vaswani.pt") else "builtin"
        r = sum(1 for c in calls if c == ("generate", impl))
        calls.append(("generate", impl))
        hyps = {0: "-0.5\ta b", 1: "-0.7\tc d" if impl == "builtin" else "-0.9\tc e f g"}  # score, pieces
        return {
            "sent_per_s": GENERATE[impl][r],
            "seconds": 1.0,
            "rss": 500.0 if impl == "builtin" else 400.0,
            "hyps": hyps,
        }

    monkeypatch.setattr(speed, "prepare_data", lambda work, pairs, vocab: str(bin_dir))
    monkeypatch.setattr(speed, "train", train)
    monkeypatch.setattr(speed, "generate", generate)
    monkeypatch.setattr(speed, "sh", lambda cmd, log=None: ("", 0.0, 0.0))
    monkeypatch.setattr(speed, "matmul_peak_flops", lambda *args, **kwargs: 1e11)
    return tmp_path, calls


def test_report_gives_means_medians_and_the_ratio_within_each_round(fake_runs):
    work, calls = fake_runs
    out = os.path.join(work, "speed.md")
    assert speed.main(["--work", str(work), "--repeats", "3", "--generate-repeats", "4", "--out", out]) == 0
    # rounds alternate which implementation goes first
    assert [impl for kind, impl in calls if kind == "train"] == [
        "builtin",
        "vaswani",
        "vaswani",
        "builtin",
        "builtin",
        "vaswani",
    ]
    assert [impl for kind, impl in calls if kind == "generate"][:4] == ["builtin", "vaswani", "vaswani", "builtin"]
    report = open(out).read()
    # means: training 2527/2200, generation 67.9/51.25; memory 1000/1000 and 400/500
    assert "training 1.15x, generation 1.32x, train memory 1.00x, generate memory 0.80x" in report
    assert "identical hypotheses: 1/2" in report
    # where hypotheses differ, one model may decode more steps: their lengths are in the report
    assert (
        "hypothesis length in pieces, builtin / vaswani: mean 2.0 / 3.0, longest 2 / 4; the 1 that differ: mean 2.0 / "
        "4.0" in report
    )
    # medians: training 2640/2200, generation 68.25/52.5
    assert "training 1.20x, generation 1.30x" in report
    # within each round: 2300/2000, 2640/2400, 2640/2200; 65/50, 75/60, 60/40, 71.5/55
    assert "training 1.15 1.10 1.20 (median 1.15x, lowest 1.10x)" in report
    assert "generation 1.30 1.25 1.50 1.30 (median 1.30x, lowest 1.25x)" in report
    assert "| fairseq `transformer` | 2200 ± 200 |" in report


def test_size_sets_the_papers_models(fake_runs):
    work, _ = fake_runs
    out = os.path.join(work, "speed.md")
    assert (
        speed.main(["--work", str(work), "--size", "big", "--repeats", "1", "--generate-repeats", "1", "--out", out])
        == 0
    )
    assert open(out).read().startswith("N=6, d_model=1024, d_ff=4096, h=16,")


def test_on_a_gpu_memory_is_cudas_peak_and_mfu_is_against_the_training_precision():
    assert speed.peak_memory("...\ncuda peak memory: 1234 MiB\n", rss=99.0) == 1234.0
    assert speed.peak_memory("a CPU run", rss=99.0) == 99.0
    assert [speed.matmul_dtype(args) for args in ("", "--bf16", "--fp16 --fp16-init-scale 8", "--amp")] == [
        "float32",
        "bfloat16",
        "float16",
        "float16",
    ]


def test_gpu_script_names_its_parts(tmp_path):
    """benchmarks/gpu.sh: OUT is required, and an unknown part stops it with the list of parts."""
    import subprocess

    from helpers import REPO

    script = os.path.join(REPO, "benchmarks", "gpu.sh")
    usage = subprocess.run(["bash", script], capture_output=True, text=True, timeout=30)
    assert usage.returncode != 0 and "usage: bash benchmarks/gpu.sh OUT" in usage.stderr
    unknown = subprocess.run(["bash", script, str(tmp_path), "speed-huge"], capture_output=True, text=True, timeout=30)
    assert (
        unknown.returncode == 2
        and "unknown part speed-huge: tests, kernels, speed-base, speed-big or decoding" in unknown.stderr
    )


def test_gpu_session_checks_its_phases_then_stops_at_a_failed_install(tmp_path):
    """benchmarks/gpu_session.sh: an unknown phase stops it before anything is installed; an install that
    fails (here: no such Python) stops it too, with a row in summary.md and the log packed for the trip back."""
    import subprocess
    import tarfile

    from helpers import REPO

    script = os.path.join(REPO, "benchmarks", "gpu_session.sh")
    unknown = subprocess.run(
        ["bash", script, str(tmp_path / "a"), "checks", "tune"], capture_output=True, text=True, timeout=30
    )
    assert (
        unknown.returncode == 2
        and "unknown phase tune: checks, torchrun, recipes, time, plan, speed, speed-big, speed-base or profile"
        in unknown.stderr
    )
    assert not (tmp_path / "a").exists()
    env = dict(
        os.environ, SYSTEM_PYTHON=str(tmp_path / "no-python"), VENV=str(tmp_path / "venv"), LOGS=str(tmp_path / "logs")
    )
    failed = subprocess.run(["bash", script, str(tmp_path / "b")], capture_output=True, text=True, timeout=60, env=env)
    assert failed.returncode == 1 and "install failed: nothing else can run" in failed.stdout
    assert "| install | failed (1) |" in (tmp_path / "b" / "summary.md").read_text()
    assert "install failed" not in (tmp_path / "b" / "results.md").read_text()  # the summary's rows, not stdout
    assert "| install | failed (1) |" in (tmp_path / "b" / "results.md").read_text()
    with tarfile.open(tmp_path / "b" / "logs.tar.gz") as logs:
        assert "logs/install.log" in logs.getnames()


def test_gpu_script_keeps_each_speed_runs_log_beside_its_table(tmp_path):
    """benchmarks/gpu.sh speed-big: the benchmark's trainings' and generations' logs (the hypotheses in them)
    come back with the table; the first H100 run sent back only the table, and its generation ratio could not
    be explained afterwards."""
    import subprocess

    from helpers import REPO

    fake = tmp_path / "python"  # a benchmarks.speed that writes its table and its runs' logs
    fake.write_text(
        '#!/usr/bin/env bash\necho "$@" > "$(dirname "$0")/args"\n'
        "while [ $# -gt 0 ]; do case $1 in --work) work=$2 ;; --out) out=$2 ;; esac; shift; done\n"
        'echo hyps > "$work/generate_vaswani_0.log"; echo loss > "$work/train_builtin_0.log"; echo table > "$out"\n'
    )
    fake.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, VENV_PYTHON=str(fake), WORK=str(work))
    done = subprocess.run(
        ["bash", os.path.join(REPO, "benchmarks", "gpu.sh"), str(tmp_path / "out"), "speed-big"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    runs = tmp_path / "out" / "speed_big_runs"
    assert (runs / "generate_vaswani_0.log").read_text() == "hyps\n" and (runs / "train_builtin_0.log").exists()
    assert (tmp_path / "out" / "speed_big.md").read_text() == "table\n"
    assert "--plain" in (tmp_path / "args").read_text().split()  # the levers off, in the same run


def test_generation_at_a_fixed_length_decodes_every_hypothesis_to_it(monkeypatch, tmp_path):
    """--gen-length N: no end of sentence before N pieces and none after, so both models decode as many steps
    whatever a barely trained model outputs (on an H100 their hypotheses differed for 93 of 1,000 sentences, and
    the same weights' sentences/s threefold); 0 decodes as the paper does, up to the source's length + 50."""
    import argparse

    commands = []
    output = "S-0\tx\nH-0\t-0.5\ta b\nTranslated 1 sentences (3 tokens) in 0.5s (2.00 sentences/s, 6.00 tokens/s)\n"
    monkeypatch.setattr(speed, "sh", lambda cmd, log=None: (commands.append(cmd), (output, 10.0, 0.5))[1])
    for length in (30, 0):
        a = argparse.Namespace(gen_batch_size=8, generate_args="", gen_length=length)
        speed.generate("ckpt.pt", "bin", a, str(tmp_path / "log"))
    fixed, natural = (" ".join(c) for c in commands)
    assert fixed.endswith(
        "--beam 4 --lenpen 0.6 --max-len-a 1 --max-len-b 50 --min-len 30 --max-len-a 0 --max-len-b 30 --batch-size 8"
    )
    assert "--min-len" not in natural and natural.endswith("--max-len-a 1 --max-len-b 50 --batch-size 8")


def test_plain_trains_the_plugin_with_its_levers_off_in_every_round_and_reports_their_gain(fake_runs, monkeypatch):
    """--plain: a third training each round (order reversed every other round), vaswani-plain, whose command turns
    off the compiled layers and whose environment the multi-tensor optimizer; the report gives the levers' gain, on
    against off, of the means and within each round, and no generation for it."""
    work, calls = fake_runs
    monkeypatch.setitem(TRAIN, speed.PLAIN, [2000.0, 2200.0, 2400.0])
    out = os.path.join(work, "speed.md")
    argv = ["--work", str(work), "--repeats", "3", "--generate-repeats", "2", "--plain", "--out", out]
    assert speed.main(argv) == 0
    assert [impl for kind, impl in calls if kind == "train"][:6] == [
        "builtin",
        "vaswani",
        speed.PLAIN,
        speed.PLAIN,
        "vaswani",
        "builtin",
    ]
    assert speed.PLAIN not in [impl for kind, impl in calls if kind == "generate"]
    report = open(out).read()
    # means 2527/2200; within each round 2300/2000, 2640/2200, 2640/2400
    assert "the levers, on against off (vaswani/vaswani-plain): training 1.15x, train memory 1.00x" in report
    assert "within each round: 1.15 1.20 1.10 (median 1.15x, lowest 1.10x)" in report
    assert "| `vaswani_transformer`, levers off (eager layers and loss, per-tensor Adam) | 2200 ± 200 |" in report


def test_the_plain_run_turns_every_lever_off(tmp_path, monkeypatch):
    """What vaswani-plain runs: the plugin's model with --compile-layers and --compile-loss off, in an environment
    with TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0; the plugin's own run has none of them; fairseq's transformer
    has its loss eager (the lever is the plugin's)."""
    ran = []

    def sh(cmd, log=None, env=None):
        ran.append((cmd, env))
        return '| train_inner | {"wps": "1", "loss": "2", "wpb": "3"}\n' * 2, 1.0, 1.0

    monkeypatch.setattr(speed, "sh", sh)
    monkeypatch.setattr(speed, "on_gpu", lambda: False)
    a = speed.parser().parse_args(["--plain"])
    speed.train(speed.PLAIN, "bin", "save", a, None)
    speed.train("vaswani", "bin", "save", a, None)
    speed.train("fairseq", "bin", "save", a, None)
    (plain, plain_env), (ours, ours_env), (theirs, _) = ran
    assert "--arch" in plain and plain[plain.index("--arch") + 1] == "vaswani_base"
    assert plain[-6:-2] == ["--compile-layers", "off", "--compile-loss", "off"]
    assert plain_env["TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER"] == "0"
    assert "--compile-layers" not in ours and "--compile-loss" not in ours and ours_env is None
    assert theirs[theirs.index("--compile-loss") + 1] == "off"
