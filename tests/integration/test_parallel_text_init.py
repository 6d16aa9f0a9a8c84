"""recipes/finetune.sh (INIT=) at toy size: a MarianMT directory (a tiny one in OPUS-MT's shape, random
weights) fine-tuned on a corpus in its pieces: imported, the corpus encoded and binarized with its sentencepiece
models and dictionaries, scored before and after, trained from its weights at the fine-tuning's rate, exported back;
a directory vaswani-import-marian wrote, used as it is; TIME sized for the parent's model; each input that does not
fit refused before any work, naming the file."""

import filecmp
import json
import os
import random
import re

import pytest

pytest.importorskip("transformers")

from helpers import corpus as write_corpus
from helpers import known_speed_figures, marian_directory, parameters, run_recipe, run_tool

TOY = dict(
    TOY="1",
    TOY_MAX_UPDATE="30",
    TOY_SAVE_INTERVAL_UPDATES="10",
    TOY_AVERAGE_LAST="2",
    SRC="en",
    TGT="de",
    LANGID="0",
    OMP_NUM_THREADS="1",
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """This module's speed figures (the toy parent is probed for real, once, by the first run that uses them)."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        yield cache


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """(the MarianMT directory, the same imported by vaswani-import-marian)."""
    root = tmp_path_factory.mktemp("parent")
    marian_directory(root / "hf", seed=3)
    run_tool("vaswani-import-marian", str(root / "hf"), str(root / "imported"))
    return root / "hf", root / "imported"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """1,500 pairs of the words the parent's sentencepiece model was trained on (helpers.marian_sentencepiece's
    letters), the target the source's words reversed; a word of letters the parent never saw, in a few lines; and a
    tenth of the lines longer than the parent's 64 positions, some of which the dev and test sets get."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 4))) for _ in range(300)]
    lines = [[rng.choice(words) for _ in range(rng.randint(3, 9))] for _ in range(1500)]
    for line in lines[:30]:
        line.append("xyz")
    for line in lines[30:180]:
        line.extend(rng.choice(words) for _ in range(70))
    rng.shuffle(lines)
    write_corpus(root, [(" ".join(w), " ".join(w[::-1])) for w in lines])
    # the parent's own test set (PARENT_TEST): other sentences of the same words, the target the source as it is
    general = [[rng.choice(words) for _ in range(rng.randint(3, 9))] for _ in range(60)]
    write_corpus(root, [(" ".join(w), " ".join(w)) for w in general], name="general")
    return root / "train"


def general(corpus):
    """The parent's own test set beside the corpus (PARENT_TEST)."""
    return corpus.parent / "general"


@pytest.fixture(scope="module")
def fine_tuned(parent, corpus, cache):
    work = corpus.parent / "work"
    proc = run_recipe(
        "finetune.sh",
        work,
        TRAIN=str(corpus),
        INIT=str(parent[0]),
        EXPORT="hf",
        PARENT_TEST=str(general(corpus)),
        **TOY,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc.stdout


@pytest.mark.e2e
def test_a_published_model_is_fine_tuned_scored_before_and_after_and_exported(fine_tuned, parent, corpus):
    work, out = fine_tuned
    stages = re.findall(r"^==== stage (\S+):", out, flags=re.M)
    assert stages == [
        "1",
        "2p",
        "2b-en",
        "2b-de",
        "2c-en",
        "2c-de",
        "3",
        "3r",
        "3p",
        "3q",
        "3s",
        "3t",
        "4",
        "6",
        "7",
        "7p",
        "7q",
        "8",
        "9-hf",
    ]  # no sentencepiece trained, and no average: a corpus this small hands over its best checkpoint by dev BLEU
    # the corpus in the parent's pieces and dictionaries
    for lang in ("en", "de"):
        assert filecmp.cmp(work / "data-bin" / f"dict.{lang}.txt", work / "parent" / f"dict.{lang}.txt", shallow=False)
    unknown = json.loads((work / "spm" / "unknown.en.json").read_text())
    assert unknown["inputs"]["train.en"]["unknown"] > 0 and unknown["commonest"][0][0] == "xyz"
    assert re.search(
        r"^  train\.en: [\d,]+ of [\d,]+ pieces \(\d\.\d\d%\) not in the parent's dictionary \(<unk>\)$", out, re.M
    )
    assert re.search(r"^  train\.de: [\d,]+ of [\d,]+ pieces", out, re.M)  # the target side's share is said too
    # the lines longer than the parent's positions: named as the corpus is encoded, counted at the end; the dev set's
    # are left out of validation (fairseq would stop at the first) and the test set's are translated
    assert re.search(r"^valid\.en: \d+ lines longer than the parent's 64 positions \(lines \d+", out, re.M)
    for split, what in (("train", "left out of training"), ("valid", "left out of validation"), ("test", "translated")):
        assert re.search(rf"^  {split}\.en: [\d,]+ lines longer than the parent's 64 positions: {what}$", out, re.M)
    # scored before and after, side by side in the report and at the end
    parent_scores = json.loads((work / "results" / "scores.parent.json").read_text())
    assert parent_scores["sentences"] == json.loads((work / "results" / "scores.test.json").read_text())["sentences"]
    report = (work / "results" / "report.md").read_text()
    assert "| the parent, before fine-tuning |" in report
    assert re.search(
        r"^- train\.en: [\d,]+ of [\d,]+ pieces \(\d\.\d\d%\) not in the parent's dictionary \(dict\.en\.txt\): <unk>$",
        report,
        re.M,
    )
    assert re.search(r"^the parent before fine-tuning: sacreBLEU \d+\.\d\d  chrF \d+\.\d\d$", out, re.M)
    # trained from the parent's weights: every tensor moved, by little (a fresh model would differ by its whole size)
    before, after = (
        parameters(work / "parent" / "checkpoint.pt"),
        parameters(work / "checkpoints" / "checkpoint_last.pt"),
    )
    assert before.keys() == after.keys()
    moved = {
        k: (after[k].float() - before[k].float()).abs().max().item() for k in before if before[k].is_floating_point()
    }
    assert max(moved.values()) < 0.01 and moved["decoder.output_bias"] > 0
    # at fine-tuning's rate (recipes/planner/finetuning.py): 3e-4 after a linear ramp of a tenth of the 30 updates, then
    # its inverse square root, from update 1 (optimizer and scheduler afresh)
    logged = [
        json.loads(line.split(" | train_inner | ")[1])
        for line in (work / "train.log").read_text().splitlines()
        if " | train_inner | " in line
    ]
    for record in logged:
        n = int(record["num_updates"])
        assert float(record["lr"]) == pytest.approx(3e-4 * (3 / n) ** 0.5, rel=1e-3), n
    assert re.search(
        r"^picked: the parent's model, [\d,]+ tokens x 30 updates \(.* epochs\), rate 0\.0003 after 3, "
        r"the dev-BLEU best$",
        out,
        re.M,
    )
    # the checkpoint of the best dev BLEU is what is scored and exported, and the report says so
    assert "--eval-bleu" in (work / "train.log").read_text() or "eval_bleu" in (work / "train.log").read_text()
    assert "| the checkpoint of the best dev BLEU |" in report
    # and the gain over the parent with its paired bootstrap interval, at the end and in the report
    assert re.search(
        r"^  fine-tuning gained sacreBLEU [+-]\d+\.\d\d, 95% interval [+-]\d+\.\d\d to [+-]\d+\.\d\d"
        r"(: not significant)? \(paired bootstrap, 1000 resamplings\)$",
        out,
        re.M,
    )
    assert "the checkpoint of the best dev BLEU, against the parent: sacreBLEU " in report
    # PARENT_TEST: the parent's own test set, before and after, side by side, with the change's interval
    assert (
        "| the parent on PARENT_TEST, before |" in report
        and "| the checkpoint of the best dev BLEU on PARENT_TEST |" in report
    )
    assert re.search(
        r"^the parent's test set \(PARENT_TEST\): sacreBLEU \d+\.\d\d before, \d+\.\d\d after fine-tuning "
        r"\([+-]\d+\.\d\d, 95% interval [+-]\d+\.\d\d to [+-]\d+\.\d\d(: not significant)?\)$",
        out,
        re.M,
    )
    before = json.loads((work / "results" / "scores.parent_test.before.json").read_text())
    assert before["sentences"] == 60
    # exported back to MarianMT, as the parent was: swish, output bias, decoding from <pad>
    config = json.loads((work / "hf" / "config.json").read_text())
    theirs = json.loads((parent[0] / "config.json").read_text())
    for key in ("activation_function", "d_model", "encoder_layers", "decoder_layers", "encoder_ffn_dim"):
        assert config[key] == theirs[key], key
    assert config["decoder_start_token_id"] == config["pad_token_id"]  # (its ids are the fairseq dictionary's order)


@pytest.mark.e2e
def test_a_rerun_skips_every_stage_and_another_parent_stops_before_training(fine_tuned, parent, corpus, tmp_path):
    work, _ = fine_tuned
    again = run_recipe(
        "finetune.sh",
        work,
        TRAIN=str(corpus),
        INIT=str(parent[0]),
        EXPORT="hf",
        PARENT_TEST=str(general(corpus)),
        **TOY,
    )
    assert again.returncode == 0 and again.stdout.count("done already with these settings: skipping") == 19, (
        again.stdout[-3000:]
    )
    other = tmp_path / "other"
    marian_directory(other, seed=4)  # the same shape and pieces, other weights
    changed = run_recipe(
        "finetune.sh",
        work,
        TRAIN=str(corpus),
        INIT=str(other),
        EXPORT="hf",
        PARENT_TEST=str(general(corpus)),
        **TOY,
    )
    assert changed.returncode == 3 and "stage 4 (training) was done" in changed.stderr, changed.stderr[-2000:]


@pytest.mark.e2e  # a fine-tuning run: 20 to 40 s
def test_a_directory_the_import_wrote_is_used_as_it_is(parent, corpus, cache, tmp_path):
    imported = parent[1]
    proc = run_recipe("finetune.sh", tmp_path / "w", "--dry-run", TRAIN=str(corpus), INIT=str(imported), **TOY)
    assert proc.returncode == 0, proc.stderr
    assert "==== stage 2p" not in proc.stdout and "==== stage 2a" not in proc.stdout
    assert f"--srcdict {imported}/dict.en.txt --tgtdict {imported}/dict.de.txt" in proc.stdout
    train = next(line for line in proc.stdout.splitlines() if line.startswith("+ env") and "fairseq-train" in line)
    assert f"--finetune-from-model {imported}/checkpoint.pt" in train
    for flag in (
        "--activation-fn swish",
        "--output-bias",
        "--decoder-start pad",
        "--share-all-embeddings",
        "--d-model 32",
    ):
        assert f" {flag} " in train, flag
    # the disk's estimate counts the checkpoints at the parent's vocabulary, which the plan sets (VOCAB_SIZE)
    assert re.search(r"^  stage 4: .* checkpoints: \d+ of .* \([\d,]+ parameters x 12 bytes\)", proc.stdout, re.M)
    assert os.listdir(tmp_path / "w") == ["plan.json"]


def test_a_time_is_turned_into_updates_of_the_parents_model(parent, corpus, tmp_path, monkeypatch):
    """TIME sized at the parent's speed (its model's figure known here: the module's other dry run probes it for real;
    beside other tests each probe is a busy machine's, three times over)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known_speed_figures(tmp_path / "cache", 8000, parents=[parent[0]])
    variables = {k: v for k, v in TOY.items() if k != "TOY_MAX_UPDATE"}
    proc = run_recipe(
        "finetune.sh", tmp_path / "w", "--dry-run", TRAIN=str(corpus), INIT=str(parent[0]), TIME="2m", **variables
    )
    assert proc.returncode == 0, proc.stderr
    picked = re.search(r"^picked: the parent's model, [\d,]+ tokens x ([\d,]+) updates", proc.stdout, re.M)
    updates = int(picked[1].replace(",", ""))
    said = re.search(r"^time: training about .* \(([\d,]+) updates of", proc.stdout, re.M)
    assert said and int(said[1].replace(",", "")) == updates and updates != 300  # not the toy's default
    # the whole run beside training: the parent scores the test set before fine-tuning, the child after it
    whole = re.search(r"^time: the whole run about .*\((.*) beside training\)$", proc.stdout, re.M)
    assert whole and "the test set translated" in whole[1] and "the parent scored first" in whole[1], proc.stdout
    train = next(line for line in proc.stdout.splitlines() if line.startswith("+ env") and "fairseq-train" in line)
    assert f"--max-update {updates} " in train and "--stop-time-hours " in train
    # the ramp is a tenth of the updates TIME gives, then the rate decays from fine-tuning's 3e-4
    assert f"--lr-scheduler inverse_sqrt --lr 0.0003 --warmup-updates {max(1, updates // 10)} " in train


def test_a_multilingual_parent_gets_its_token_for_tgt_before_every_source_sentence(corpus, tmp_path, monkeypatch):
    """A parent into "mul" with >>xx<< pieces: the plan finds >>deu<< for TGT=de and the source side's encoding puts
    it before every line (train, valid and test), the target side's not; the export's model card names it. (Its
    model's speed as known figures: the probe is timed for real above.)"""
    marian_directory(tmp_path / "hf", seed=3, language_tokens=(">>deu<<", ">>fra<<"), languages=("eng", "mul"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known_speed_figures(tmp_path / "cache", 8000, parents=[tmp_path / "hf"])
    proc = run_recipe(
        "finetune.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus),
        INIT=str(tmp_path / "hf"),
        EXPORT="hf",
        **TOY,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    export = next(line for line in proc.stdout.splitlines() if "serving.export_transformers" in line)
    assert export.endswith("--target-token '>>deu<<'")  # the model card says to put it before every sentence
    encodes = {
        side: next(
            line
            for line in proc.stdout.splitlines()
            if "sentencepiece_vocab encode" in line and f"/train.{side} " in line
        )
        for side in ("en", "de")
    }
    assert "--prefix '>>deu<<'" in encodes["en"] and "--prefix" not in encodes["de"]


def test_a_general_corpus_is_replayed_into_the_fine_tuning_at_its_ratio(parent, corpus, tmp_path, monkeypatch):
    """REPLAY: stage 1r mixes REPLAY_RATIO general pairs an in-domain pair into the training text, drawn by SEED and
    never a dev or test source, and the corpus's pieces are that text's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known_speed_figures(tmp_path / "cache", 8000, parents=[parent[0]])
    variables = dict(TRAIN=str(corpus), INIT=str(parent[0]), **TOY)
    plain = run_recipe("finetune.sh", tmp_path / "plain", "--dry-run", **variables)
    proc = run_recipe(
        "finetune.sh", tmp_path / "w", "--dry-run", REPLAY=str(general(corpus)), REPLAY_RATIO="0.5", **variables
    )
    assert proc.returncode == 0 and plain.returncode == 0, proc.stderr[-2000:]
    replay = next(line for line in proc.stdout.splitlines() if "preprocess.parallel_text replay" in line)
    assert f"--corpus {general(corpus)} " in replay and "--ratio 0.5 " in replay
    assert f"--held {tmp_path}/w/data/valid {tmp_path}/w/data/test " in replay
    encode = next(line for line in proc.stdout.splitlines() if "sentencepiece_vocab encode" in line and ".en " in line)
    assert f"--inputs {tmp_path}/w/data/replayed/train.en {tmp_path}/w/data/valid.en" in encode
    assert "preprocess.parallel_text replay" not in plain.stdout


def distillation_dry_run(parent, corpus, tmp_path, monkeypatch, **variables):
    """The toy recipe's dry run with INIT and REPLAY=parent and ``variables``: its stages and its lines."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known_speed_figures(tmp_path / "cache", 8000, parents=[parent[0]])
    proc = run_recipe(
        "finetune.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus),
        INIT=str(parent[0]),
        REPLAY="parent",
        **variables,
        **TOY,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return re.findall(r"^==== stage (\S+):", proc.stdout, flags=re.M), proc.stdout.splitlines()


def test_the_parents_own_translations_are_replayed_without_a_general_corpus(parent, corpus, tmp_path, monkeypatch):
    """REPLAY=parent (distillation): stage 1d draws REPLAY_RATIO of the training sources, 2d-2e the parent translates
    them in its pieces with the paper's beam search, 2f puts them beside the in-domain pairs, and the corpus's pieces
    are that text's; the epochs count them."""
    stages, commands = distillation_dry_run(parent, corpus, tmp_path, monkeypatch, REPLAY_RATIO="0.5")
    assert stages[:8] == ["1", "1d", "2p", "2d", "2e", "2f", "2b-en", "2b-de"], stages
    data = f"{tmp_path}/w/data"
    draw = next(line for line in commands if "preprocess.parallel_text distill-sources" in line)
    assert f"--train {data}/train --src en --ratio 0.5 --seed 1 --out {data}/distilled/sources.en" in draw
    translate = next(line for line in commands if "fairseq-interactive " in line and "--input" in line)
    assert f"--input {data}/distilled/sources.sp.en" in translate and "--beam 4" in translate
    assert f"--path {tmp_path}/w/parent/checkpoint.pt" in translate
    mix = next(line for line in commands if "preprocess.parallel_text distilled" in line)
    assert f"--translations {data}/distilled/parent.out --out {data}/distilled/train" in mix
    encode = next(line for line in commands if "sentencepiece_vocab encode" in line and "/train.en " in line)
    assert f"--inputs {data}/distilled/train.en {data}/valid.en" in encode


def test_the_parent_translates_text_of_its_own_domains_given_as_replay_sources(parent, corpus, tmp_path, monkeypatch):
    """REPLAY=parent with REPLAY_SOURCES: stage 1d draws REPLAY_RATIO lines an in-domain pair from that text (more
    than the training sources at a ratio above 1), none a dev or test source; the stages after it are distillation's.
    """
    general = tmp_path / "general"
    (tmp_path / "general.en").write_text("".join(f"a general sentence {i}\n" for i in range(3000)))
    stages, commands = distillation_dry_run(
        parent, corpus, tmp_path, monkeypatch, REPLAY_RATIO="2", REPLAY_SOURCES=str(general)
    )
    assert stages[:6] == ["1", "1d", "2p", "2d", "2e", "2f"], stages
    data = f"{tmp_path}/w/data"
    draw = next(line for line in commands if "preprocess.parallel_text distill-sources" in line)
    assert (
        f"--ratio 2 --seed 1 --out {data}/distilled/sources.en --pool {general} --held {data}/valid {data}/test" in draw
    )


@pytest.mark.e2e
def test_a_fine_tuning_distilled_from_its_parent_trains_on_the_parents_translations(parent, corpus, cache, tmp_path):
    """REPLAY=parent for real: fairseq-interactive translates the drawn sources with the parent (those longer than its
    64 positions skipped and counted), and the training text is the in-domain pairs and those translations."""
    work = tmp_path / "w"
    proc = run_recipe(
        "finetune.sh", work, TRAIN=str(corpus), INIT=str(parent[1]), REPLAY="parent", REPLAY_RATIO="0.5", **TOY
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stages = re.findall(r"^==== stage (\S+):", proc.stdout, flags=re.M)
    assert stages[:6] == ["1", "1d", "2d", "2e", "2f", "2b-en"], stages  # the import's directory: no 2p
    data = work / "data"
    in_domain = (data / "train.en").read_text().splitlines()
    drawn = (data / "distilled" / "sources.en").read_text().splitlines()
    assert len(drawn) == round(len(in_domain) / 2)
    said = re.search(
        r"^[\d,]+ in-domain pairs and ([\d,]+) of the parent's translations \((\d+) untranslated(?:, (\d+) empty)?",
        proc.stdout,
        re.M,
    )
    assert said, proc.stdout[-3000:]
    distilled, untranslated, empty = (int((n or "0").replace(",", "")) for n in said.groups())
    assert untranslated > 0 and distilled + untranslated + empty == len(drawn)  # a tenth of the lines are too long
    assert len(re.findall(r"^D-\d+\t", (data / "distilled" / "parent.out").read_text(), re.M)) == distilled + empty
    sources = (data / "distilled" / "train.en").read_text().splitlines()
    targets = (data / "distilled" / "train.de").read_text().splitlines()
    assert sources[: len(in_domain)] == in_domain and len(sources) == len(targets) == len(in_domain) + distilled
    assert set(sources[len(in_domain) :]) <= set(drawn) and all(t.strip() for t in targets[len(in_domain) :])


REFUSED = {  # every other refusal of a parent: tests/unit/recipes/test_parent.py
    "a parent of another pair": (
        lambda p, t: p[0],
        {"SRC": "de", "TGT": "en"},
        "INIT: {dir}/tokenizer_config.json: the parent translates en-de, not de-en (SRC, TGT)",
    ),
    "a model setting": (
        lambda p, t: p[0],
        {"ARCH": "vaswani_big"},
        "INIT={dir} and ARCH=vaswani_big: the model and its vocabulary are the parent's",
    ),
    "an export that cannot hold it": (
        lambda p, t: p[0],
        {"EXPORT": "ct2"},
        "EXPORT=ct2 and INIT={dir}: the parent decodes from <pad> (MarianMT's start)",
    ),
    "a parent's test set that is not there": (
        lambda p, t: p[0],
        {"PARENT_TEST": "/nonexistent/general"},
        "PARENT_TEST: /nonexistent/general.en: no such file (PREFIX.SRC and PREFIX.TGT, a line a sentence)",
    ),
    "a replayed corpus that is not there": (
        lambda p, t: p[0],
        {"REPLAY": "/nonexistent/general"},
        "REPLAY: /nonexistent/general.en: no such file (PREFIX.SRC and PREFIX.TGT; or REPLAY=parent, the parent's own "
        "translations)",
    ),
    "more of the parent's translations than there are sources": (
        lambda p, t: p[0],
        {"REPLAY": "parent", "REPLAY_RATIO": "2"},
        "REPLAY_RATIO=2 with REPLAY=parent: the parent translates the training sources, each at most once (at most 1); "
        "give it text of its own to translate (REPLAY_SOURCES=PREFIX)",
    ),
    "text for the parent to translate without distillation": (
        lambda p, t: p[0],
        {"REPLAY_SOURCES": "/nonexistent/general"},
        "REPLAY_SOURCES=/nonexistent/general: the source text the parent translates, for REPLAY=parent (distillation)",
    ),
    "text for the parent to translate that is not there": (
        lambda p, t: p[0],
        {"REPLAY": "parent", "REPLAY_SOURCES": "/nonexistent/general"},
        "REPLAY_SOURCES: /nonexistent/general.en: no such file (PREFIX.SRC: source text, one sentence a line)",
    ),
    "too few pairs once dev and test are held out": (
        lambda p, t: p[0],
        {"FINETUNE_MIN_PAIRS": "1200"},
        "TRAIN has 1500 lines, less the 400 held out for dev and test (give VALID and TEST to hold none): under 1200 "
        "to fine-tune on (FINETUNE_MIN_PAIRS=1200)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_does_not_fit_is_refused_before_any_work_naming_the_file(case, parent, corpus, tmp_path):
    make, variables, message = REFUSED[case]
    init = make(parent, tmp_path)
    proc = run_recipe("finetune.sh", tmp_path / "w", TRAIN=str(corpus), INIT=str(init), **{**TOY, **variables})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert message.format(dir=init) in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "w" / "data").exists()
