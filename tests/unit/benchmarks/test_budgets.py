"""benchmarks/budgets.py: the candidates at budgets in time, pruned by successive halving, resumed, tabled.

The recipe is a stand-in that scores a candidate by its settings and updates, and the speed figures are kept
where the recipe reads them, so that the driver's own logic runs in seconds."""

import json
import os
import stat

import pytest

from helpers import corpus as write_corpus
from helpers import known_at

from benchmarks import budgets
from recipes.planner.budget.size_classes import SHORT_BUDGET
from recipes.planner.speed.probing import Probe

# seconds an update on one core: N=6 too slow for TIME=3m (refused), the others fit; 2,048 tokens an update slower
# than 4,096, so that the rule's pick is N=2 of 4,096 tokens (as many updates, each of more tokens)
SPEEDS = {"short": 1.0, "N=2": 0.8, "N=6": 10.0, "P0.3": 1.0, "class": 30.0, "2k-tokens": 3.0, "N=2+2k-tokens": 3.0}

# BLEU of the stand-in: more updates help; 3 layers learn fastest (the pick is not the best), more dropout costs
FAKE_RECIPE = r"""#!/usr/bin/env bash
set -euo pipefail
echo "$MODEL_FLAGS|$DROPOUT|$MAX_UPDATE|$CPU_WORKERS|$(taskset -pc $$ | sed 's/.*: //')" >> "$CALLS"
mkdir -p "$WORK/results"
python3 - <<'EOF'
import json, os
layers = int(os.environ["MODEL_FLAGS"].split("--encoder-layers ")[1].split()[0])
bleu = int(os.environ["MAX_UPDATE"]) / 100 + (1.0 if layers == 3 else 0.0) - 20 * (float(os.environ["DROPOUT"]) - 0.1)
work = os.environ["WORK"]
json.dump({"sacrebleu": round(bleu, 2), "chrf": round(2 * bleu, 2)}, open(f"{work}/results/scores.test.json", "w"))
record = {"valid_nll_loss": str(round(10 - bleu / 10, 3)), "valid_num_updates": os.environ["MAX_UPDATE"]}
open(f"{work}/train.log", "w").write("x | INFO | valid | " + json.dumps(record) + "\n")
EOF
"""


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for split, n in (("train", 4000), ("valid", 200), ("test", 5)):  # a dev set of 2,000 words, about 4,000 pieces
        write_corpus(
            folder,
            [
                tuple(f"sentence {i} of {split} in {lang} and four more words" for lang in ("en", "de"))
                for i in range(n)
            ],
            name=split,
        )
    short = budgets.candidates(budgets.Corpus("c", str(folder / "train"), "en", "de"))
    cache = tmp_path / "cache"
    (cache / "transformer_plugin").mkdir(parents=True)
    known = {}
    for name, seconds in SPEEDS.items():
        s = short[name]
        probe = Probe(s["ARCH"], s["MODEL_FLAGS"], int(s["VOCAB_SIZE"]), int(s["TOKENS_PER_UPDATE"]), 1, 1)
        known[probe.key()] = {"seconds": seconds, "measured": known_at()}
    (cache / "transformer_plugin" / "speed.json").write_text(json.dumps(known))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    recipe = tmp_path / "recipe.sh"
    recipe.write_text(FAKE_RECIPE)
    recipe.chmod(recipe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CALLS", str(tmp_path / "calls"))
    return budgets.Corpus("toy", str(folder / "train"), "en", "de"), str(recipe), tmp_path


ONLY = ("short", "N=2", "N=6", "P0.3")  # one slow candidate, one worse


def test_the_candidates_are_the_short_budgets_with_one_change_each(corpus):
    found = budgets.candidates(corpus[0])
    short = {
        "ARCH": "vaswani_base",
        "MODEL_FLAGS": SHORT_BUDGET["model_flags"],
        "DROPOUT": "0.1",
        "VOCAB_SIZE": "500",
        "TOKENS_PER_UPDATE": "4096",
    }  # (the corpus's vocabulary: 4,000 lines, 500 pieces)
    assert found["short"] == short
    assert found["class"]["MODEL_FLAGS"] == "--d-ff 1024 --attention-heads 4" and found["class"]["DROPOUT"] == "0.3"
    assert found["N=2"]["MODEL_FLAGS"].startswith("--encoder-layers 2 --decoder-layers 2 --d-model 256")
    assert "--d-model 512" in found["d512"]["MODEL_FLAGS"] and "--encoder-layers 3" in found["d512"]["MODEL_FLAGS"]
    for name in budgets.CHANGES:
        assert sum(found[name][k] != short[k] for k in short) == 1, name
    joined = found["N=2+2k-tokens"]  # two changes joined: each part's variables, the rest the short budget's
    assert {k for k in short if joined[k] != short[k]} == {"MODEL_FLAGS", "TOKENS_PER_UPDATE"}
    assert joined["MODEL_FLAGS"] == found["N=2"]["MODEL_FLAGS"] and joined["TOKENS_PER_UPDATE"] == "2048"


def test_survivors_are_the_better_half_the_pick_and_the_unmeasured():
    results = [
        budgets.Result("c", "3m", name, {}, 100, bleu=bleu, is_pick=["pick"] if name == "d" else [])
        for name, bleu in (("a", 5.0), ("b", 4.0), ("c", 3.0), ("d", 1.0), ("e", 2.0))
    ]
    assert budgets.survivors(results) == ["a", "b", "c", "d"]
    results[0].bleu, results[0].refused = None, "too few"  # too slow for this budget: tried at the next
    assert budgets.survivors(results) == ["b", "c", "a", "d"]


def test_a_grid_runs_halves_resumes_and_tables(corpus, tmp_path):
    corpus, recipe, _ = corpus
    work = str(tmp_path / "work")
    results = budgets.run([corpus], ["3m", "6m"], work, 2, recipe, ONLY)
    by = {(r.budget, r.candidate): r for r in results}
    # TIME=3m: (180 - 60) x 0.95 = 114 s, less about 20 validations of a dev set of about one update's tokens at half
    # its cost: 104 updates of 1 s, 131 of 0.8 s (the recipe's own conversion); N=6 gets 7 and is refused. The rule
    # picks 2 layers at 2,048 tokens (its figure N=2's at 4,096, per token: 0.4 s), none of those asked for: it runs
    # beside them, under its name among the candidates
    assert by["3m", "short"].updates == 104 and by["3m", "N=2"].updates == 131
    assert by["3m", "N=6"].refused and "too few" in by["3m", "N=6"].refused and by["3m", "N=6"].bleu is None
    assert by["3m", "N=2+2k-tokens"].is_pick == ["pick"] and by["3m", "N=2+2k-tokens"].updates == 265
    assert not by["3m", "short"].is_pick and not by["3m", "N=2"].is_pick
    assert by["3m", "short"].bleu == pytest.approx(2.04) and by["3m", "P0.3"].bleu == pytest.approx(-1.96)
    # the better half of the four measured (2 of them) go on, the pick among them, and N=6, not measured yet
    assert {c for b, c in by if b == "6m"} == {"short", "N=2+2k-tokens", "N=6"} and by["6m", "N=6"].refused
    calls = open(os.environ["CALLS"]).read().splitlines()
    assert len(calls) == 6 and all(line.split("|")[3] == "1" for line in calls)
    assert all(line.split("|")[4] in ("0", "1") for line in calls), calls  # each pinned to one core
    # again: nothing is trained twice
    again = budgets.run([corpus], ["3m", "6m"], work, 2, recipe, ONLY)
    assert len(open(os.environ["CALLS"]).read().splitlines()) == 6 and len(again) == len(results)
    text = budgets.table(budgets.load(work))
    assert "| N=2+2k-tokens | **2.65 / 5.30 / 9.73 (265)** (pick) |" in text, text
    assert "| N=2 | 1.31 / 2.62 / 9.87 (131) |" in text and "| short | 2.04 / 4.08 / 9.80 (104) |" in text
    assert "| N=6 | 7 updates: refused |" in text
    budgets.figure(budgets.load(work), str(tmp_path / "budgets.png"))
    assert (tmp_path / "budgets.png").stat().st_size > 10_000


def test_a_recipe_that_fails_names_its_log(corpus, tmp_path):
    corpus, _, root = corpus
    failing = root / "failing.sh"
    failing.write_text("#!/usr/bin/env bash\necho boom; exit 3\n")
    with pytest.raises(
        RuntimeError, match=r"N=2\+2k-tokens at 3m on toy: the recipe failed \(3\); see .*N=2\+2k-tokens.log"
    ):
        budgets.run([corpus], ["3m"], str(tmp_path / "work"), 1, str(failing), ("N=2",))


def test_the_corpora_come_from_debians_packages_and_a_missing_one_is_named(tmp_path):
    """The Russian corpus is a part of the packages; a package not in DEBS stops the preparation, named."""
    assert budgets.CORPORA["ru_22k"][0] == "ru" and "git" in budgets.CORPORA["ru_22k"][1]
    assert budgets.CORPORA["de_77k"] == ("de", [])  # preprocess.debian_l10n's own list
    (tmp_path / "debs").mkdir()
    with pytest.raises(RuntimeError, match=r"preparing de_77k failed: .* --lang de --debs "):
        budgets.prepare_corpora(str(tmp_path / "data"), str(tmp_path / "debs"))
    assert not (tmp_path / "data" / "de_77k" / "train.de").exists()


def test_a_resumed_grid_with_fewer_candidates_runs_the_pick_first(corpus, tmp_path):
    """A grid resumed with --only naming fewer candidates: the others' results are read back, not asked for (a
    KeyError was), and at each budget the pick trains before the rest (the rule's measurement first, should the
    runs be stopped)."""
    corpus, recipe, _ = corpus
    work = str(tmp_path / "work")
    budgets.run([corpus], ["3m"], work, 1, recipe, ("short", "N=2", "N=2+2k-tokens", "P0.3"))
    stale = budgets.load(work)  # as if the rule before had picked short: the mark follows the rule now
    for r in stale:
        r.is_pick = ["pick"] if r.candidate == "short" else []
    budgets.save(work, stale)
    open(os.environ["CALLS"], "w").close()
    results = budgets.run([corpus], ["3m", "6m"], work, 1, recipe, ("N=2+2k-tokens", "P0.3"))
    assert [r.candidate for r in results if r.budget == "3m" and r.is_pick] == ["N=2+2k-tokens"]
    assert {r.candidate for r in results if r.budget == "6m"} == {"N=2+2k-tokens"}  # P0.3 was in the worse half at 3m
    calls = open(os.environ["CALLS"]).read().splitlines()
    assert len(calls) == 1 and "--encoder-layers 2" in calls[0]  # only the pick trained at 6m
    open(os.environ["CALLS"], "w").close()
    later = budgets.run([corpus], ["3m", "9m"], work, 1, recipe, ONLY)  # at 9m: the pick first, then the others
    [pick] = [r for r in later if r.budget == "9m" and r.is_pick]
    first = open(os.environ["CALLS"]).read().splitlines()[0]
    assert first.startswith(pick.settings["MODEL_FLAGS"] + "|" + pick.settings["DROPOUT"] + "|"), first


def test_a_record_from_another_machine_gives_a_new_candidate_the_same_compute(corpus, tmp_path):
    """Runs kept in a record (a .json file, as benchmarks/records/budgets/ keeps them) were measured on another machine:
    a new candidate at that budget is given the TIME of this machine's core that gives the record's run of the most
    updates the updates it had there, not the budget's seconds here (the machine after this one was 1.5 to 1.9 times as
    fast)."""
    corpus, recipe, root = corpus
    record = str(tmp_path / "record" / "toy.json")
    first = budgets.run([corpus], ["3m"], str(tmp_path / "work1"), 1, recipe, ("short", "N=2+2k-tokens"), record=record)
    assert {r.candidate: r.updates for r in first} == {"short": 104, "N=2+2k-tokens": 265}
    assert all(r.measured and r.pairs == 4000 and not r.time for r in first)
    cache = root / "cache" / "transformer_plugin" / "speed.json"
    speeds = json.loads(cache.read_text())
    cache.write_text(json.dumps({k: {**v, "seconds": v["seconds"] * 0.75} for k, v in speeds.items()}))  # faster
    open(os.environ["CALLS"], "w").close()
    results = budgets.run(
        [corpus], ["3m"], str(tmp_path / "work2"), 1, recipe, ("short", "N=2+2k-tokens", "P0.3"), record=record
    )
    new = next(r for r in results if r.candidate == "P0.3")
    # P0.3 is as fast as short: the same 104 updates, in fewer seconds here than 3 minutes
    assert new.updates == 104 and new.time.endswith("s") and 120 <= int(new.time[:-1]) < 180, new
    assert len(open(os.environ["CALLS"]).read().splitlines()) == 1  # only P0.3 trained: the record's were read back
    kept = budgets.load(record)
    assert [r.candidate for r in kept] == ["N=2+2k-tokens", "short", "P0.3"]  # the pick trains first
    kept[0].pairs = 38  # the corpus rebuilt since (Debian's packages moved): the table says on what each was measured
    assert f"TIME=3m: P0.3 ran on another machine than the others: {new.time} of its core" in budgets.table(kept)
    assert "Measured on 38 training pairs (1 run," in budgets.table(kept)


def test_a_budget_new_to_a_record_from_another_machine_is_scaled_as_its_longest(corpus, tmp_path):
    """A budget first measured on this machine, in a record of runs measured on another: its TIME here is the
    record's longest budget's TIME here, scaled (6m there is twice what 3m there is here), so that the record's
    budgets stay those of one machine's core; on the record's own machine a new budget is itself."""
    corpus, recipe, root = corpus
    record = str(tmp_path / "record" / "toy.json")
    budgets.run([corpus], ["3m"], str(tmp_path / "work1"), 1, recipe, ("short", "N=2+2k-tokens"), record=record)
    core = min(os.sched_getaffinity(0))  # as run() asks: one worker of one thread, whose speeds the cache holds
    valid_tokens = budgets.rule_pick(corpus, "6m", core)[1]
    assert budgets.calibrated("6m", budgets.load(record), core, valid_tokens) == "6m"  # the same machine: 6m is 6m
    cache = root / "cache" / "transformer_plugin" / "speed.json"
    speeds = json.loads(cache.read_text())
    cache.write_text(json.dumps({k: {**v, "seconds": v["seconds"] * 0.75} for k, v in speeds.items()}))  # faster
    results = budgets.run(
        [corpus], ["3m", "6m"], str(tmp_path / "work2"), 1, recipe, ("short", "N=2+2k-tokens", "P0.3"), record=record
    )
    at_3m = next(r for r in results if r.candidate == "P0.3" and r.budget == "3m").time
    assert 120 <= int(at_3m[:-1]) < 180
    new = [r for r in results if r.budget == "6m"]
    assert new and {r.time for r in new} == {f"{2 * int(at_3m[:-1])}s"}, new
    n2 = next(r for r in new if r.candidate == "N=2+2k-tokens")
    assert n2.updates < budgets.updates_for(n2.settings, "6m", core, valid_tokens)[0]  # not 6 minutes of this core
    assert "TIME=6m: measured on another machine than the record's others" in budgets.table(budgets.load(record))


def fairseq_log(*records, early_stop=False):
    lines = [f"2026-11-28 07:00:00 | INFO | {kind} | {json.dumps(record)}" for kind, record in records]
    if early_stop:
        lines.append(
            "2026-11-28 08:07:11 | INFO | fairseq_cli.train | early stop since valid performance hasn't improved for "
            "last 10 runs"
        )
    return "\n".join(lines + ["2026-11-28 08:07:11 | INFO | fairseq_cli.train | done training in 337.0 seconds"]) + "\n"


def test_a_run_stopped_early_says_where_and_its_time_is_fairseqs_wall_clock(tmp_path):
    """The recipe's --patience may end a run before its MAX_UPDATE (an EN-RU run of 7,053 updates stopped at 5,728):
    the record says so; its seconds are fairseq's wall clock at the last logged update, where a run resumed, each
    process's added (an epoch's train_wall, and a resumed run's "done training in", are not the training's)."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "scores.test.json").write_text(json.dumps({"sacrebleu": 18.08, "chrf": 36.42}))
    records = [
        ("train_inner", {"num_updates": "900", "train_wall": "94", "wall": "875"}),
        ("train_inner", {"num_updates": "1000", "train_wall": "93", "wall": "968"}),  # stopped, resumed at 704
        ("train_inner", {"num_updates": "800", "train_wall": "98", "wall": "95"}),
        ("train_inner", {"num_updates": "5700", "train_wall": "88", "wall": "4743"}),
        ("valid", {"valid_nll_loss": "5.369", "valid_num_updates": "5728"}),
        ("train", {"train_num_updates": "5728", "train_train_wall": "337"}),
    ]
    (tmp_path / "train.log").write_text(fairseq_log(*records, early_stop=True))
    run = budgets.read_run(str(tmp_path))
    assert run == {
        "bleu": 18.08,
        "chrf": 36.42,
        "valid_nll": 5.369,
        "train_seconds": 968.0 + 4743.0,
        "stopped_at": 5728,
    }
    r = budgets.Result("ru", "200m", "pick", {}, 7053, **run, is_pick=["pick"])
    assert "| pick | **18.08 / 36.42 / 5.37 (5,728 of 7,053, stopped early)** (pick) |" in budgets.table([r])
    (tmp_path / "train.log").write_text(fairseq_log(*records))
    assert budgets.read_run(str(tmp_path))["stopped_at"] is None


def test_the_figure_draws_the_rules_fitted_curves_beside_the_record():
    """Below BLEU, each corpus's panel of valid loss: the runs with a vocabulary of 8,000 and, for each of their
    candidates, the rule's curve, solid where measured and dotted where it extrapolates, passing near its runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.budget_record import fitted_curves

    records = [
        os.path.join(budgets.REPO, "benchmarks", "records", "budgets", f) for f in ("de_77k.json", "ru_22k.json")
    ]
    for path in records:
        results = budgets.load(path)
        _, ax = plt.subplots()
        fitted_curves(ax, results)
        shapes = {
            (r.settings["MODEL_FLAGS"], r.settings["TOKENS_PER_UPDATE"], float(r.settings["DROPOUT"]))
            for r in results
            if r.valid_nll is not None and r.settings["VOCAB_SIZE"] == "8000"
        }
        assert len(ax.lines) == 2 * len(shapes) >= 6 and sum(line.get_linestyle() == ":" for line in ax.lines) == len(
            shapes
        )
        for points, solid in zip(ax.collections, ax.lines[::2]):  # each candidate's runs within 1.2 bits of its curve
            xs, ys = solid.get_data()
            for x, y in points.get_offsets():
                assert abs(y - ys[min(range(len(xs)), key=lambda i: abs(xs[i] - x))]) < 1.2
        plt.close("all")
