"""What a recipe's stages write (recipes/engine/space.py): the parameters of a model from its
flags, against the model fairseq builds; checkpoints kept; the estimate of stage after stage. Against a toy
run: tests/integration/test_wmt14_recipes.py."""

import pytest

from helpers import build_vaswani, make_dictionary
from recipes.engine import space


@pytest.mark.parametrize(
    "arch, flags, overrides, share",
    [
        ("vaswani_tiny", [], {}, "all"),
        ("vaswani_base", [], {}, "all"),
        ("vaswani_big", [], {}, "all"),
        ("vaswani_parsing", [], {}, "decoder"),
        ("vaswani_tiny", ["--positional-encoding", "learned"], {"positional_encoding": "learned"}, "all"),
        (
            "vaswani_tiny",
            ["--encoder-layers", "3", "--d-ff", "100", "--attention-heads", "2", "--d-k", "16"],
            {"encoder_layers": 3, "d_ff": 100, "attention_heads": 2, "d_k": 16},
            "all",
        ),
        ("vaswani_tiny", [], {}, "none"),
    ],
)
def test_the_parameters_counted_from_the_flags_are_the_models(arch, flags, overrides, share):
    vocab = 104
    words = ["fairseq-train", "data-bin", "--arch", arch, *flags]
    words += {"all": ["--share-all-embeddings"], "decoder": ["--share-decoder-input-output-embed"], "none": []}[share]
    model = build_vaswani(
        make_dictionary(vocab - 4),
        arch,
        share_all_embeddings=share == "all",
        share_decoder_input_output_embed=share == "decoder",
        **overrides,
    )
    assert space.parameters(words, vocab, vocab) == sum(p.numel() for p in model.parameters())


def test_the_papers_models_have_the_papers_sizes():
    """Table 3: base 65M, big 213M parameters (with the En-De vocabulary of about 37,000 pieces)."""
    base = space.parameters(["--arch", "vaswani_base", "--share-all-embeddings"], 37000, 37000)
    big = space.parameters(["--arch", "vaswani_big", "--share-all-embeddings"], 37000, 37000)
    assert round(base / 1e6) == 63 and round(big / 1e6) == 214  # the paper rounds to 65M and 213M


def test_checkpoints_kept_are_those_fairseq_keeps(tmp_path):
    plan = space.Estimate(fallback_vocabulary=1000)
    words = [
        "train_workers",
        "2",
        "log",
        "fairseq-train",
        str(tmp_path / "bin"),
        "--arch",
        "vaswani_tiny",
        "--share-all-embeddings",
        "--max-update",
        "100",
        "--save-interval-updates",
        "10",
        "--keep-interval-updates",
        "5",
        "--no-epoch-checkpoints",
        "--save-dir",
        str(tmp_path / "ckpt"),
    ]
    written = space.stage_writes(words, plan)
    one = written.transient / 2
    assert written.kept == 7 * one  # 5 by update, the last, the best
    assert space.stage_writes([*words, "--disable-validation"], plan).kept == 6 * one
    assert (
        space.stage_writes([w for w in words if w != "--no-epoch-checkpoints"], plan).kept == 8 * one
    )  # fairseq keeps 1 epoch's
    assert space.stage_writes([*words[:-2], "--fp16", "--save-dir", str(tmp_path / "c")], plan).kept < written.kept
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "checkpoint_last.pt").write_bytes(b"x" * int(one))  # a training that resumes
    assert space.stage_writes(words, plan).kept == pytest.approx(6 * one)


def test_each_stage_reads_what_the_one_before_will_write(tmp_path):
    """Nothing exists yet: the encoding is estimated from the text the preparation will write, the binarized
    data from the encoding, and the model's vocabulary from the sentencepiece model."""
    work = tmp_path / "w"
    stages = [
        ("1", ["python", "-m", "preprocess.wmt14", "prepare", "--pair", "en-de", "--out", f"{work}/data"], True),
        (
            "2a",
            [
                "python",
                "-m",
                "preprocess.sentencepiece_vocab",
                "train",
                "--inputs",
                f"{work}/data/train.en",
                f"{work}/data/train.de",
                "--model-prefix",
                f"{work}/spm/spm",
                "--vocab-size",
                "37000",
            ],
            True,
        ),
        (
            "2b",
            [
                "python",
                "-m",
                "preprocess.sentencepiece_vocab",
                "encode",
                "--model",
                f"{work}/spm/spm.model",
                "--inputs",
                f"{work}/data/train.en",
                f"{work}/data/train.de",
                "--outputs",
                f"{work}/spm/train.sp.en",
                f"{work}/spm/train.sp.de",
            ],
            True,
        ),
        (
            "3",
            [
                "fairseq-preprocess",
                "--source-lang",
                "en",
                "--target-lang",
                "de",
                "--trainpref",
                f"{work}/spm/train.sp",
                "--joined-dictionary",
                "--destdir",
                f"{work}/data-bin",
            ],
            True,
        ),
        (
            "4",
            [
                "launch_training",
                "log",
                "torchrun",
                "fairseq-train",
                f"{work}/data-bin",
                "--arch",
                "vaswani_big",
                "--share-all-embeddings",
                "--max-update",
                "300000",
                "--save-interval-updates",
                "1500",
                "--keep-interval-updates",
                "20",
                "--no-epoch-checkpoints",
                "--save-dir",
                f"{work}/big/checkpoints",
            ],
            True,
        ),
        (
            "5",
            ["python", "-m", "transformer_plugin_cli.tools.average_checkpoints", "--inputs", f"{work}/big/checkpoints"],
            True,
        ),
    ]
    plan = space.estimate(stages)
    by_stage = dict(plan.stages)
    text = space.CLEANED_RATIO * space.DOWNLOADED_TEXT["en-de"]
    assert by_stage["2b"].kept == pytest.approx(space.ENCODED_RATIO * text)
    assert by_stage["3"].kept == pytest.approx(space.BINARIZED_RATIO * space.ENCODED_RATIO * text)
    one = by_stage["4"].transient / 2
    assert 2.5e9 < one < 2.7e9  # the big model: 2.6 GB with Adam's moments
    assert by_stage["4"].kept == pytest.approx(22 * one) and by_stage["5"].kept == pytest.approx(one)
    assert plan.needed == pytest.approx(plan.kept + 2 * one)
    skipped = space.estimate([(sid, argv, sid not in ("1", "2a", "2b", "3")) for sid, argv, _ in stages])
    assert skipped.total("data") == 0 and skipped.total("checkpoints") == pytest.approx(23 * one)


def test_shards_are_estimated_as_one_data_bin(tmp_path):
    """SHARDS=2: the split writes the encoded text once more, the dictionary stage writes almost nothing, each
    shard half the binarized text; the training on the shards colon-joined is sized from their dictionary,
    from the plan or from shard0's files once they exist."""
    work = tmp_path / "w"
    spm = [
        "python",
        "-m",
        "preprocess.sentencepiece_vocab",
        "train",
        "--inputs",
        f"{work}/data/train.en",
        f"{work}/data/train.de",
        "--model-prefix",
        f"{work}/spm/spm",
        "--vocab-size",
        "8000",
    ]
    encode = [
        "python",
        "-m",
        "preprocess.sentencepiece_vocab",
        "encode",
        "--model",
        f"{work}/spm/spm.model",
        "--inputs",
        f"{work}/data/train.en",
        f"{work}/data/train.de",
        "--outputs",
        f"{work}/spm/train.sp.en",
        f"{work}/spm/train.sp.de",
    ]
    (work / "data").mkdir(parents=True)
    for lang in ("en", "de"):
        (work / "data" / f"train.{lang}").write_bytes(b"x" * 1_000_000)
    train = [
        "fairseq-train",
        f"{work}/data-bin/shard0:{work}/data-bin/shard1",
        "--arch",
        "vaswani_tiny",
        "--share-all-embeddings",
        "--max-update",
        "100",
        "--save-interval-updates",
        "10",
        "--keep-interval-updates",
        "5",
        "--no-epoch-checkpoints",
        "--save-dir",
        f"{work}/ckpt",
    ]
    shards = [
        ("2a", spm, True),
        ("2b", encode, True),
        (
            "3a",
            [
                "python",
                "-m",
                "preprocess.shards",
                "split",
                "--prefix",
                f"{work}/spm/train.sp",
                "--langs",
                "en",
                "de",
                "--shards",
                "2",
                "--out",
                f"{work}/spm/shards",
            ],
            True,
        ),
        (
            "3b",
            [
                "fairseq-preprocess",
                "--source-lang",
                "en",
                "--target-lang",
                "de",
                "--trainpref",
                f"{work}/spm/train.sp",
                "--joined-dictionary",
                "--dict-only",
                "--destdir",
                f"{work}/data-bin/dict",
            ],
            True,
        ),
        *(
            (
                f"3c-shard{i}",
                [
                    "fairseq-preprocess",
                    "--source-lang",
                    "en",
                    "--target-lang",
                    "de",
                    "--trainpref",
                    f"{work}/spm/shards/train.sp.shard{i}",
                    "--srcdict",
                    f"{work}/data-bin/dict/dict.en.txt",
                    "--tgtdict",
                    f"{work}/data-bin/dict/dict.de.txt",
                    "--destdir",
                    f"{work}/data-bin/shard{i}",
                ],
                True,
            )
            for i in range(2)
        ),
        ("4", train, True),
    ]
    by_stage = dict(space.estimate(shards).stages)
    encoded = by_stage["2b"].kept
    assert by_stage["3a"].kept == pytest.approx(encoded) and by_stage["3b"].kept == space.SMALL
    assert (
        by_stage["3c-shard0"].kept == by_stage["3c-shard1"].kept == pytest.approx(space.BINARIZED_RATIO * encoded / 2)
    )
    planned = space.Estimate(fallback_vocabulary=space._padded(8004))  # sentencepiece's 8,000 and fairseq's 4
    one = space.stage_writes([*train[:1], f"{work}/data-bin/x", *train[2:]], planned).transient / 2
    assert by_stage["4"].kept == pytest.approx(
        7 * one
    )  # the vocabulary of 8,000 pieces, through the shards' dictionary
    (work / "data-bin" / "shard0").mkdir(parents=True)
    for lang in ("en", "de"):  # made: the dictionary is read from the first shard, as from a data-bin of its own
        (work / "data-bin" / "shard0" / f"dict.{lang}.txt").write_text("".join(f"w{i} 1\n" for i in range(8000)))
    alone = space.stage_writes([*train[:1], f"{work}/data-bin/shard0", *train[2:]], space.Estimate()).kept
    assert alone > 0 and space.stage_writes(train, space.Estimate()).kept == alone


def test_a_command_without_an_estimate_says_so():
    """It used to be counted as 64 KB without a word."""
    plan = space.estimate(
        [
            ("9", ["python", "-m", "my_tool", "--out", "/big/place"], True),
            ("7", ["python", "-m", "transformer_plugin_cli.tools.evaluate", "--json", "s.json"], True),
        ]
    )
    written = dict(plan.stages)
    assert written["9"].kind == "unknown" and written["9"].how == "no estimate for my_tool: counted as 65.5 KB"
    assert written["7"].kind == "other" and written["7"].how == "a small output"
    lines = space.lines(plan, 10**9, "runs/x")
    assert any(line.startswith("  stage 9: ") and "no estimate for my_tool" in line for line in lines)
    assert not any(line.startswith("  stage 7: ") for line in lines)
