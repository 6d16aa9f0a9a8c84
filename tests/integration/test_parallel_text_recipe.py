"""recipes/parallel_text.sh on real text at toy size: from two files and from a TSV, to scores, a report and
exports; a re-run; a changed setting; hostile input and a corpus too small, each stopped with its message."""

import json
import os
import re
import shlex

import pytest

from helpers import REPO, commands, flag, known_speed_figures, real_english_german, run_recipe
from helpers import corpus as write_corpus
from recipes.planner.budget import candidates
from recipes.planner.probe_arithmetic import updates_that_fit

# validation by BLEU too (EVAL_BLEU=1): the toy runs validate as users who pick the best checkpoint by BLEU do
TOY = dict(
    TOY="1",
    TOY_MAX_UPDATE="40",
    TOY_WARMUP="20",
    TOY_SAVE_INTERVAL_UPDATES="10",
    TOY_AVERAGE_LAST="2",
    TOY_VOCAB_SIZE="500",
    SRC="en",
    TGT="de",
    OMP_NUM_THREADS="1",
    EVAL_BLEU="1",
)
PAIRS = 6000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel text")  # a path with a space
    pairs = real_english_german(PAIRS)
    write_corpus(root, pairs, tsv="pairs.tsv")
    return root


@pytest.fixture(scope="module", autouse=True)
def probed(tmp_path_factory):
    """This module's speed figures, kept where the recipe reads them: the full-size models of its dry runs and the toy
    model are known (helpers.known_speed_figures); the REPROBE test (e2e) probes the toy model for real, in a cache
    of its own."""
    cache = tmp_path_factory.mktemp("cache")
    known_speed_figures(cache, vocab=500, toy_vocab=500)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        yield cache


@pytest.fixture(scope="module")
def two_files_run(corpus):
    work = corpus / "work"
    proc = run_recipe("parallel_text.sh", work, TRAIN=str(corpus / "train"), EXPORT="ct2 hf", **TOY)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc.stdout, proc.stderr


@pytest.mark.e2e
def test_two_files_to_scores_a_report_and_exports(two_files_run):
    work, out, _ = two_files_run
    for stage in ("1", "2a", "2b-en", "2b-de", "3", "4", "5", "6", "7", "8", "9-ct2", "9-hf"):
        assert f"==== stage {stage}:" in out
    report = json.loads((work / "data" / "report.json").read_text())
    assert report["pairs"]["valid"] == report["pairs"]["test"] == 200 and report["pairs"]["train"] > 4000
    assert report["scripts"] == {"en": "LATIN", "de": "LATIN"} and report["langid"] == "py3langid, en, de"
    assert "a duplicate of an earlier pair" in report["changes_and_drops"]
    scores = json.loads((work / "results" / "scores.test.json").read_text())
    assert scores["sentences"] == 200 and 0 <= scores["chrf"] <= 100
    assert len((work / "results" / "hypotheses.test.txt").read_text().splitlines()) == 200
    assert re.search(r"^sacreBLEU \d+\.\d\d  chrF \d+\.\d\d  \(200 test sentences\)$", out, flags=re.M)
    assert "nrefs:1|case:mixed|eff:no|tok:13a" in out and "nc:6|nw:0" in out  # both signatures, sacreBLEU's and chrF's
    assert f"model: {work}/checkpoints/average.pt" in out and f"report: {work}/results/report.md" in out
    assert (work / "results" / "report.md").exists() and (work / "ct2" / "model.bin").exists()
    assert (work / "hf" / "config.json").exists()
    assert "small (under 100k pairs)" in out and "a joint vocabulary of 500" in out
    # fairseq-train's progress after each logged interval (patches/training_progress.py)
    assert re.search(
        r"\| progress \| update 4 of 40 \(10%\) \| \d+ s elapsed \| about \d+ s left, ends \d\d:\d\d$", out, flags=re.M
    )
    assert re.search(
        r"\| progress \| update 40 of 40 \(100%\) \| .* \| valid loss \d+\.\d\d valid bleu \d+\.\d\d$", out, flags=re.M
    )
    # validation by BLEU on two workers: each sums its counts into float64 arrays, which the checkpoints hold
    assert '"valid_best_bleu"' in (work / "train.log").read_text()


@pytest.mark.e2e
def test_no_debug_messages_from_any_stage(two_files_run):
    """Importing fairseq turns on every library's debug messages (patches/debug_logging_at_import.py):
    without the patch the report's plots print matplotlib's font search, fairseq-generate hydra's."""
    _, out, err = two_files_run
    debug = [line for line in (out + err).splitlines() if line.startswith("DEBUG:") or " | DEBUG | " in line]
    assert not debug, f"{len(debug)} debug lines, the first: {debug[:3]}"


@pytest.mark.e2e
def test_no_third_party_noise_from_any_stage(two_files_run):
    """hydra's deprecation warnings, torch's autocast and pin_memory warnings, fairseq's tensorboardX line
    (patches/third_party_warnings.py, requirements.txt): about 60 of a short run's 491 lines."""
    _, out, err = two_files_run
    noise = [line for line in (out + err).splitlines() if "Warning:" in line or "Please install tensorboardX" in line]
    assert not noise, f"{len(noise)} lines, the first: {noise[:3]}"


@pytest.mark.e2e
def test_a_rerun_skips_every_stage_and_a_changed_setting_stops_before_training(two_files_run, corpus):
    work, _, _ = two_files_run
    again = run_recipe("parallel_text.sh", work, TRAIN=str(corpus / "train"), EXPORT="ct2 hf", **TOY)
    assert again.returncode == 0 and again.stdout.count("done already with these settings: skipping") == 12
    changed = run_recipe("parallel_text.sh", work, TRAIN=str(corpus / "train"), **dict(TOY, TOY_VOCAB_SIZE="400"))
    assert changed.returncode == 3
    assert (
        "stage 4 (training) was done, but stage 3, whose outputs it reads ($WORK/data-bin), is redone (PLAN_VOCAB_SIZE "
        "was 500, now 400, in stage 2a)"
    ) in changed.stderr


@pytest.mark.e2e
def test_an_edited_corpus_redoes_what_reads_it_and_stops_before_training_naming_the_file(two_files_run, corpus):
    """The same line count, the last 1,000 pairs' targets replaced: the prefix form (train for train.en and
    train.de) is no file, and was never digested."""
    work, _, _ = two_files_run
    original = (corpus / "train.de").read_bytes()
    lines = original.decode().splitlines(keepends=True)
    try:
        (corpus / "train.de").write_text("".join(lines[:-1000]) + "".join(lines[:1000]), encoding="utf-8")
        dry = run_recipe("parallel_text.sh", work, "--dry-run", TRAIN=str(corpus / "train"), **TOY)
        assert (
            f"a real run redoes this stage: its inputs changed since it was done: the content of {corpus}/train.de "
            "changed" in dry.stdout
        )
        proc = run_recipe("parallel_text.sh", work, TRAIN=str(corpus / "train"), **TOY)
        assert proc.returncode == 3
        assert (
            "stage 4 (training) was done, but stage 3, whose outputs it reads ($WORK/data-bin), is redone (the "
            "content "
            f"of {corpus}/train.de changed, in stage 1)"
        ) in proc.stderr
    finally:
        (corpus / "train.de").write_bytes(original)
    again = run_recipe("parallel_text.sh", work, TRAIN=str(corpus / "train"), EXPORT="ct2 hf", **TOY)
    assert again.returncode == 0 and again.stdout.count("done already with these settings: skipping") == 12


@pytest.mark.e2e
def test_a_tsv_gives_the_data_of_the_two_files(two_files_run, corpus, tmp_path):
    """Stages 1-3 alone (DATA_ONLY=1) from the TSV: the same text, pieces and binarized data as from the two files.
    (Validation by BLEU is the two-files run's: TOY.)"""
    work, _, _ = two_files_run
    proc = run_recipe("parallel_text.sh", tmp_path / "w", TRAIN=str(corpus / "pairs.tsv"), DATA_ONLY="1", **TOY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"DATA_ONLY=1: the data is ready in {tmp_path / 'w' / 'data-bin'}" in proc.stdout
    assert "==== stage 4:" not in proc.stdout and not (tmp_path / "w" / "checkpoints").exists()
    for name in (
        "data/train.en",
        "data/train.de",
        "data/valid.de",
        "data/test.en",
        "spm/train.sp.de",
        "data-bin/dict.en.txt",
        "data-bin/train.en-de.de.bin",
    ):
        assert (tmp_path / "w" / name).read_bytes() == (work / name).read_bytes(), name


def test_hostile_input_stops_at_its_stage_naming_the_file(corpus, tmp_path):
    """A U+2028 inside an English line, where some tool on the way split the German file: one line more."""
    bad = tmp_path / "bad"
    english = (corpus / "train.en").read_text().split("\n")[:-1]
    german = (corpus / "train.de").read_text().split("\n")[:-1]
    i = next(i for i in range(99, len(english)) if " " in english[i] and " " in german[i])
    english[i] = english[i].replace(" ", "\u2028", 1)
    german[i : i + 1] = german[i].split(" ", 1)
    (tmp_path / "bad.en").write_text("".join(line + "\n" for line in english))
    (tmp_path / "bad.de").write_text("".join(line + "\n" for line in german))
    proc = run_recipe("parallel_text.sh", tmp_path / "w", TRAIN=str(bad), **TOY)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"error: {bad}.en has {PAIRS} lines and {bad}.de has {PAIRS + 1}" in proc.stderr
    assert f"{bad}.en has 1 line with a U+2028 LINE SEPARATOR (the first: line {i + 1})" in proc.stderr
    assert "FAILED: stage 1: check, clean and split" in proc.stderr
    assert not (tmp_path / "w" / ".done" / "1").exists()


def test_a_corpus_too_small_is_refused_before_any_work(corpus, tmp_path):
    for lang in ("en", "de"):
        (tmp_path / f"small.{lang}").write_text(
            "\n".join((corpus / f"train.{lang}").read_text().splitlines()[:500]) + "\n"
        )
    proc = run_recipe("parallel_text.sh", tmp_path / "w", TRAIN=str(tmp_path / "small"), **TOY)
    assert proc.returncode == 2 and "TRAIN has 500 lines: too few to train a translation model" in proc.stderr
    assert not (tmp_path / "w").exists()


def test_the_dry_run_names_the_settings_it_picked(corpus, tmp_path):
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        f"en-de: {PAIRS} lines, small (under 100k pairs): vaswani_base --d-ff 1024 --attention-heads 4 P_drop 0.3, a "
        "joint vocabulary of 500" in proc.stdout
    )  # under 10k lines: 500 pieces
    assert "--patience" not in proc.stdout and os.listdir(tmp_path / "w") == ["plan.json"]  # the plan, nothing else
    picked, said = (
        next(line for line in proc.stdout.splitlines() if line.startswith(s)) for s in ("picked: ", "time: ")
    )
    assert (
        picked == "picked: full run (small): N=6, d_model 512, d_ff 1024, P_drop 0.3, BPE 500 joint, "
        "4,096 tokens x 30,000 updates"
    )
    assert said == "time: training about 35.1 h here (30,000 updates of 4.00 s, 30 validations)"
    # the whole run beside it: the data stages, the averaging, the test set translated (600 held-out lines)
    whole = proc.stdout.splitlines()[proc.stdout.splitlines().index(said) + 1]
    assert re.fullmatch(
        r"time: the whole run about 35\.\d h \(data \d+ s, averaging 15 s, the test set translated \d+ s beside "
        r"training\)",
        whole,
    ), whole
    [generate] = commands(proc.stdout, "fairseq-generate")  # every test line, however long (test_cli.py: 1,100 tokens)
    assert flag(generate, "--max-source-positions") == flag(generate, "--max-target-positions") == "100000"
    assert flag(generate, "--model-overrides") == "{'max_source_positions': 100000, 'max_target_positions': 100000}"


@pytest.mark.parametrize(
    "env,warmup,peak",
    [
        (dict(), "4000", None),  # the default budget (30,000 updates) leaves room for the paper's warm-up
        (dict(MAX_UPDATE="1200"), "200", "4000"),  # a sixth of a short budget, at the paper's peak
        (dict(MAX_UPDATE="600"), "100", "4000"),  # and a log interval under 100
        (dict(MAX_UPDATE="1200", WARMUP="300"), "300", None),  # a WARMUP given is Eq. (3)'s, as written
    ],
)
def test_a_short_budget_warms_up_over_a_sixth_of_it_at_the_papers_peak_and_saves_20_times(
    corpus, tmp_path, env, warmup, peak
):
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
        **env,
    )
    assert proc.returncode == 0, proc.stderr
    train = next(line for line in proc.stdout.splitlines() if "fairseq-train" in line and "--warmup-updates" in line)
    assert f"--warmup-updates {warmup} " in train
    assert (f"--peak-warmup-updates {peak} " in train) if peak else "--peak-warmup-updates" not in train
    budget = int(env.get("MAX_UPDATE", 30000))
    assert f"--log-interval {min(100, budget // 10)} " in train
    assert f"--save-interval-updates {min(1000, budget // 20)} " in train  # and so validation
    # and only then: none at an epoch's end, which TIME would not count and PATIENCE would
    assert "--validate-interval 1000000 --save-interval 1000000 " in train
    # the pick in one line: a budget's updates of the candidate of the lowest predicted loss, or the class's full run
    picked = next(line for line in proc.stdout.splitlines() if line.startswith("picked: "))
    assert len(picked) < 120 and f" x {budget:,} updates" in picked, picked
    if env:  # the rule's pick, and what its prediction rests on
        assert re.match(r"picked: N=\d x d_model \d+, d_ff \d+, P_drop 0\.\d, [\d,]+ tokens x ", picked), picked
        assert picked.endswith(("measured)", "from the paper)", "extrapolated)")), picked
    else:
        assert picked.startswith("picked: full run (small): N=6"), picked


def test_a_corpus_named_relatively_or_absolutely_is_the_same_corpus(corpus, tmp_path):
    """TRAIN=corpus/train and TRAIN=$PWD/corpus/train are the same files: the same commands, so a rerun skips what is
    done rather than redo stage 1 and stop before training ("its settings changed")."""

    def stages(train):
        proc = run_recipe(
            "parallel_text.sh",
            tmp_path / "w",
            "--dry-run",
            TRAIN=train,
            SRC="en",
            TGT="de",
            MIN_PAIRS="5000",
            MAX_UPDATE="1200",
        )
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stdout.splitlines() if line.startswith("+ ")]

    relative = os.path.relpath(corpus / "train", REPO)
    assert not relative.startswith("/") and stages(relative) == stages(str(corpus / "train"))


def test_the_data_stages_use_every_core_whatever_omp_num_threads_says(corpus, tmp_path):
    """OMP_NUM_THREADS=1 (meant for torch's threads) is what nproc answers where it is set: the data stages took one
    process and one thread on any machine. They take the cores the recipe may use."""
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
        MAX_UPDATE="1200",
        OMP_NUM_THREADS="1",
    )
    assert proc.returncode == 0, proc.stderr
    cores = str(len(os.sched_getaffinity(0)))
    [binarize] = commands(proc.stdout, "fairseq-preprocess")
    assert flag(binarize, "--workers") == cores and cores != "1"
    encode = [
        shlex.split(line[2:])
        for line in proc.stdout.splitlines()
        if line.startswith("+ ") and "sentencepiece_vocab encode" in line
    ]
    assert len(encode) == 2 and all(flag(words, "--threads") == cores for words in encode)


def test_a_short_budget_keeps_the_settings_one_sets(corpus, tmp_path):
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
        MAX_UPDATE="1200",
        DROPOUT="0.2",
        VOCAB_SIZE="4000",
        MODEL_FLAGS="--d-ff 512",
    )
    assert proc.returncode == 0, proc.stderr
    assert "small (under 100k pairs): vaswani_base --d-ff 512 P_drop 0.2, a joint vocabulary of 4000" in proc.stdout
    assert (
        "picked: your settings (ARCH, MODEL_FLAGS, DROPOUT, TOKENS_PER_UPDATE or VOCAB_SIZE given), 1200 updates"
        in proc.stdout
    )


def test_shards_are_binarized_with_one_dictionary_and_read_in_turn(corpus, tmp_path):
    """SHARDS=2 (lib.sh's binarize_stages, run at toy size by the WMT14 recipe's test): training reads the
    shards colon-joined; generation, the report and the exports read the first, which holds valid and test."""
    work = tmp_path / "w"
    proc = run_recipe(
        "parallel_text.sh",
        work,
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
        SHARDS="2",
        EXPORT="ct2 hf",
    )
    assert proc.returncode == 0, proc.stderr
    for header in ("3a: the training text in 2 shards", "3b: one dictionary", "3c-shard0:", "3c-shard1:"):
        assert f"==== stage {header}" in proc.stdout
    bins = f"{work}/data-bin/shard0:{work}/data-bin/shard1"
    assert f"fairseq-train {bins} " in proc.stdout
    for command in ("fairseq-generate", "export_ctranslate2", "export_transformers", "tools.report"):
        line = next(line for line in proc.stdout.splitlines() if command in line and line.startswith("+ "))
        assert f"{work}/data-bin/shard0 " in line and bins not in line, line
    bad = run_recipe(
        "parallel_text.sh",
        work,
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
        SHARDS="0",
    )
    assert bad.returncode == 2 and "SHARDS=0: a number of shards, 1 or more" in bad.stderr


def test_without_a_corpus_a_dry_run_shows_the_settings_by_size_and_a_run_stops(tmp_path):
    """`bash recipes/parallel_text.sh --dry-run` as typed, no TRAIN: the settings of each size class (those
    settings_for picks), nothing written; a real run stops, naming what it needs."""
    from recipes.planner.budget.rule import settings_for

    dry = run_recipe("parallel_text.sh", tmp_path / "w", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "TRAIN, SRC and TGT are needed" in dry.stdout and "| under 10,000 | refused (MIN_PAIRS) |" in dry.stdout
    for pairs, span in ((1_000_000, "| 1,000,000 or more |"), (50_000, "| 10,000 to 100,000 |")):
        found = settings_for(pairs, ("LATIN", "LATIN"))
        row = next(line for line in dry.stdout.splitlines() if line.startswith(span))
        assert (
            f"| {found.vocab_size:,} | {' '.join(filter(None, (found.arch, found.model_flags)))} | {found.dropout} |"
            in row
        )
    assert not (tmp_path / "w").exists()
    run = run_recipe("parallel_text.sh", tmp_path / "w")
    assert run.returncode == 2 and "TRAIN, SRC and TGT are needed" in run.stderr and not (tmp_path / "w").exists()


def test_a_time_is_turned_into_updates_at_this_machines_speed(corpus, tmp_path):
    """TIME=3m at toy size: the toy model's figure read back (this module's), the updates that fit, fairseq's stop at
    TIME; the same TIME again reads the figure back; a TIME beside a MAX_UPDATE, or that is no duration, is refused.
    (REPROBE=1's probe measures it for real: the next test.)"""
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        "--explain",
        TRAIN=str(corpus / "train"),
        TIME="3m",
        **{k: v for k, v in TOY.items() if k != "TOY_MAX_UPDATE"},
    )
    assert proc.returncode == 0, proc.stderr
    said = re.search(
        r"^training: about (3 min|1\d\d s) here: ([\d,]+) updates of (\d+\.\d\d) s \(a probe of this machine, "
        r"measured .*; kept in .*speed\.json\), and (\d+) validations of about ([\d,]+) target tokens",
        proc.stdout,
        flags=re.M,
    )
    assert said, proc.stdout[:3000]
    updates, valid_tokens = int(said[2].replace(",", "")), int(said[5].replace(",", ""))
    # the dev set held out of this corpus, counted: 200 pairs of about 10 German words, 2 pieces a word
    assert 2000 < valid_tokens < 8000
    # what fits in 3 min with those validations (each translating the dev set: EVAL_BLEU=1), less starting, at the
    # figure shown to a hundredth of a second
    shown = float(said[3])
    assert "validations of about" in said[0] and "(each also translating it for the dev BLEU)" in proc.stdout
    fits = [
        updates_that_fit(180, shown + d, 3000, valid_tokens, interval=10, bleu=True) for d in (0.005, -0.005)
    ]  # TOY_SAVE_INTERVAL_UPDATES
    assert fits[0] <= updates <= fits[1] and int(said[4]) == updates // 10
    train = next(line for line in proc.stdout.splitlines() if "fairseq-train" in line and "--max-update" in line)
    assert f"--max-update {updates} " in train and "--stop-time-hours 0.0333" in train
    # the time alone bounds them: a run faster than its plan trains more (TRANSFORMER_PLUGIN_TIME_FILLS, exported)
    assert json.loads((tmp_path / "w" / "plan.json").read_text())["budget"]["time_fills"] == "1"
    again = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        "--explain",
        TRAIN=str(corpus / "train"),
        TIME="3m",
        **{k: v for k, v in TOY.items() if k != "TOY_MAX_UPDATE"},
    )
    if "with the machine busy" not in said[0]:  # a busy machine's figure is measured again once it is quiet (xdist)
        assert re.search(
            r"^training: about .* here: [\d,]+ updates of [\d.]+ s \(a probe of this machine, measured \d{4}-",
            again.stdout,
            flags=re.M,
        ), again.stdout[:3000]
    both = run_recipe("parallel_text.sh", tmp_path / "w", "--dry-run", TRAIN=str(corpus / "train"), TIME="3m", **TOY)
    assert both.returncode == 2 and "TIME=3m and MAX_UPDATE=40: give one budget" in both.stderr
    bad = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus / "train"),
        TIME="3 minutes",
        **{k: v for k, v in TOY.items() if k != "TOY_MAX_UPDATE"},
    )
    assert bad.returncode == 2 and "TIME=3 minutes: a duration such as 90m, 8h, 1h30m or 2d" in bad.stderr
    assert os.listdir(tmp_path / "w") == ["plan.json"]  # the dry runs' plan, nothing else


@pytest.mark.e2e
def test_reprobe_measures_the_toy_model_here_for_real(corpus, tmp_path, monkeypatch):
    """REPROBE=1: the recipe's probe times the toy model on this machine (a few seconds; beside other tests, a busy
    machine's three probes), and the plan says it measured now. (Its figure kept in a cache of its own, not the
    module's.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known_speed_figures(tmp_path / "cache", vocab=500, toy_vocab=500)
    fresh = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        "--explain",
        TRAIN=str(corpus / "train"),
        TIME="3m",
        REPROBE="1",
        **{k: v for k, v in TOY.items() if k != "TOY_MAX_UPDATE"},
    )
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert re.search(r"^training: about .* \(a probe of this machine, measured now", fresh.stdout, flags=re.M), (
        fresh.stdout[:3000]
    )


def test_a_full_size_dry_run_says_how_long_training_takes_here_and_offers_a_time(corpus, tmp_path):
    """No budget: the small class's 30,000 updates at 4 s (this module's figure) are 35 hours on CPU workers, more
    than a working day: the recipe says so, and offers TIME=8h. A TIME says what it picked and how long in two lines
    under 120 characters, the candidates beside it under --explain and in WORK/plan.json."""
    proc = run_recipe(
        "parallel_text.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus / "train"),
        SRC="en",
        TGT="de",
        MIN_PAIRS="5000",
        GPUS="0",
    )
    assert proc.returncode == 0, proc.stderr
    assert "time: training about 35.1 h here (30,000 updates of 4.00 s, 30 validations)" in proc.stdout
    assert (
        "more than a working day on CPU workers: TIME=8h picks what 8 hours train best here, or a GPU: GPUS=1"
        in proc.stdout
    )
    for time_text in ("2h", "3d"):
        timed = run_recipe(
            "parallel_text.sh",
            tmp_path / "w",
            "--dry-run",
            "--explain",
            TRAIN=str(corpus / "train"),
            SRC="en",
            TGT="de",
            MIN_PAIRS="5000",
            GPUS="0",
            TIME=time_text,
        )
        assert timed.returncode == 0, timed.stderr
        picked, said = (
            next(line for line in timed.stdout.splitlines() if line.startswith(s)) for s in ("picked: ", "time: ")
        )
        assert len(picked) < 120 and len(said) < 120 and "more than a working day" not in timed.stdout, (picked, said)
        held = json.loads((tmp_path / "w" / "plan.json").read_text())
        plan = held["choice"]  # the budget rule's candidates, beside the plan's model, batch and budget
        [chosen] = [o for o in plan["options"] if o["picked"]]
        assert held["budget"]["max_update"] == chosen["updates"] and held["model"]["arch"] == chosen["arch"]
        assert plan["budget"] == f"TIME={time_text}" and len(plan["options"]) == len(candidates.candidates())
        probed = [o for o in plan["options"] if o["limited"] != "not probed" and o["predicted_valid_loss_bits"]]
        mine = [o for o in probed if (o["arch"], o["model_flags"]) == (chosen["arch"], chosen["model_flags"])]
        assert chosen["predicted_valid_loss_bits"] == min(o["predicted_valid_loss_bits"] for o in mine)
        assert f"--max-update {chosen['updates']} " in timed.stdout and f" x {chosen['updates']:,} updates" in picked
        assert f"why:\nTIME={time_text}: the candidate of the lowest predicted validation loss" in timed.stdout
        for o in probed:  # each model's best option, its updates and its predicted loss, under --explain
            if o["predicted_valid_loss_bits"] == min(
                x["predicted_valid_loss_bits"]
                for x in probed
                if (x["arch"], x["model_flags"]) == (o["arch"], o["model_flags"])
            ):
                assert (
                    f"{o['name']}: {o['updates']:,} updates, {o['seconds_per_update']:.3g} s an update" in timed.stdout
                )


def test_early_stopping_counts_the_dev_bleu_and_is_off_without_it(corpus, tmp_path):
    """By valid loss, --patience stopped runs while BLEU still rose (benchmarks.early_stopping: patience 3, 5 and 10
    on an EN-RU run stopped at updates 2,300, 2,500 and 3,000 of 4,000, their models 1.0-1.9 test BLEU under the
    whole run's): with EVAL_BLEU=1 patience counts the dev BLEU (fairseq's --patience follows the best checkpoint's
    metric), without it there is none unless PATIENCE is set."""
    run = dict(TRAIN=str(corpus / "train"), SRC="en", TGT="de", MIN_PAIRS="5000", MAX_UPDATE="2000")
    train = commands(
        run_recipe("parallel_text.sh", tmp_path / "a", "--dry-run", EVAL_BLEU="1", **run).stdout, "fairseq-train"
    )[0]  # a worker's
    assert train[train.index("--patience") + 1] == "10" and train[train.index("--best-checkpoint-metric") + 1] == "bleu"
    train = commands(run_recipe("parallel_text.sh", tmp_path / "b", "--dry-run", **run).stdout, "fairseq-train")[
        0
    ]  # a worker's
    assert "--patience" not in train and "--eval-bleu" not in train
    train = commands(
        run_recipe("parallel_text.sh", tmp_path / "c", "--dry-run", PATIENCE="4", **run).stdout, "fairseq-train"
    )[0]
    assert train[train.index("--patience") + 1] == "4"
