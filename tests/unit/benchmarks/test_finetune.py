"""benchmarks.finetune's table and figure from a record (its runs: the recipe, measured in docs/benchmarks.md)."""

from benchmarks.budgets import Corpus
from benchmarks import finetune
from benchmarks.finetune import child_env, figure, table

RECORD = {
    "parent_alone": {"bleu": 10.0, "chrf": 40.0},
    "parent_on_its_test": {"bleu": 30.0, "chrf": 55.0},
    "runs": [
        {
            "pairs": 500,
            "budget": "10m",
            "kind": "fine-tuned",
            "updates": 500,
            "bleu": 15.0,
            "chrf": 45.0,
            "parent_test": {"bleu": 28.0, "chrf": 54.0},
            "against_from_nothing": {"sacrebleu": {"difference": 10.0, "low": 8.5, "high": 11.25, "significant": True}},
            "against_parent": {"sacrebleu": {"difference": 5.0, "low": -0.5, "high": 9.0, "significant": False}},
        },
        {"pairs": 500, "budget": "10m", "kind": "from nothing", "updates": 900, "bleu": 5.0, "chrf": 30.0},
        {"pairs": 2000, "budget": "10m", "kind": "from nothing", "updates": 900, "bleu": 7.0, "chrf": 32.0},
        {
            "pairs": 2000,
            "budget": "10m",
            "kind": "fine-tuned",
            "updates": 500,
            "bleu": 17.0,
            "chrf": 47.0,
            "parent_test": {"bleu": 27.0, "chrf": 53.0},
        },
    ],
}


def test_the_table_has_the_parent_alone_and_each_run_with_its_gains_and_forgetting():
    """Each fine-tuning's gain over training from nothing and over the parent, with the bootstrap's interval
    ("n.s." where it spans 0), and the parent's own test set after it."""
    lines = table(RECORD).splitlines()
    assert lines[2] == "| - | 0 | the parent alone | 0 | 10.00 | 40.00 | - | - | 30.00 | 55.00 |"
    assert lines[3] == (
        "| 500 | 10m | fine-tuned | 500 | 15.00 | 45.00 | +10.00 (+8.50 to +11.25) | +5.00 (-0.50 to +9.00), n.s. | "
        "28.00 | 54.00 |"
    )
    assert lines[4] == "| 500 | 10m | from nothing | 900 | 5.00 | 30.00 | - | - | - | - |"


def test_the_figure_is_written(tmp_path):
    figure(RECORD, str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_each_run_has_the_budget_in_time_and_only_the_fine_tuning_a_parent(tmp_path):
    """Training from nothing on fewer pairs than the recipe's MIN_PAIRS is given MIN_PAIRS of the corpus's size."""
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (tmp_path / f"{split}.{lang}").write_text("".join(f"{split} {i}\n" for i in range(30)))
    child = Corpus("child", str(tmp_path / "train"), "en", "de")
    tuned = child_env(child, "/w", "10m", "/p/hf", {"TOY": "1"})
    scratch = child_env(child, "/w", "10m", None, {})
    assert (tuned["TIME"], tuned["INIT"], tuned["TEST"], tuned["TOY"]) == ("10m", "/p/hf", str(tmp_path / "test"), "1")
    assert "INIT" not in scratch and "MAX_UPDATE" not in scratch
    assert scratch["MIN_PAIRS"] == "30" and "MIN_PAIRS" not in tuned
    # --sizes: a sample of the training pairs, kept together and in order, beside the same dev and test sets
    cut = finetune.subset(child, 12, str(tmp_path / "cut"))
    src, tgt = (open(f"{cut.prefix}.{lang}").read().splitlines() for lang in ("en", "de"))
    assert len(src) == 12 and src == tgt and src == sorted(src, key=lambda line: int(line.split()[1]))
    assert open(cut.files["TEST"] + ".de").read() == (tmp_path / "test.de").read_text()


def test_the_model_scored_on_the_parents_test_set_is_the_one_the_run_handed_over(tmp_path):
    """A fine-tuning of a small corpus hands over its best checkpoint by dev BLEU (WORK/plan.json), a larger one the
    average of its last: the parent's test set is translated with that one."""
    import json

    for kind, name in (("best", "checkpoint_best.pt"), ("average", "average.pt")):
        work = tmp_path / kind
        work.mkdir()
        (work / "plan.json").write_text(json.dumps({"schedule": {"handed_over": kind}}))
        assert finetune.handed_over(str(work)) == str(work / "checkpoints" / name)
