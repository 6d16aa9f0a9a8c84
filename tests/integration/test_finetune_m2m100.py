"""recipes/finetune.sh with an NLLB-200 or M2M100 parent (INIT=): tiny models built with transformers in their shapes
(helpers.m2m100_directory), imported by the recipe, their codes leading each source and target sentence, the target's
forced in fairseq-generate and left out of the scores, exported back as M2M100ForConditionalGeneration."""

import json
import random
import re

import pytest
import torch
from helpers import BIN, PLUGIN, commands, corpus as write_corpus, m2m100_directory, run_recipe

from transformer_plugin_cli.fairseq_output import sentence_lines

TOY = dict(
    TOY="1",
    TOY_MAX_UPDATE="30",
    TOY_SAVE_INTERVAL_UPDATES="10",
    TOY_AVERAGE_LAST="2",
    LANGID="0",
    OMP_NUM_THREADS="1",
    SRC="en",
    TGT="de",
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """800 pairs of the words the parents' sentencepiece model was trained on, the target the source reversed."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 4))) for _ in range(300)]
    lines = [[rng.choice(words) for _ in range(rng.randint(3, 9))] for _ in range(800)]
    write_corpus(root, [(" ".join(w), " ".join(w[::-1])) for w in lines])
    return root / "train"


@pytest.fixture(scope="module", params=["nllb", "m2m100"])
def parent(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    m2m100_directory(root / "hf", request.param)
    return request.param, root / "hf"


def test_the_dry_run_maps_the_pair_to_the_parents_codes_and_forces_the_targets(parent, corpus, tmp_path):
    family, init = parent
    proc = run_recipe("finetune.sh", tmp_path / "w", "--dry-run", TRAIN=str(corpus), INIT=str(init), EXPORT="hf", **TOY)
    assert proc.returncode == 0, proc.stderr
    src, tgt = ("eng_Latn", "deu_Latn") if family == "nllb" else ("__en__", "__de__")
    assert f"import the parent {init} (vaswani-import-m2m100: {src} -> {tgt})" in proc.stdout
    python = [" ".join(c) + " " for c in commands(proc.stdout, "python")]
    encode = [c for c in python if "sentencepiece_vocab encode" in c]
    assert any(f"--prefix {src} " in c and "/train.en " in c for c in encode)
    assert any(f"--prefix {tgt} " in c and "/train.de " in c for c in encode)
    generate = [" ".join(c) + " " for c in commands(proc.stdout, "fairseq-generate")]
    assert generate and all("--prefix-size 1 " in c for c in generate)
    scores = [c for c in python if "tools.evaluate" in c]
    assert scores and all(f"--strip-prefix {tgt} " in c for c in scores)
    assert f"--m2m100-tokenizer {tmp_path}/w/parent/tokenizer" in proc.stdout
    assert re.search(r"^time: the whole run about .*the parent scored first", proc.stdout, re.M)


WITHOUT_GERMAN = ("eng_Latn", "fra_Latn", "zho_Hans")
TWO_GERMANS = ("eng_Latn", "deu_Latn", "deu_Latf")


@pytest.mark.parametrize(
    "codes, variables, message",
    [
        (WITHOUT_GERMAN, {}, r"/nllb: no language code for 'de' among its 3 \(eng_Latn, fra_Latn, zho_Hans\)"),
        (TWO_GERMANS, {}, r"/nllb: several codes for 'de' \(deu_Latn, deu_Latf\): name one with"),
        (None, {"REPLAY": "parent"}, r"REPLAY=parent and INIT=.*: an NLLB or M2M100 parent translates with its"),
        (None, {"EXPORT": "ct2"}, r"EXPORT=ct2 and INIT=.*: .* EXPORT=hf, then ct2-transformers-converter"),
    ],
)
def test_what_does_not_fit_the_nllb_parent_is_refused_before_any_work(codes, variables, message, corpus, tmp_path):
    m2m100_directory(tmp_path / "nllb", "nllb", codes=codes)
    proc = run_recipe(
        "finetune.sh",
        tmp_path / "w",
        "--dry-run",
        TRAIN=str(corpus),
        INIT=str(tmp_path / "nllb"),
        **{**TOY, **variables},
    )
    assert proc.returncode != 0 and re.search(message, proc.stderr), proc.stderr[-2000:]
    assert not (tmp_path / "w" / "parent").exists()


@pytest.fixture(scope="module")
def fine_tuned(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("nllb-run")
    m2m100_directory(root / "nllb", "nllb", seed=2)
    proc = run_recipe("finetune.sh", root / "w", TRAIN=str(corpus), INIT=str(root / "nllb"), EXPORT="hf", **TOY)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root, proc.stdout


@pytest.mark.e2e
def test_an_nllb_parent_is_fine_tuned_scored_before_and_after_and_exported_back(fine_tuned):
    root, out = fine_tuned
    work = root / "w"
    for name in ("scores.parent.json", "scores.test.json"):
        assert "sacrebleu" in json.loads((work / "results" / name).read_text())
    generated = (work / "results" / "generate.test.out").read_text()
    targets, detokenized = (sentence_lines(generated, kind) for kind in ("T", "D"))
    assert all(t[0].startswith("deu_Latn ") for t in targets.values())  # the code leads every reference
    hypotheses = (work / "results" / "hypotheses.test.txt").read_text().splitlines()
    assert len(hypotheses) == len(detokenized) == 200
    for i, fields in detokenized.items():  # forced first, and left out of what is scored
        assert fields[1].startswith("deu_Latn") and hypotheses[i] == fields[1][len("deu_Latn") :].lstrip()
    assert "M2M100 model:" in out and "fine-tuning gained sacreBLEU" in out


@pytest.mark.e2e
def test_the_export_translates_as_fairseq_generate_does(fine_tuned):
    """The child, exported back: transformers' greedy translations with the target's code forced are fairseq-generate's
    at beam 1 with --prefix-size 1, on the test set's first sentences, from the tokenizer's own ids."""
    import subprocess

    from transformers import AutoTokenizer, M2M100ForConditionalGeneration

    root, _ = fine_tuned
    work = root / "w"
    model = M2M100ForConditionalGeneration.from_pretrained(str(work / "hf")).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(work / "hf"))
    proc = subprocess.run(
        [
            f"{BIN}/fairseq-generate",
            str(work / "data-bin"),
            "--user-dir",
            PLUGIN,
            "--path",
            str(work / "checkpoints" / "checkpoint_best.pt"),
            "--gen-subset",
            "test",
            "--beam",
            "1",
            "--prefix-size",
            "1",
            "--max-len-a",
            "0",
            "--max-len-b",
            "12",
            "--batch-size",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    fairseq = {
        i: [tokenizer.convert_tokens_to_ids(t) for t in f[1].split()]
        for i, f in sentence_lines(proc.stdout, "H").items()
    }
    tgt = tokenizer.convert_tokens_to_ids("deu_Latn")
    test = (work / "data" / "test.en").read_text().splitlines()
    for i in range(5):
        batch = tokenizer(test[i], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**batch, num_beams=1, max_new_tokens=12)[0].tolist()
        hf = out[1:]  # after </s>, the decoder's start: the code, the pieces
        ours = fairseq[i]
        n = min(len(hf), len(ours))
        assert hf[0] == ours[0] == tgt and hf[:n] == ours[:n], (i, hf, ours)


def test_a_cpu_time_that_gives_less_than_an_epoch_is_refused(tmp_path, monkeypatch):
    """A parent as slow on these CPU workers as NLLB's 600M would be (18 s an update of 4,096 tokens, known here):
    TIME=10m fits about 140 updates of a 20,000-pair corpus whose epoch is over 300: refused, saying what an epoch
    takes and that a GPU is the way; TIME=2h is planned."""
    from helpers import known_speed_figures

    m2m100_directory(tmp_path / "nllb", "nllb")
    rng = random.Random(2)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 4))) for _ in range(300)]
    lines = [[rng.choice(words) for _ in range(6)] for _ in range(20_000)]
    (tmp_path / "c").mkdir()
    train = write_corpus(tmp_path / "c", [(" ".join(w), " ".join(w[::-1])) for w in lines])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known_speed_figures(tmp_path / "cache", 8000, parents=[tmp_path / "nllb"], parent_seconds=18.0)
    variables = dict(TRAIN=train, INIT=str(tmp_path / "nllb"), SRC="en", TGT="de", GPUS="0", LANGID="0")
    proc = run_recipe("finetune.sh", tmp_path / "w", "--dry-run", TIME="10m", **variables)
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert re.search(
        r"TIME=10m: [\d,]+ updates of \d+\.\d s fit on these CPU workers, less than one epoch of the corpus \([\d,]+ "
        r"updates of [\d,]+ tokens, about .* here\): .* A GPU \(GPUS=1\), or a longer TIME",
        proc.stderr,
    ), proc.stderr
    assert run_recipe("finetune.sh", tmp_path / "w2", "--dry-run", TIME="2h", **variables).returncode == 0


def test_a_gpu_speed_file_holding_the_parents_figures_plans_its_time(tmp_path):
    """vaswani-speed-probe file --parent: the parent's model timed at its own vocabulary beside the candidates; a dry
    run anywhere plans INIT='s TIME on the GPUs from it (bf16), and a speed file without it says to write it again."""
    import json as json_

    from helpers import speed_file

    m2m100_directory(tmp_path / "nllb", "nllb")
    rng = random.Random(3)
    (tmp_path / "c").mkdir()
    train = write_corpus(
        tmp_path / "c", [(f"{rng.choice('abc')} {rng.choice('defgh')}", f"{rng.choice('ab')} x") for _ in range(3000)]
    )
    data = speed_file(tmp_path / "speeds.json", parents=[tmp_path / "nllb"])
    parent = data["models"][-1]
    assert parent["vocab_size"] == 48 and "--normalize-before --sinusoid-variant fairseq" in parent["model_flags"]
    variables = dict(TRAIN=train, INIT=str(tmp_path / "nllb"), SRC="en", TGT="de", GPUS="1", PRECISION="bf16")
    proc = run_recipe(
        "finetune.sh", tmp_path / "w", "--dry-run", TIME="30m", SPEED_FILE=str(tmp_path / "speeds.json"), **variables
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^time: training about .* on the speed file's machines \([\d,]+ updates of", proc.stdout, re.M)
    (tmp_path / "bare.json").write_text(json_.dumps({**data, "models": data["models"][:-1]}))
    bare = run_recipe(
        "finetune.sh", tmp_path / "w2", "--dry-run", TIME="30m", SPEED_FILE=str(tmp_path / "bare.json"), **variables
    )
    assert bare.returncode != 0 and "has no figures of vaswani_base --encoder-layers 2" in bare.stderr
    assert "and INIT='s parent with --parent DIR" in bare.stderr
