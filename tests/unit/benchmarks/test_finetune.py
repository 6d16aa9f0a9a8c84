"""benchmarks.finetune's table and figure from a record (its runs: the recipe, measured in docs/benchmarks.md)."""

import os

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


def child_and_parent(tmp_path):
    """A child corpus of 30 pairs (train, valid, test) in ``tmp_path`` and a parent WORK with an hf export."""
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (tmp_path / f"{split}.{lang}").write_text("".join(f"{split} {i}\n" for i in range(30)))
    parent = tmp_path / "parent"
    (parent / "hf").mkdir(parents=True)
    (parent / "hf" / "config.json").write_text("{}")
    return parent


def test_forgetting_runs_each_guard_with_the_parents_test_set_and_tabulates_gain_against_loss(tmp_path, monkeypatch):
    """forgetting: no guard, the parent's training text replayed at each ratio, and distillation (REPLAY=parent) of
    the training sources and, at the largest ratio, of the parent's training sources (REPLAY_SOURCES), each with
    PARENT_TEST the parent's test set, two at a time on the cores given; the record holds each run's scores
    on both test sets, the table and figure show them, and runs whose results exist are read back."""
    import json

    parent = child_and_parent(tmp_path)
    started = []

    class Done:
        def __init__(self, code):
            self.code = code

        def wait(self):
            return self.code

    def start(env, log, header, core):
        work = env["WORK"]
        started.append(
            (
                os.path.basename(work),
                core,
                {k: env.get(k) for k in ("REPLAY", "REPLAY_RATIO", "REPLAY_SOURCES", "PARENT_TEST")},
            )
        )
        os.makedirs(os.path.join(work, "results"))
        bleu = {"no_guard": 9.0, "replay_1": 8.0, "replay_3": 7.0, "distilled": 8.5, "distilled_own_text_3": 8.2}[
            os.path.basename(work)
        ]
        scores = {
            "test": {"sacrebleu": bleu, "chrf": 40.0, "against": None},
            "parent": {"sacrebleu": 5.0, "chrf": 30.0},
            "parent_test": {"sacrebleu": 30 - bleu, "chrf": 50.0, "against": None},
            "parent_test.before": {"sacrebleu": 27.0, "chrf": 52.0},
        }
        for key, value in scores.items():
            with open(os.path.join(work, "results", f"scores.{key}.json"), "w") as f:
                json.dump(value, f)
        with open(os.path.join(work, "results", "report.md"), "w") as f:
            f.write("report")
        with open(os.path.join(work, "plan.json"), "w") as f:
            json.dump({"budget": {"max_update": 100}}, f)
        with open(os.path.join(work, "train.log"), "w") as f:
            f.write('| train_inner | {"num_updates": "100", "wall": "60"}\n| valid | {"valid_nll_loss": "3.0"}\n')
        return Done(0)

    monkeypatch.setattr(finetune, "start_recipe", start)
    child = Corpus("child", str(tmp_path / "train"), "en", "de")
    record = tmp_path / "forgetting.json"
    found = finetune.forgetting(str(parent), child, None, "10m", [1, 3], [0, 1], str(tmp_path / "w"), str(record), {})
    assert [(name, core) for name, core, _ in started] == [
        ("no_guard", 0),
        ("replay_1", 1),
        ("replay_3", 0),
        ("distilled", 1),
        ("distilled_own_text_3", 0),
    ]
    test = os.path.abspath(parent / "data" / "test")
    general = os.path.abspath(parent / "data" / "train")
    assert [settings for _, _, settings in started] == [
        {"REPLAY": None, "REPLAY_RATIO": None, "REPLAY_SOURCES": None, "PARENT_TEST": test},
        {"REPLAY": general, "REPLAY_RATIO": "1", "REPLAY_SOURCES": None, "PARENT_TEST": test},
        {"REPLAY": general, "REPLAY_RATIO": "3", "REPLAY_SOURCES": None, "PARENT_TEST": test},
        {"REPLAY": "parent", "REPLAY_RATIO": "1", "REPLAY_SOURCES": None, "PARENT_TEST": test},
        {"REPLAY": "parent", "REPLAY_RATIO": "3", "REPLAY_SOURCES": general, "PARENT_TEST": test},
    ]
    assert json.loads(record.read_text()) == found
    lines = finetune.forgetting_table(found).splitlines()
    assert lines[4] == "| the parent alone | 0 | 5.00 | 30.00 | - | 27.00 | 52.00 | - |"
    assert lines[6] == "| fine-tuned, replay 1 | 100 | 8.00 | 40.00 | - | 22.00 | 50.00 | - |"
    finetune.forgetting_figure(found, str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    started.clear()  # read back, not run again
    assert finetune.forgetting(str(parent), child, None, "10m", [1, 3], [0, 1], str(tmp_path / "w"), str(record), {})
    assert not started


def test_run_runs_what_is_not_there_as_many_at_a_time_as_cores(tmp_path, monkeypatch):
    """run: every size at every budget, fine-tuned and from nothing; a run whose scores are there is read back, not
    run again, and the rest go as many at a time as there are cores, each on its own (a size's two runs at a budget
    side by side where both are to run)."""
    parent = child_and_parent(tmp_path)
    work = tmp_path / "w"
    for size in (10, 20):  # run before, beside something else: read back
        done = work / str(size) / "10m" / "from_nothing" / "results"
        done.mkdir(parents=True)
        (done / "scores.test.json").write_text("{}")
    started, events = [], []

    class Run:
        def __init__(self, name):
            self.name = name

        def wait(self):
            events.append(("ended", self.name))
            return 0

    def start(env, log, header, core):
        name = os.path.relpath(env["WORK"], work)
        started.append((name, core, "INIT" in env))
        events.append(("started", name))
        return Run(name)

    monkeypatch.setattr(finetune, "start_recipe", start)
    monkeypatch.setattr(finetune, "updates_of", lambda w: 0)
    monkeypatch.setattr(finetune, "read_run", lambda w: {})
    monkeypatch.setattr(finetune, "results_of", lambda *a: [])
    child = Corpus("child", str(tmp_path / "train"), "en", "de")
    finetune.run(str(parent), child, ["10m", "30m"], [0, 1], str(work), str(tmp_path / "r.json"), {}, [10, 20])
    assert started == [
        ("10/10m/fine-tuned", 0, True),
        ("10/30m/fine-tuned", 1, True),
        ("10/30m/from_nothing", 0, False),
        ("20/10m/fine-tuned", 1, True),
        ("20/30m/fine-tuned", 0, True),
        ("20/30m/from_nothing", 1, False),
    ]
    names = [name for name, _, _ in started]
    pairs = (names[0:2], names[2:4], names[4:6])  # each pair ended before the next starts
    assert events == [(what, name) for pair in pairs for what in ("started", "ended") for name in pair]
