"""recipes/planner/model.py: a model's sizes read from fairseq-train's flags in one place, written back where they
stand, and its parameters counted in one place, as fairseq builds them and as the paper counts them (Table 3)."""

import pytest

from recipes.planner.model import Model, split_flags


def test_sizes_are_the_flags_given_else_the_architectures():
    model = Model.from_flags("vaswani_base", "--encoder-layers 3 --decoder-layers 3 --d-model 256 --d-ff 1024")
    assert (model.encoder_layers, model.d_model, model.d_ff, model.attention_heads) == (3, 256, 1024, 8)
    assert Model("vaswani_big").d_model == 1024 and Model("vaswani_big").dropout == 0.3
    assert Model.from_flags("vaswani_base", "--d-model 256 --d-model 128").d_model == 128  # fairseq takes the last
    assert model.described() == "N=3, d_model 256, d_ff 1024"


def test_a_size_changed_stays_where_it_stands_and_a_new_one_goes_last():
    model = Model.from_flags("vaswani_base", "--encoder-layers 3 --decoder-layers 3 --d-model 256")
    changed = model.with_sizes(encoder_layers=2, decoder_layers=2, d_ff=512)
    assert changed.flag_text() == "--encoder-layers 2 --decoder-layers 2 --d-model 256 --d-ff 512"
    assert model.flag_text() == "--encoder-layers 3 --decoder-layers 3 --d-model 256"  # a new model, this one kept


@pytest.mark.parametrize(
    "arch, paper, ours",  # Table 3, rows "base" and "big"; ours as docs/paper-tables.md gives them, 37,000 pieces
    [("vaswani_base", 65, 63.1), ("vaswani_big", 213, 214.2)],
)
def test_the_base_and_big_models_count_as_table_3(arch, paper, ours):
    model = Model(arch, ("--share-all-embeddings",))
    assert round(model.parameters(37000) / 1e6, 1) == ours
    as_the_paper = model.parameters(37000, biases=False) / 1e6  # the matrices alone
    assert abs(as_the_paper - paper) / paper < 0.04 and as_the_paper < model.parameters(37000) / 1e6


def test_the_sharing_of_embeddings_counts_them_once_twice_or_three_times():
    d = 512
    words = {"all": ("--share-all-embeddings",), "decoder": ("--share-decoder-input-output-embed",), "none": ()}
    count = {k: Model("vaswani_base", w).parameters(1000, 2000, biases=False) for k, w in words.items()}
    assert count["decoder"] - count["all"] == (1000 + 2000 - 2000) * d
    assert count["none"] - count["decoder"] == 2000 * d


def test_the_model_its_dropout_and_its_sharing_are_told_apart():
    assert split_flags(["--d-model", "32", "--dropout", "0.2", "--share-all-embeddings", "--output-bias"]) == (
        ["--d-model", "32", "--output-bias"],
        "0.2",
        ["--share-all-embeddings"],
    )
