"""benchmarks.finetune's table and figure from a record (its runs: the recipe, measured in docs/benchmarks.md)."""

from benchmarks.budgets import Corpus
from benchmarks import finetune
from benchmarks.finetune import child_env, figure, table

RECORD = {
    "parent_alone": {"bleu": 10.0, "chrf": 40.0},
    "parent_on_its_test": {"bleu": 30.0, "chrf": 55.0},
    "runs": [
        {
            "budget": "10m",
            "kind": "fine-tuned",
            "updates": 500,
            "bleu": 15.0,
            "chrf": 45.0,
            "parent_test": {"bleu": 28.0, "chrf": 54.0},
        },
        {"budget": "10m", "kind": "from nothing", "updates": 900, "bleu": 5.0, "chrf": 30.0},
    ],
}


def test_the_table_has_the_parent_alone_and_each_run_with_its_forgetting():
    lines = table(RECORD).splitlines()
    assert lines[2] == "| 0 | the parent alone | 0 | 10.00 | 40.00 | 30.00 | 55.00 |"
    assert lines[3] == "| 10m | fine-tuned | 500 | 15.00 | 45.00 | 28.00 | 54.00 |"
    assert lines[4] == "| 10m | from nothing | 900 | 5.00 | 30.00 | - | - |"


def test_the_figure_is_written(tmp_path):
    figure(RECORD, str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_each_run_has_the_budget_in_time_and_only_the_fine_tuning_a_parent():
    child = Corpus("child", "/c/train", "en", "de")
    tuned = child_env(child, "/w", "10m", "/p/hf", {"TOY": "1"})
    scratch = child_env(child, "/w", "10m", None, {})
    assert (tuned["TIME"], tuned["INIT"], tuned["TEST"], tuned["TOY"]) == ("10m", "/p/hf", "/c/test", "1")
    assert "INIT" not in scratch and "MAX_UPDATE" not in scratch


def test_the_model_scored_on_the_parents_test_set_is_the_one_the_run_handed_over(tmp_path):
    """A fine-tuning of a small corpus hands over its best checkpoint by dev BLEU (WORK/plan.json), a larger one the
    average of its last: the parent's test set is translated with that one."""
    import json

    for kind, name in (("best", "checkpoint_best.pt"), ("average", "average.pt")):
        work = tmp_path / kind
        work.mkdir()
        (work / "plan.json").write_text(json.dumps({"schedule": {"handed_over": kind}}))
        assert finetune.handed_over(str(work)) == str(work / "checkpoints" / name)
