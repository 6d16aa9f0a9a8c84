"""recipes/wmt14_*.sh: what --dry-run shows (the paper's settings, batch arithmetic, launchers), and the
En-De base recipe at toy size end to end on CPU, from archives in the WMT14 layout built by the test."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tarfile
import time

import pytest
import torch

from helpers import (
    BIN,
    PYTHON,
    REPO,
    commands,
    copy_repository,
    flag,
    free_port,
    processes_naming,
    run_recipe,
    user_env,
)
from preprocess import wmt14


@pytest.mark.parametrize(
    "script, arch, steps, keep, vocab, spm, paper",
    [
        ("wmt14_en_de_base.sh", "vaswani_base", "100000", "5", "37000", "bpe", "27.3"),
        ("wmt14_en_de_big.sh", "vaswani_big", "300000", "20", "37000", "bpe", "28.4"),
        ("wmt14_en_fr_base.sh", "vaswani_base", "100000", "5", "32000", "unigram", "38.1"),
        ("wmt14_en_fr_big.sh", "vaswani_big_en_fr", "300000", "20", "32000", "unigram", "41.8"),
    ],
)
def test_dry_run_shows_the_papers_settings(tmp_path, script, arch, steps, keep, vocab, spm, paper):
    work = tmp_path / "w"
    proc = run_recipe(script, work, "--dry-run", GPUS="8")
    assert proc.returncode == 0, proc.stderr
    assert not work.exists()  # nothing ran, nothing was written
    out = proc.stdout
    [train] = commands(out, "fairseq-train")
    expected = {
        "--arch": arch,
        "--max-update": steps,
        "--keep-interval-updates": keep,
        "--warmup-updates": "4000",
        "--adam-betas": "(0.9, 0.98)",
        "--adam-eps": "1e-09",
        "--label-smoothing": "0.1",
        "--lr-scheduler": "vaswani_inverse_sqrt",
        "--criterion": "vaswani_label_smoothed_cross_entropy",
        "--max-tokens": "3125",
        "--update-freq": "1",
        "--distributed-world-size": "8",
    }
    assert {k: flag(train, k) for k in expected} == expected
    assert "--share-all-embeddings" in train
    [average] = [c for c in commands(out, PYTHON) if "transformer_plugin_cli.tools.average_checkpoints" in c]
    assert flag(average, "--num-update-checkpoints") == keep
    [generate] = commands(out, "fairseq-generate")
    assert {k: flag(generate, k) for k in ("--beam", "--lenpen", "--max-len-a", "--max-len-b", "--gen-subset")} == {
        "--beam": "4",
        "--lenpen": "0.6",
        "--max-len-a": "1",
        "--max-len-b": "50",
        "--gen-subset": "test",
    }
    [vocabulary] = [c for c in commands(out, PYTHON) if "train" in c and "preprocess.sentencepiece_vocab" in c]
    assert (flag(vocabulary, "--vocab-size"), flag(vocabulary, "--model-type")) == (vocab, spm)
    [score] = [c for c in commands(out, PYTHON) if "transformer_plugin_cli.tools.evaluate" in c]
    assert flag(score, "--paper").startswith(paper) and "--tokenized-bleu" in score
    assert ("--no-compound-split" in score) == ("en_fr" in script)  # compound splitting is for German
    assert "8 GPUs x --max-tokens 3125 x --update-freq 1 = 25000 tokens per update" in out


@pytest.mark.parametrize(
    "gpus, nnodes, max_tokens, update_freq",
    [
        ("1", "1", "3572", "7"),
        ("4", "1", "3125", "2"),
        ("8", "4", "782", "1"),
        ("0", "1", "3125", "4"),
    ],
)
def test_batch_is_about_25000_tokens_for_any_number_of_devices(tmp_path, gpus, nnodes, max_tokens, update_freq):
    launch = "local" if nnodes == "1" else "slurm"
    proc = run_recipe("wmt14_en_de_base.sh", tmp_path, "--dry-run", GPUS=gpus, NNODES=nnodes, LAUNCH=launch)
    assert proc.returncode == 0, proc.stderr
    trains = commands(proc.stdout, "fairseq-train")
    assert len(trains) == (2 if gpus == "0" else 1)  # no GPU: two gloo CPU workers
    for train in trains:
        assert (flag(train, "--max-tokens"), flag(train, "--update-freq")) == (max_tokens, update_freq)
    devices = int(gpus) * int(nnodes) or 2
    assert 25000 <= devices * int(max_tokens) * int(update_freq) < 25000 + devices * int(update_freq)


def test_launchers_for_several_machines(tmp_path):
    env = dict(GPUS="8", NNODES="2", MASTER_ADDR="node0", MASTER_PORT="29600", PRECISION="bf16")
    torchrun = run_recipe("wmt14_en_de_big.sh", tmp_path, "--dry-run", LAUNCH="torchrun", NODE_RANK="1", **env)
    assert torchrun.returncode == 0, torchrun.stderr
    [line] = [line for line in torchrun.stdout.splitlines() if " -m torch.distributed.run " in line]
    words = shlex.split(line[2:])
    assert words[:3] == ["python", "-m", "torch.distributed.run"]  # torchrun, as the recipe's python (VENV_PYTHON)
    assert [
        flag(words, f) for f in ("--nnodes", "--nproc-per-node", "--node-rank", "--master-addr", "--master-port")
    ] == ["2", "8", "1", "node0", "29600"]
    assert flag(words, "--distributed-world-size") == "16" and "--bf16" in words
    assert "node 1: training done" in torchrun.stdout and "fairseq-generate" not in torchrun.stdout
    slurm = run_recipe("wmt14_en_de_big.sh", tmp_path, "--dry-run", LAUNCH="slurm", **env)
    [line] = [line for line in slurm.stdout.splitlines() if line.startswith("+ srun")]
    words = shlex.split(line[2:])
    assert flag(words, "--ntasks-per-node") == "8" and flag(words, "--distributed-port") == "29600"
    local = run_recipe("wmt14_en_de_big.sh", tmp_path, "--dry-run", LAUNCH="local", **env)
    assert local.returncode == 2 and "needs LAUNCH=torchrun or LAUNCH=slurm" in local.stderr
    bad = run_recipe("wmt14_en_de_big.sh", tmp_path, "--dry-run", PRECISION="fp8", GPUS="1")
    assert bad.returncode == 2 and "PRECISION=fp8" in bad.stderr


TOY = dict(
    TOY="1",
    IGNORE_PINNED_MD5="1",
    TOY_MAX_UPDATE="30",
    TOY_WARMUP="15",
    TOY_SAVE_INTERVAL_UPDATES="10",
    PREP_WORKERS="2",
)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("wmt14 toy")  # a path with a space
    archives = root / "archives"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=300, test=40)
    work = root / "work"
    proc = run_recipe("wmt14_en_de_base.sh", work, FROM=str(archives), **TOY)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc.stdout + proc.stderr


@pytest.mark.e2e
def test_toy_run_end_to_end(toy_run):
    work, output = toy_run
    for header in ("1:", "2a:", "2b:", "3:", "4-base:", "5-base:", "6-base:", "7-base:", "8-base:"):
        assert f"==== stage {header}" in output
    assert "==== stage 0:" not in output  # FROM was given: no toy archives written
    report = json.loads((work / "data" / "report.json").read_text())
    assert report["train_total"]["kept"] == 900 and report["test"]["pairs"] == 40
    results = work / "base" / "results"
    scores = json.loads((results / "scores.test.json").read_text())
    assert scores["sentences"] == 40
    assert 0 <= scores["sacrebleu"] <= 100 and 0 <= scores["tokenized_bleu_compound_split"] <= 100
    hypotheses = (results / "hypotheses.test.txt").read_text().splitlines()
    assert len(hypotheses) == 40
    # the score is against the references exactly as in the newstest2014 SGML file
    import sacrebleu

    with tarfile.open(work.parent / "archives" / "test-full.tgz") as tar:
        sgml = tar.extractfile("test-full/newstest2014-deen-ref.de.sgm").read().decode()
    references = re.findall(r"<seg[^>]*>(.*)</seg>", sgml)
    assert sum("\u201e" in r for r in references) == 8  # typographic quotes, which normalisation would change
    assert scores["reference"] == str(work / "data" / "test.ref.de")
    assert (work / "data" / "test.ref.de").read_text(encoding="utf-8").splitlines() == references
    assert round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2) == scores["sacrebleu"]
    assert round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2) == scores["chrf"]
    table = output[output.index("==== results") :]
    assert re.search(
        r"\| tokenized BLEU, compound split \(how the paper scored\) \| \d+\.\d\d \| 27\.3 \(Table 2\) \|", table
    )
    assert re.search(r"\| sacreBLEU, detokenized \| \d+\.\d\d \| not reported", table)
    assert re.search(r"\| dev perplexity per word-piece \(newstest2013\) \| \d+\.\d\d \| base 4\.92", table)
    from transformer_plugin_cli.tools.average_checkpoints import saved_update
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    averaged = load_checked(work / "base" / "checkpoints" / "average.pt")
    updates = sorted(saved_update(p) for p in averaged["averaged_from"])
    # the last 3 (TOY_AVERAGE_LAST) states saved every 10 updates (TOY_SAVE_INTERVAL_UPDATES); epoch 1's end, at
    # update 24, is no such state, and no epoch checkpoint is kept
    assert updates == [10, 20, 30]
    assert not [p for p in os.listdir(work / "base" / "checkpoints") if re.fullmatch(r"checkpoint\d+\.pt", p)]


@pytest.mark.e2e
def test_toy_rerun_skips_every_stage(toy_run):
    work, _ = toy_run
    archives = work.parent / "archives"
    proc = run_recipe("wmt14_en_de_base.sh", work, FROM=str(archives), **TOY)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("done already") == 9
    assert "fairseq-train" not in proc.stderr


# ---- the space a run needs ------------------------------------------------------------------------------


def estimated(output):
    """(bytes written, bytes needed at the peak, bytes free) from the space line of a dry run."""
    units = {"bytes": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
    m = re.search(
        r"this run writes about ([\d.]+) (\w+) under .* and needs about ([\d.]+) (\w+) free at its peak; "
        r"([\d.]+) (\w+) is free there",
        output,
    )
    assert m, output[-2000:]
    return tuple(float(m.group(i)) * units[m.group(i + 1)] for i in (1, 3, 5))


def written_by_the_base_run(work):
    total = 0
    for part in ("data", "spm", "data-bin", "base", ".done"):
        for directory, _, names in os.walk(work / part):
            total += sum(os.path.getsize(os.path.join(directory, n)) for n in names)
    return total


@pytest.mark.e2e
def test_the_space_a_run_needs_is_worked_out_within_10_percent(toy_run, tmp_path):
    """--dry-run's estimate for a WORK where nothing is done yet, against what the toy run wrote there."""
    work, _ = toy_run
    proc = run_recipe("wmt14_en_de_base.sh", tmp_path / "fresh", "--dry-run", FROM=str(work.parent / "archives"), **TOY)
    written, needed, _ = estimated(proc.stdout)
    actual = written_by_the_base_run(work)
    print(f"estimated {written / 1e6:.2f} MB, the toy run wrote {actual / 1e6:.2f} MB")
    assert abs(written - actual) <= 0.1 * actual
    assert needed > written  # a save writes a checkpoint before it removes the oldest
    again = run_recipe("wmt14_en_de_base.sh", work, "--dry-run", FROM=str(work.parent / "archives"), **TOY)
    assert estimated(again.stdout)[0] == 0  # everything done: nothing more to write


def test_a_run_that_does_not_fit_stops_before_any_work(tmp_path, small_disk):
    """WORK on a disk of 6 MB; the toy run writes about 22 MB: stopped at once, naming both figures and what
    changes them, nothing written; a dry run says the same and goes on."""
    work = tmp_path / "work"
    small_disk(work, 6_000_000)
    proc = run_recipe("wmt14_en_de_base.sh", work, **dict(TOY, PREP_WORKERS="1"))
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(
        rf"FAILED: stopped before any work: {re.escape(str(work))} needs about [\d.]+ MB free and its disk has "
        r"[\d.]+ MB\. Make room, set WORK to a larger disk, or keep fewer checkpoints \(AVERAGE_LAST\)",
        proc.stderr,
    )
    assert "stage 4-base: " in proc.stderr and "checkpoints: 5 of " in proc.stderr  # what it would keep, stage by stage
    assert "==== stage" not in proc.stdout and os.listdir(work) == []
    dry = run_recipe("wmt14_en_de_base.sh", work, "--dry-run", **TOY)
    assert dry.returncode == 0 and estimated(dry.stdout)[1] > 6_000_000


@pytest.mark.e2e
def test_a_data_stage_that_fills_the_disk_leaves_no_stamp_and_its_rerun_starts_clean(toy_run, tmp_path, small_disk):
    """WORK on a disk that holds stages 1 and 2a but not 2b's encoded text (IGNORE_FREE_SPACE=1 goes past the
    estimate): stage 2b fails in one line, with no stamp and no partial file; once there is room the same
    command makes the data of a run on a large disk, byte for byte."""
    work, _ = toy_run
    small = tmp_path / "work"
    small_disk(small, 640_000)  # stages 1 and 2a write about 520 KB here, 2b 230 KB more
    variables = dict(TOY, FROM=str(work.parent / "archives"), DATA_ONLY="1", IGNORE_FREE_SPACE="1")
    proc = run_recipe("wmt14_en_de_base.sh", small, **variables)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "No space left on device" in proc.stderr and "nothing was left half-written" in proc.stderr
    failed = re.search(r"FAILED: stage (\S+):", proc.stderr).group(1)
    assert not (small / ".done" / failed).exists()
    assert not [os.path.join(d, n) for d, _, names in os.walk(small) for n in names if n.endswith(".tmp")]
    small_disk(small, 20_000_000)
    proc = run_recipe("wmt14_en_de_base.sh", small, **variables)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for part in ("spm", "data-bin"):
        for name in os.listdir(work / part):
            if not name.endswith(".log") and name != "spm.model":  # the model holds its input files' paths
                assert (small / part / name).read_bytes() == (work / part / name).read_bytes(), f"{part}/{name}"


@pytest.mark.e2e
def test_another_clone_environment_and_work_path_continue_the_run(toy_run, tmp_path):
    """The run's WORK, moved, continued from a second clone of the repository with the environment at another
    path: every stage is done already (a stamp's identity used to be its command line, paths included)."""
    work, _ = toy_run
    (tmp_path / "clone").mkdir()
    clone = copy_repository(tmp_path / "clone")
    venv = tmp_path / "venv-elsewhere"
    venv.symlink_to(os.path.dirname(BIN))
    moved = tmp_path / "moved work"
    shutil.copytree(work, moved, symlinks=True)
    archives = tmp_path / "archives copied"
    shutil.copytree(work.parent / "archives", archives)  # the same archives at another path, with other times
    env = user_env(WORK=moved, FROM=archives, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", **TOY)
    proc = subprocess.run(
        ["bash", "recipes/wmt14_en_de_base.sh"], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0 and proc.stdout.count("done already with these settings: skipping") == 9, (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )


# ---- Ctrl-C and kill during training, then the same command again ----------------------------------------

LONG = dict(TOY, TOY_MAX_UPDATE="60", TOY_AVERAGE_LAST="1")  # 60 updates, a checkpoint every 10, no averaging


def last_parameters(work, config):
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    return load_checked(str(work / config / "checkpoints" / "checkpoint_last.pt"))["model"]


@pytest.fixture(scope="module")
def long_reference(toy_run):
    """The toy run's training for 60 updates, never interrupted."""
    work, _ = toy_run
    proc = run_recipe("wmt14_en_de_base.sh", work, FROM=str(work.parent / "archives"), CONFIG="long", **LONG)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return last_parameters(work, "long")


@pytest.mark.e2e
@pytest.mark.parametrize(
    "how", ["SIGINT to the process group", "SIGTERM to the recipe", "SIGINT to the process group, torchrun"]
)
def test_an_interrupted_training_leaves_nothing_running_and_resumes_to_the_same_parameters(
    toy_run, long_reference, how
):
    """What Ctrl-C in a terminal sends (SIGINT to the foreground process group) and `kill` of the recipe,
    during training on two CPU workers (the recipe's own, or torchrun's on one machine): within seconds no
    process of the run is left, the recipe says how to resume, and the same command again ends with the
    parameters of the run that was never interrupted (the same world size, seed and batches)."""
    work, _ = toy_run
    config = "sigint" if "SIGINT" in how else "sigterm"
    launch = {}
    if "torchrun" in how:
        config, launch = "torchrun", dict(LAUNCH="torchrun", NNODES="1", MASTER_PORT=str(free_port()))
    env = user_env(WORK=work, FROM=work.parent / "archives", CONFIG=config, **LONG, **launch)
    script = os.path.join(REPO, "recipes", "wmt14_en_de_base.sh")
    recipe = subprocess.Popen(
        ["bash", script],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    checkpoints = work / config / "checkpoints"
    try:
        deadline = time.time() + 300
        while not list(checkpoints.glob("checkpoint_*_20.pt")):  # a checkpoint to resume from, and 40 updates to go
            assert time.time() < deadline and recipe.poll() is None, "training did not reach update 20"
            time.sleep(0.05)
        sent = time.time()
        if "SIGINT" in how:
            os.killpg(recipe.pid, signal.SIGINT)
        else:
            recipe.send_signal(signal.SIGTERM)
        _, err = recipe.communicate(timeout=60)
    finally:
        if recipe.poll() is None:
            os.killpg(recipe.pid, signal.SIGKILL)
    while processes_naming(str(checkpoints)) and time.time() < sent + 30:
        time.sleep(0.1)
    assert not processes_naming(str(checkpoints)), f"{how}: processes of the run left behind"
    print(f"{how}: nothing of the run left {time.time() - sent:.1f} s after the signal")
    name = "SIGINT" if "SIGINT" in how else "SIGTERM"
    assert (
        f"stopped by {name}; every process it started has ended. Run the same command again to resume: training "
        "continues from the last checkpoint it saved (checkpoint_last.pt)" in err
    ), err[-3000:]
    assert not (work / ".done" / f"4-{config}").exists()
    stopped_at = max(int(p.name.split("_")[-1][:-3]) for p in checkpoints.glob("checkpoint_*_*.pt"))
    assert 20 <= stopped_at < 60

    proc = run_recipe("wmt14_en_de_base.sh", work, FROM=str(work.parent / "archives"), CONFIG=config, **LONG, **launch)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # from checkpoint_last.pt: the last state saved, or the one before (an epoch's end, say) if the signal came
    # between a save and its copy to checkpoint_last.pt
    resumed_at = int(
        re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ (\d+) updates\)", proc.stdout + proc.stderr)[
            1
        ]
    )
    assert 0 < resumed_at <= stopped_at
    resumed = last_parameters(work, config)
    assert resumed.keys() == long_reference.keys()
    assert not [k for k in resumed if not torch.equal(resumed[k], long_reference[k])], (
        "parameters differ from the uninterrupted run's"
    )


@pytest.mark.e2e
def test_another_machines_core_count_redoes_nothing(toy_run):
    """PREP_WORKERS defaults to nproc: the data prepared on one machine is the data on another (it used to
    redo stages 1-3 there, naming variables that had not changed, and stage 3 then died on the existing
    data-bin). A dry run says what a real run would do."""
    work, _ = toy_run
    proc = run_recipe(
        "wmt14_en_de_base.sh", work, "--dry-run", FROM=str(work.parent / "archives"), **dict(TOY, PREP_WORKERS="1")
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("a real run skips this stage") == 9 and "redoes" not in proc.stdout


def test_toy_dry_run_without_archives_writes_its_own(tmp_path):
    proc = run_recipe("wmt14_en_de_base.sh", tmp_path / "w", "--dry-run", TOY="1")
    assert proc.returncode == 0, proc.stderr
    assert "==== stage 0: toy archives in the WMT14 layout" in proc.stdout
    [prepare] = [c for c in commands(proc.stdout, PYTHON) if "prepare" in c]
    assert "--ignore-pinned-md5" in prepare and flag(prepare, "--from") == str(tmp_path / "w" / "toy-archives")
    trains = commands(proc.stdout, "fairseq-train")
    assert len(trains) == 2 and flag(trains[0], "--arch") == "vaswani_tiny"  # CPU workers unless GPUS is set


def test_toy_keeps_the_layout_it_is_given(tmp_path):
    """TOY=1 changes sizes only: GPUS, LAUNCH, NNODES and NODE_RANK given with it are kept (they used to
    be dropped silently, and every "node" trained a run of its own)."""
    gpus = run_recipe("wmt14_en_de_base.sh", tmp_path / "w", "--dry-run", TOY="1", GPUS="1")
    [train] = commands(gpus.stdout, "fairseq-train")
    assert flag(train, "--arch") == "vaswani_tiny" and flag(train, "--distributed-world-size") == "1"
    node1 = run_recipe(
        "wmt14_en_de_base.sh",
        tmp_path / "w",
        "--dry-run",
        TOY="1",
        LAUNCH="torchrun",
        NNODES="2",
        NODE_RANK="1",
        MASTER_ADDR="node0",
        CPU_WORKERS="3",
        DIST_TIMEOUT="42",
    )
    assert node1.returncode == 0, node1.stderr
    [line] = [line for line in node1.stdout.splitlines() if " -m torch.distributed.run " in line]
    words = shlex.split(line[2:])
    assert [
        flag(words, f) for f in ("--nnodes", "--nproc-per-node", "--node-rank", "--master-addr", "--rdzv-conf")
    ] == ["2", "3", "1", "node0", "timeout=42"]
    assert flag(words, "--distributed-world-size") == "6" and flag(words, "--heartbeat-timeout") == "42"
    assert {"--cpu", "legacy_ddp", "gloo"} <= set(words) and flag(words, "--arch") == "vaswani_tiny"
    assert "6 CPU workers (2 machines x 3)" in node1.stdout
    assert node1.stdout.count("node 1 waits until node 0 has done this stage") == 5  # stages 0, 1, 2a, 2b, 3
    assert "node 1: training done" in node1.stdout and "fairseq-generate" not in node1.stdout


@pytest.mark.parametrize(
    "variables, says",
    [
        (
            dict(LAUNCH="local", NNODES="2"),
            "NNODES=2: training on several machines needs LAUNCH=torchrun or LAUNCH=slurm",
        ),
        (dict(LAUNCH="mpirun"), "LAUNCH=mpirun: use local, torchrun or slurm"),
        (dict(NODE_RANK="1"), "NODE_RANK=1 with LAUNCH=local: only LAUNCH=torchrun runs the recipe on every machine"),
        (
            dict(LAUNCH="torchrun", NNODES="2", NODE_RANK="2", MASTER_ADDR="n0"),
            "NODE_RANK=2: with NNODES=2, each machine's number, 0 to 1",
        ),
        (dict(LAUNCH="torchrun", NNODES="2"), "LAUNCH=torchrun NNODES=2 needs MASTER_ADDR: node 0's address"),
        (dict(GPUS="0", CPU_WORKERS="0"), "CPU_WORKERS=0: processes per machine, 1 or more"),
        (dict(DIST_TIMEOUT="soon"), "DIST_TIMEOUT=soon: seconds, 1 or more"),
        (
            dict(LAUNCH="slurm", REAL="1"),
            "LAUNCH=slurm runs inside a SLURM allocation (sbatch or salloc): SLURM_JOB_ID is not set",
        ),
        (
            dict(LAUNCH="slurm", NNODES="2", SLURM_JOB_ID="7", SLURM_JOB_NUM_NODES="4", REAL="1"),
            "NNODES=2, but this SLURM allocation has 4 nodes (sbatch --nodes)",
        ),
        (dict(GPUS="64", REAL="1"), f"GPUS=64, but torch sees {torch.cuda.device_count()} CUDA devices on "),
    ],
)
def test_a_layout_that_cannot_work_stops_before_any_work(tmp_path, variables, says):
    """Each in a dry run (which prints everything else), or in a real run where only the machine tells."""
    real = variables.pop("REAL", None)
    proc = run_recipe("wmt14_en_de_base.sh", tmp_path / "w", *([] if real else ["--dry-run"]), **variables)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists() and "==== stage" not in proc.stdout


# ---- Table 3 ------------------------------------------------------------------------------------


def test_table3_dry_run_trains_every_row_with_its_flags(tmp_path):
    from transformer_plugin_cli.tools import table3

    proc = run_recipe("wmt14_table3.sh", tmp_path / "w", "--dry-run", GPUS="8")
    assert proc.returncode == 0, proc.stderr
    trains = commands(proc.stdout, "fairseq-train")
    assert len(trains) == len(table3.ROWS) == 20
    for row, train in zip(table3.ROWS, trains):
        assert flag(train, "--save-dir") == str(tmp_path / "w" / f"table3-{row.id}" / "checkpoints")
        for name, value in row.flags.items():  # the row's flags come last, so they win over the recipe's
            assert train[len(train) - train[::-1].index(name)] == value
        assert flag(train, "--arch") == ("vaswani_big" if row.id == "big" else "vaswani_base")
        assert flag(train, "--max-update") == ("300000" if row.id == "big" else "100000")
    generates = commands(proc.stdout, "fairseq-generate")
    assert all(
        flag(g, "--gen-subset") == "valid" and flag(g, "--path").endswith("checkpoint_last.pt") for g in generates
    )
    assert len(generates) == 20 and "average_checkpoints" not in proc.stdout  # Table 3: no averaging
    bad = run_recipe("wmt14_table3.sh", tmp_path / "w", "--dry-run", ROWS="base F-nonsense")
    assert bad.returncode != 0 and "unknown Table 3 row 'F-nonsense'" in bad.stderr


def test_table3_says_a_rows_own_error_and_not_that_a_training_would_be_redone(tmp_path):
    """Every --check failure used to become "exit 3, nothing was changed", a setting's error included."""
    proc = run_recipe("wmt14_table3.sh", tmp_path / "w", ROWS="base A-h1", PRECISION="fp64")
    assert proc.returncode == 2 and "PRECISION=fp64: use fp32, fp16, bf16 or amp" in proc.stderr
    assert (
        "FAILED: row base (wmt14_en_de_base.sh) cannot run as set (exit 2, its message above); no row was started"
        in proc.stderr
    )
    assert "would have to redo" not in proc.stderr and not (tmp_path / "w").exists()


@pytest.mark.e2e
@pytest.mark.slow  # ~50 s; the rows' flags are checked by the dry-run test and tests/test_table3.py
def test_table3_toy_row_and_table(toy_run):
    from transformer_plugin_cli.tools.table3 import count_parameters

    work, _ = toy_run
    toy = dict(TOY, TOY_MAX_UPDATE="10", CPU_WORKERS="1")  # one process: the plumbing is what is tested here
    proc = run_recipe("wmt14_table3.sh", work, FROM=str(work.parent / "archives"), ROWS="E-learned", **toy)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "==== stage 4-table3-E-learned:" in proc.stdout and "positional-encoding learned" in proc.stdout
    assert proc.stdout.count("done already") == 4  # data stages 1-3 are shared with the En-De recipe
    table = (work / "table3.md").read_text()
    [line] = [line for line in table.splitlines() if line.startswith("| (E) E-learned")]
    cells = [c.strip() for c in line.split("|")[2:-1]]
    assert cells[2] == "4.92" and cells[4] == "25.7"  # the paper's values beside ours
    assert float(cells[1]) > 1 and 0 <= float(cells[3]) <= 100  # our dev perplexity and BLEU
    # the same toy model as the En-De run, plus one learned position table each in encoder and decoder
    learned = count_parameters(str(work / "table3-E-learned" / "checkpoints" / "checkpoint_last.pt"))
    base = count_parameters(str(work / "base" / "checkpoints" / "checkpoint_last.pt"))
    assert float(cells[5]) == round(learned / 1e6, 1)
    extra = learned - base
    assert extra > 0 and extra % (2 * 64) == 0  # d_model of vaswani_tiny = 64


# ---- SHARDS: a corpus too large for one binarization -------------------------------------------------------


@pytest.mark.e2e
def test_shards_one_dictionary_every_shard_read_in_turn_and_a_rerun_skips_the_shards_made(toy_run, tmp_path):
    """SHARDS=3: the training text in 3 round-robin shards, one dictionary from all of it, each shard its own
    data-bin; fairseq-train reads them colon-joined, one per epoch in turn, valid from the first; generation
    and validation read the first. A run stopped during binarization redoes only the shard it was making."""
    work = tmp_path / "sharded work"
    archives = toy_run[0].parent / "archives"
    env = dict(TOY, SHARDS="3")
    estimate = estimated(run_recipe("wmt14_en_de_base.sh", work, "--dry-run", FROM=str(archives), **env).stdout)[0]
    data = run_recipe("wmt14_en_de_base.sh", work, FROM=str(archives), DATA_ONLY="1", **env)
    assert data.returncode == 0, data.stdout[-3000:] + data.stderr[-3000:]
    for header in ("3a: the training text in 3 shards", "3b: one dictionary", "3c-shard0:", "3c-shard1:", "3c-shard2:"):
        assert f"==== stage {header}" in data.stdout
    shards = [work / "data-bin" / f"shard{i}" for i in range(3)]
    assert {len((s / "train.en-de.en.idx").read_bytes()) for s in shards} == {
        len((shards[0] / "train.en-de.en.idx").read_bytes())
    }
    for s in shards:  # one dictionary, from all the text
        assert (s / "dict.en.txt").read_text() == (work / "data-bin" / "dict" / "dict.en.txt").read_text()
    assert (shards[0] / "valid.en-de.de.bin").exists() and not list(shards[1].glob("valid*")) + list(
        shards[2].glob("test*")
    )
    assert f"the data is ready in {shards[0]}:{shards[1]}:{shards[2]}" in data.stdout

    shutil.rmtree(shards[2])  # as if stopped while making the last shard: no stamp, a partial directory
    (work / ".done" / "3c-shard2").unlink()
    shards[2].mkdir()
    (shards[2] / "train.en-de.en.bin").write_bytes(b"partial")
    proc = run_recipe("wmt14_en_de_base.sh", work, FROM=str(archives), **env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    blocks = {b.split(":", 1)[0]: b for b in proc.stdout.split("==== stage ")[1:]}
    skipped = sorted(stage for stage, block in blocks.items() if "done already" in block)
    assert skipped == ["1", "2a", "2b", "3a", "3b", "3c-shard0", "3c-shard1"]
    assert "3c-shard2" in blocks and "4-base" in blocks
    assert (shards[2] / "train.en-de.en.bin").read_bytes() != b"partial"  # the stage cleared what it left
    log = (work / "base" / "train.log").read_text()
    loaded = re.findall(r"loaded [\d,]+ examples from: (.+)/train\.en-de\.en$", log, flags=re.M)
    assert [os.path.basename(p) for p in loaded][:4] == [
        "shard0",
        "shard1",
        "shard2",
        "shard0",
    ]  # epoch e: shard (e-1) % 3
    assert re.search(r"loaded [\d,]+ examples from: .+/shard0/valid\.en-de\.en", log)
    scores = json.loads((work / "base" / "results" / "scores.test.json").read_text())
    assert scores["sentences"] == 40
    actual = written_by_the_base_run(work)  # mostly checkpoints, which the estimate sizes from the shards' dictionary
    assert abs(estimate - actual) <= 0.1 * actual, (estimate, actual)
