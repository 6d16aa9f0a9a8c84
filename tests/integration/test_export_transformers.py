"""``vaswani-export-hf``: trained models exported to Hugging Face Transformers (MarianMT) compute and
translate as fairseq does.

Three models: ``served`` (conftest.py: a joint sentencepiece model, a joined dictionary,
--share-all-embeddings), and two on the demo's synthetic language pair with a sentencepiece model and
a dictionary per side, one with --share-decoder-input-output-embed (300 updates) and one with no
sharing at all (2 updates: for the weights' layout only). For each: the directory loads with no
missing or unexpected weights, the tokenizer gives fairseq's ids, every reference token gets fairseq's
log-probability within 1e-4, and ``generate()`` gives fairseq-generate's hypotheses. What MarianMT
cannot hold is refused before anything is written.
"""

import argparse
import json
import logging
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch

from helpers import BIN, PLUGIN, TRAIN_FLAGS, run_in_process
from preprocess.sentencepiece_vocab import encode, train
from preprocess.synthetic_pair import generate as synthetic_pair
from transformer_plugin_cli.fairseq_output import sentence_lines
from transformer_plugin_cli.paper import decoding_flags
from transformer_plugin_cli.serving import export_transformers

transformers = pytest.importorskip("transformers")

Model = argparse.Namespace  # root, bin, checkpoint, source spm, target spm, exported directory


def export(model, out, *extra):
    return export_transformers.main(
        [
            "--model-path",
            str(model.checkpoint),
            "--data-dir",
            str(model.bin),
            "--spm",
            str(model.spm),
            "--target-spm",
            str(model.target_spm),
            "--output-dir",
            str(out),
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def shared(served):
    root, spm, _ = served
    model = Model(
        root=root,
        bin=root / "bin",
        checkpoint=root / "ckpt" / "checkpoint_last.pt",
        spm=spm,
        target_spm=spm,
        hf=root / "hf",
    )
    assert export(model, model.hf) == 0
    return model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The synthetic pair with a sentencepiece model and a dictionary per side."""
    root = tmp_path_factory.mktemp("hf-pair")
    synthetic_pair(str(root), 1500, 20, 64, seed=3)
    splits = {side: [str(root / f"{s}.{side}") for s in ("train", "valid", "test")] for side in ("src", "tgt")}
    for side, paths in splits.items():
        spm = train([paths[0]], str(root / f"spm.{side}"), 200)
        encode(spm, paths, [p.replace(f"{root}/", f"{root}/sp.") for p in paths])
    run_in_process(
        "fairseq-preprocess",
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        "--trainpref",
        str(root / "sp.train"),
        "--validpref",
        str(root / "sp.valid"),
        "--testpref",
        str(root / "sp.test"),
        "--destdir",
        str(root / "bin"),
        "--workers",
        "1",
    )
    return root


def _train_on_pair(root, name, updates, *flags):
    separate = [f for f in TRAIN_FLAGS if f != "--share-all-embeddings"]
    run_in_process(
        "fairseq-train",
        str(root / "bin"),
        "--user-dir",
        PLUGIN,
        *separate,
        *flags,
        "--max-update",
        str(updates),
        "--warmup-updates",
        "100",
        "--lr-multiplier",
        "0.5",
        "--dropout",
        "0",
        "--save-dir",
        str(root / name),
        "--no-epoch-checkpoints",
        "--disable-validation",
    )
    model = Model(
        root=root,
        bin=root / "bin",
        checkpoint=root / name / "checkpoint_last.pt",
        spm=root / "spm.src.model",
        target_spm=root / "spm.tgt.model",
        hf=root / f"hf-{name}",
    )
    assert export(model, model.hf) == 0
    return model


@pytest.fixture(scope="module")
def tied(pair):
    return _train_on_pair(pair, "tied", 300, "--share-decoder-input-output-embed")


@pytest.fixture(scope="module")
def untied(pair):
    return _train_on_pair(pair, "untied", 2)


@pytest.fixture(params=["shared", "tied", "untied"])
def exported(request):
    return request.getfixturevalue(request.param)


def fairseq_model(model):
    from fairseq import checkpoint_utils

    (fs,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(model.checkpoint)], arg_overrides={"data": str(model.bin)}
    )
    return fs.eval(), task


def test_the_directory_loads_with_no_missing_or_unexpected_weights(exported, caplog):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, MarianMTModel, MarianTokenizer

    with caplog.at_level(logging.WARNING):
        marian, info = MarianMTModel.from_pretrained(exported.hf, output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set() and info["mismatched_keys"] == set()
    assert not [r for r in caplog.records if "weight" in r.getMessage()], [r.getMessage() for r in caplog.records]
    assert isinstance(AutoModelForSeq2SeqLM.from_pretrained(exported.hf), MarianMTModel)
    assert isinstance(AutoTokenizer.from_pretrained(exported.hf), MarianTokenizer)
    shared = exported.spm == exported.target_spm
    assert marian.config.share_encoder_decoder_embeddings is shared
    tied = marian.get_output_embeddings().weight is marian.get_decoder().embed_tokens.weight
    assert tied is (exported.checkpoint.parent.name != "untied")
    files = set(os.listdir(exported.hf))
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "source.spm",
        "target.spm",
        "vocab.json",
        "tokenizer_config.json",
        "README.md",
    } <= files
    assert ("target_vocab.json" in files) is not shared
    generation = json.loads((exported.hf / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["length_penalty"], generation["decoder_start_token_id"]) == (4, 0.6, 2)
    # fairseq's beam search never emits <pad>, nor </s> first (--min-len 1): the trained models here never
    # try either, so the settings themselves are checked
    assert generation["bad_words_ids"] == [[1]] and generation["min_new_tokens"] == 1 and generation["early_stopping"]
    # the default bound: fairseq's (input + 50, then </s>) for the longest source binarized in the data dir
    from fairseq.data import data_utils

    splits = [
        data_utils.load_indexed_dataset(str(exported.bin / f"{s}.src-tgt.src"), None)
        for s in ("train", "valid", "test")
    ]
    longest = max(int(split.sizes.max()) for split in splits)
    assert generation["max_new_tokens"] == longest + 51 and "max_length" not in generation


def test_the_tokenizer_gives_fairseqs_ids(exported):
    """Raw text in, the ids fairseq-preprocess gave the same text's pieces (and </s> after the source)."""
    from fairseq.data import Dictionary
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(exported.hf)
    for side in ("src", "tgt"):
        dictionary = Dictionary.load(str(exported.bin / f"dict.{side}.txt"))
        assert [tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id] == [1, 2, 3]
        raw = (exported.root / f"test.{side}").read_text().splitlines()
        pieces = (exported.root / f"sp.test.{side}").read_text().splitlines()
        expected = [dictionary.encode_line(p, add_if_not_exist=False).tolist() for p in pieces]
        ids = tokenizer(raw)["input_ids"] if side == "src" else tokenizer(text_target=raw)["input_ids"]
        assert ids == expected


def reference_log_probs(model, marian):
    """Every reference token's log-probability on the test split, from fairseq's model (one sentence at
    a time) and from the exported one (in padded batches): two lists of tensors."""
    fs, task = fairseq_model(model)
    task.load_dataset("test")
    dataset = task.dataset("test")
    ours, theirs = [], []
    samples = [dataset[i] for i in range(len(dataset))]
    eos = task.target_dictionary.eos()
    with torch.no_grad():
        for s in samples:
            prev = torch.cat([torch.tensor([eos]), s["target"][:-1]]).unsqueeze(0)
            lprobs = fs.get_normalized_probs(
                fs(s["source"].unsqueeze(0), torch.tensor([len(s["source"])]), prev), log_probs=True
            )[0]
            ours.append(lprobs.gather(-1, s["target"].unsqueeze(-1)).squeeze(-1))
        for i in range(0, len(samples), 16):
            batch = samples[i : i + 16]
            pad = task.target_dictionary.pad()
            source = torch.nn.utils.rnn.pad_sequence([s["source"] for s in batch], batch_first=True, padding_value=pad)
            target = torch.nn.utils.rnn.pad_sequence([s["target"] for s in batch], batch_first=True, padding_value=pad)
            prev = torch.cat([torch.full((len(batch), 1), eos), target[:, :-1]], dim=1)
            logits = marian(input_ids=source, attention_mask=source.ne(pad), decoder_input_ids=prev).logits
            lprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
            theirs += [lprobs[j, : len(s["target"])] for j, s in enumerate(batch)]
    return ours, theirs


def test_every_reference_token_gets_fairseqs_log_probability(exported):
    from transformers import MarianMTModel

    ours, theirs = reference_log_probs(exported, MarianMTModel.from_pretrained(exported.hf).eval())
    assert len(ours) == 64
    worst = max(float((a - b).abs().max()) for a, b in zip(ours, theirs))
    assert worst <= 1e-4


@pytest.mark.parametrize("name", ["shared", "tied"])  # not the untied model: after 2 updates its beams run to the limit
def test_generate_gives_fairseq_generates_hypotheses(name, request):
    """Beam 4, lenpen 0.6 from the exported generation config, against fairseq-generate with the paper's
    flags, on every test sentence that neither cuts at its length limit: the same hypotheses and scores."""
    from fairseq.data import Dictionary
    from transformers import MarianMTModel, MarianTokenizer

    exported = request.getfixturevalue(name)
    out = run_in_process(
        "fairseq-generate",
        str(exported.bin),
        "--user-dir",
        PLUGIN,
        "--path",
        str(exported.checkpoint),
        "--gen-subset",
        "test",
        *decoding_flags(),
        "--batch-size",
        "32",
    )
    fairseq_hyps = {i: fields[1].split() for i, fields in sentence_lines(out, "H").items()}
    fairseq_scores = {
        i: float(fields[0]) * math.log(2) for i, fields in sentence_lines(out, "H").items()
    }  # printed in bits
    sources = {i: fields[0].split() for i, fields in sentence_lines(out, "S").items()}
    marian = MarianMTModel.from_pretrained(exported.hf).eval()
    tokenizer = MarianTokenizer.from_pretrained(exported.hf)
    target = Dictionary.load(str(exported.bin / "dict.tgt.txt"))
    lines = (exported.root / "test.src").read_text().splitlines()
    ours, scores = [], []
    bounds = []  # each sentence's max_new_tokens: its batch's input + 51, as the README passes it
    with torch.no_grad():
        for i in range(0, len(lines), 64):
            batch = tokenizer(lines[i : i + 64], return_tensors="pt", padding=True)
            generated = marian.generate(
                **batch,
                max_new_tokens=batch["input_ids"].shape[1] + 51,
                return_dict_in_generate=True,
                output_scores=True,
            )
            ours += [
                [target[t] for t in row[1:].tolist() if t not in (target.eos(), target.pad())]
                for row in generated.sequences
            ]
            scores += generated.sequences_scores.tolist()
            bounds += [batch["input_ids"].shape[1] + 51] * len(generated.sequences)
    # the sentences that neither cut at its bound (fairseq's batches are others, and so are their bounds)
    uncut = [
        i for i in range(len(lines)) if len(fairseq_hyps[i]) < len(sources[i]) + 1 + 50 and len(ours[i]) < bounds[i] - 1
    ]
    assert len(uncut) >= 0.9 * len(lines)
    same = [i for i in uncut if ours[i] == fairseq_hyps[i]]
    assert len(same) >= 0.99 * len(uncut), [(fairseq_hyps[i], ours[i]) for i in uncut if ours[i] != fairseq_hyps[i]][:3]
    # the same score: the sum of the log-probabilities over length^0.6, the length counting </s>, as fairseq's
    assert max(abs(scores[i] - fairseq_scores[i]) for i in same) < 1e-4


@pytest.fixture(scope="module")
def interactive(shared):
    """(test lines, fairseq-interactive --bpe sentencepiece's translations of them)."""
    lines = (shared.root / "test.src").read_text().splitlines()
    out = run_in_process(
        "fairseq-interactive",
        str(shared.bin),
        "--user-dir",
        PLUGIN,
        "--path",
        str(shared.checkpoint),
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        "--bpe",
        "sentencepiece",
        "--sentencepiece-model",
        str(shared.spm),
        *decoding_flags(),
        "--buffer-size",
        "64",
        "--batch-size",
        "64",
        stdin="".join(line + "\n" for line in lines),
    )
    return lines, [fields[1] for _, fields in sorted(sentence_lines(out, "D").items())]


def test_raw_text_translates_as_fairseq_interactive(shared, interactive):
    """docs/serving.md's three lines (tokenizer, generate, batch_decode) on raw text against
    fairseq-interactive --bpe sentencepiece on the same lines."""
    from transformers import MarianMTModel, MarianTokenizer

    lines, interactive = interactive
    tokenizer = MarianTokenizer.from_pretrained(shared.hf)
    model = MarianMTModel.from_pretrained(shared.hf)
    batch = tokenizer(lines, return_tensors="pt", padding=True)
    output = model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + 51)
    translated = tokenizer.batch_decode(output, skip_special_tokens=True)
    assert translated == interactive
    assert sum(t == line for t, line in zip(translated, lines)) >= len(lines) // 2  # it learned to copy


def test_the_console_script_and_the_model_card(shared, tmp_path):
    (tmp_path / "scores.json").write_text(
        json.dumps(
            {
                "sentences": 64,
                "sacrebleu": 71.25,
                "chrf": 80.5,
                "sacrebleu_signature": "nrefs:1|case:mixed|tok:13a",
                "chrf_signature": "nrefs:1|nc:6",
            }
        )
    )
    result = subprocess.run(
        [
            os.path.join(BIN, "vaswani-export-hf"),
            "--model-path",
            str(shared.checkpoint),
            "--data-dir",
            str(shared.bin),
            "--spm",
            str(shared.spm),
            "--output-dir",
            str(tmp_path / "m"),
            "--scores",
            f"copy test={tmp_path / 'scores.json'}",
            "--dataset",
            "a copying task",
            "--beam",
            "5",
            "--lenpen",
            "1.0",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "log-probabilities within" in result.stdout
    card = (tmp_path / "m" / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\npipeline_tag: translation\n")
    assert "| 2 / 2 | 64 | 256 | 4 | 16 | " in card  # N, d_model, d_ff, h, d_k of vaswani_tiny
    assert "| copy test | 71.25 | 80.5 |" in card and "`nrefs:1|case:mixed|tok:13a`" in card
    assert "updates: 300;" in card and "a copying task" in card and "`vaswani_label_smoothed_cross_entropy`" in card
    assert f"MarianMTModel.from_pretrained({str(tmp_path / 'm')!r})" in card and "(beam 5, length penalty 1.0)" in card
    assert 'model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + 51)' in card
    generation = json.loads((tmp_path / "m" / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["length_penalty"]) == (5, 1.0)


@pytest.mark.parametrize(
    "setting, value, flag",
    [
        ("normalize_before", True, "--normalize-before"),
        ("positional_encoding", "learned", "--positional-encoding learned"),
        ("sinusoid_variant", "fairseq", "--sinusoid-variant fairseq"),
        ("d_k", 8, "--d-k 8 with --attention-heads 4 and --d-model 64: MarianMT needs d_k = d_model / h = 16"),
        ("_name", "transformer", "is a transformer checkpoint, not vaswani_transformer"),
    ],
)
def test_what_marian_cannot_hold_is_refused_before_anything_is_written(shared, tmp_path, capsys, setting, value, flag):
    state = torch.load(shared.checkpoint, weights_only=False)
    state["cfg"]["model"][setting] = value
    torch.save(state, tmp_path / "model.pt")
    model = Model(**{**vars(shared), "checkpoint": tmp_path / "model.pt"})
    assert export(model, tmp_path / "out") == 1
    assert flag in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "out.partial")


def test_wrong_inputs_are_named_and_nothing_is_replaced_unasked(shared, tied, tmp_path, capsys):
    wrong_spm = Model(**{**vars(shared), "spm": tied.target_spm, "target_spm": tied.target_spm})
    assert export(wrong_spm, tmp_path / "out") == 1
    assert f"are not pieces of {tied.target_spm}" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    assert export(shared, tmp_path / "out") == 1
    assert "exists and is not empty (--force replaces it)" in capsys.readouterr().err
    assert os.listdir(tmp_path / "out") == ["notes.txt"]
    assert export(shared, tmp_path / "out", "--force") == 0
    assert (tmp_path / "out" / "model.safetensors").exists() and not (tmp_path / "out" / "notes.txt").exists()


def test_the_permutation_is_what_makes_the_export_exact(shared, tmp_path, monkeypatch):
    """Without it (Marian's sinusoids then meet the paper's layout of the weights) the exporter's own
    check refuses the export; forced through, the log-probabilities are far from fairseq's."""
    from transformers import MarianMTModel

    monkeypatch.setattr(export_transformers, "paper_to_marian", lambda d_model: torch.arange(d_model))
    with pytest.raises(export_transformers.ExportError, match="sinusoid table is not the paper.s in sine-then-cosine"):
        export_transformers.export(str(shared.checkpoint), str(shared.bin), str(shared.spm), str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out")
    monkeypatch.setattr(export_transformers, "check_equivalent", lambda *args: 0.0)
    export_transformers.export(str(shared.checkpoint), str(shared.bin), str(shared.spm), str(tmp_path / "out"))
    ours, theirs = reference_log_probs(shared, MarianMTModel.from_pretrained(tmp_path / "out").eval())
    assert max(float((a - b).abs().max()) for a, b in zip(ours, theirs)) > 1e-2
    shutil.rmtree(tmp_path / "out")


def test_the_exporters_own_check_catches_a_weight_out_of_place(shared, tmp_path, monkeypatch):
    """One bias not renamed with the residual stream (the first encoder layer's W_2): refused."""
    mapped = export_transformers.marian_state_dict

    def one_bias_unpermuted(model, perm):
        state = mapped(model, perm)
        state["model.encoder.layers.0.fc2.bias"] = model.encoder.layers[0].ffn.w_2.bias.detach()
        return state

    monkeypatch.setattr(export_transformers, "marian_state_dict", one_bias_unpermuted)
    with pytest.raises(export_transformers.ExportError, match="log-probabilities differ from the checkpoint's by"):
        export_transformers.export(str(shared.checkpoint), str(shared.bin), str(shared.spm), str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "out.partial")


def test_without_binarized_data_the_default_bound_is_asked_for(shared, tmp_path, capsys):
    """Only the dictionaries: no longest source to take generate()'s default bound from."""
    dictionaries = tmp_path / "dicts"
    dictionaries.mkdir()
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(shared.bin / name, dictionaries / name)
    model = Model(**{**vars(shared), "bin": dictionaries})
    languages = ("--source-lang", "src", "--target-lang", "tgt")  # which the data files would have said
    assert export(model, tmp_path / "out", *languages) == 1
    assert f"{dictionaries} holds no binarized src-tgt split" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")
    assert export(model, tmp_path / "out", *languages, "--max_new_tokens", "77") == 0
    assert json.loads((tmp_path / "out" / "generation_config.json").read_text())["max_new_tokens"] == 77


@pytest.fixture(scope="module")
def looping(shared, tmp_path_factory):
    """The shared model made to loop: its last decoder layer's final layer norm outputs one constant vector,
    the embedding of a word piece, so every step predicts the same pieces and never </s>. Exported."""
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    root = tmp_path_factory.mktemp("looping")
    state = load_checked(str(shared.checkpoint))
    layers = state["cfg"]["model"]["decoder_layers"]
    norm = f"decoder.layers.{layers - 1}.ffn_sublayer.layer_norm"
    embeddings = state["model"]["decoder.output_projection.weight"]  # the shared embeddings
    state["model"][f"{norm}.weight"] = torch.zeros_like(state["model"][f"{norm}.weight"])
    state["model"][f"{norm}.bias"] = 4 * embeddings[10]
    logits = embeddings @ (4 * embeddings[10])
    assert int((logits > logits[2]).sum()) > 8  # </s> (id 2) is never among beam search's 2 x 4 candidates
    torch.save(state, root / "looping.pt")
    model = Model(**{**vars(shared), "checkpoint": root / "looping.pt", "hf": root / "hf"})
    assert export(model, model.hf) == 0
    return model


def test_a_model_that_never_ends_stops_where_fairseq_stops(looping):
    """A hypothesis that never ends: fairseq-generate stops it at the input + 50 tokens; generate() with the
    README's max_new_tokens stops at the same length, and without it at the exported bound (here the
    longest source + 50), not at the model's 1,024 positions."""
    from transformers import MarianMTModel, MarianTokenizer

    out = run_in_process(
        "fairseq-generate",
        str(looping.bin),
        "--user-dir",
        PLUGIN,
        "--path",
        str(looping.checkpoint),
        "--gen-subset",
        "test",
        *decoding_flags(),
        "--batch-size",
        "1",
    )
    fairseq_lengths = {i: len(fields[1].split()) for i, fields in sentence_lines(out, "H").items()}
    sources = {i: len(fields[0].split()) + 1 for i, fields in sentence_lines(out, "S").items()}  # with </s>
    assert all(fairseq_lengths[i] == sources[i] + 50 for i in sources)  # every hypothesis ran to fairseq's bound
    tokenizer, model = MarianTokenizer.from_pretrained(looping.hf), MarianMTModel.from_pretrained(looping.hf).eval()
    lines = (looping.root / "test.src").read_text().splitlines()
    with torch.no_grad():
        for i in range(0, len(lines), 16):
            batch = tokenizer(lines[i], return_tensors="pt")
            assert batch["input_ids"].shape[1] == sources[i]
            bounded = model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + 51)
            assert bounded.shape[1] - 2 == fairseq_lengths[i]  # less the decoder's start and the forced </s>
            if i == 0:
                unbounded = model.generate(**batch)
                assert unbounded.shape[1] - 1 == model.generation_config.max_new_tokens < 1024


@pytest.mark.transformers4
def test_pipeline_translation_under_transformers_4(shared, interactive):
    """``pipeline("translation", model=DIR)``, which transformers 5 removed, under transformers 4.57
    (``make test-transformers4`` installs it into .transformers4): fairseq-interactive's translations."""
    path = os.environ.get("TRANSFORMERS4")
    if not path:
        pytest.skip("needs transformers 4 beside the pinned 5: make test-transformers4")
    lines, expected = interactive
    # one sentence per call, each bounded as fairseq bounds it: its input + 50 tokens, then </s>
    code = (
        "import json, sys, transformers; t = transformers.pipeline('translation', model=sys.argv[1]);"
        "print(transformers.__version__); print(json.dumps([t(line, max_new_tokens=len(t.tokenizer(line).input_ids)"
        " + 51)[0]['translation_text'] for line in json.load(sys.stdin)]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(shared.hf)],
        input=json.dumps(lines),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.path.abspath(path)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    version, translated = result.stdout.splitlines()[-2:]
    assert version.startswith("4.") and json.loads(translated) == expected


@pytest.mark.e2e  # 23 s: make test-e2e
def test_a_multilingual_parents_token_is_in_the_model_card_and_checked(shared, tmp_path):
    """--target-token (the recipe passes a multilingual parent's >>xx<<): the card's example and its words put it
    before the source sentence; a token that is no symbol of the source dictionary is refused, naming it."""
    [symbol, *_] = [line.split()[0] for line in (shared.bin / "dict.src.txt").read_text().splitlines()]
    common = ["--model-path", str(shared.checkpoint), "--data-dir", str(shared.bin), "--spm", str(shared.spm)]
    result = subprocess.run(
        [os.path.join(BIN, "vaswani-export-hf"), *common, "--output-dir", str(tmp_path / "m")]
        + ["--target-token", symbol],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    card = (tmp_path / "m" / "README.md").read_text()
    assert f'batch = tokenizer(["{symbol} A sentence to translate."]' in card
    assert f"Put `{symbol}` before every source sentence" in card
    refused = subprocess.run(
        [os.path.join(BIN, "vaswani-export-hf"), *common, "--output-dir", str(tmp_path / "n")]
        + ["--target-token", ">>xyz<<"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "--target-token >>xyz<<: not a symbol of" in refused.stderr
    assert not (tmp_path / "n").exists()
