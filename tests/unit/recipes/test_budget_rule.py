"""The budget rule (recipes/planner/budget_rule.py): one prediction for every scale, the pick the candidate of the
lowest predicted validation loss, its constants the fit of the budget runs and Table 3, held to Table 3's rows left out
of the fit, and its properties over a sweep of corpora and budgets from minutes of one core to days of 64 GPUs."""

import functools
import json
import math
import os

import pytest
from helpers import Sweep, corpus, many, speeds

from benchmarks import budget_fit
from preprocess.corpora import CorpusError
from recipes.planner.budget import busy_share, candidates, law, predictions, rule, size_classes
from recipes.planner.speed.speed_file import SHARES
from recipes.planner.probe_arithmetic import parse_time, updates_that_fit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECORDS = [os.path.join(REPO, "benchmarks", "records", "budgets", f) for f in ("de_77k.json", "ru_22k.json")]
LATIN = ("LATIN", "LATIN")


def one_core(candidate, vocab_size):
    """Seconds an update on one core, as the budget runs measured them (docs/benchmarks.md), other models by their
    parameters, per token."""
    known = {(2, 2048): 1.07, (2, 4096): 2.18, (3, 2048): 1.48, (3, 4096): 2.86}
    layers, d = candidate.model.encoder_layers, candidate.model.d_model
    if d == 256 and (layers, candidate.tokens_per_update) in known:
        return known[layers, candidate.tokens_per_update] * (1 + (vocab_size - 8000) / 40000)
    return 2.86 * candidates.parameters(candidate, vocab_size) / 7.6 * candidate.tokens_per_update / 4096


def gpus(devices):
    """``devices`` GPUs of a made-up but GPU-like speed: a device given few tokens computes little (its efficiency
    grows with its micro-batch), each layer costs host calls a micro-batch, and the gradients' all-reduce runs at 100
    GB/s within a machine of 8 and 12.5 GB/s between machines."""

    def seconds(candidate, vocab_size):
        p = candidates.parameters(candidate, vocab_size) * 1e6
        share = candidate.tokens_per_update / devices
        micro = min(share, 4096)
        efficiency = 0.3 * micro / (micro + 2048)
        host = 0.003 * (candidate.model.encoder_layers + candidate.model.decoder_layers)
        reduce = 0 if devices == 1 else 2 * p * 2 / (12.5e9 if devices > 8 else 100e9)
        return math.ceil(share / micro) * (host + micro * 6 * p / (1e15 * efficiency)) + 0.01 + reduce

    return seconds


def picked(pairs, max_update=None, seconds=0, speed=one_core, words_a_pair=12, devices=1, least_share=None):
    return rule.settings_for(
        pairs,
        LATIN,
        max_update,
        seconds,
        f"{seconds}s",
        speed,
        20_000,
        pairs * words_a_pair * 2.0,
        devices,
        least_share=least_share,
    )


def the_pick(found):
    return next(o for o in found.plan["options"] if o["picked"])


# ---- held to the paper --------------------------------------------------------------------------------------

WMT14 = dict(pairs=4_500_000, words_a_pair=25)


def wmt14(max_update):
    return picked(WMT14["pairs"], max_update=max_update, words_a_pair=WMT14["words_a_pair"])


def test_max_update_100000_on_wmt14_picks_what_table_3_shows_better_than_base_at_100k():
    """On 4.5M pairs of 25 words: at least the paper's batch, and d_model 1024 at P_drop 0.1 (Table 3's d_model 1024
    row, 4.66 against base's 4.92 after 100K; the paper's big_en_fr model), or base."""
    found = wmt14(100_000)
    model = (found.arch, found.model_flags, found.dropout)
    assert model in (("vaswani_base", "", 0.1), ("vaswani_big", "", 0.1)), found.budget
    assert found.tokens_per_update >= 25_000 and found.max_update == 100_000
    assert "from the paper" in found.budget


def test_max_update_300000_on_wmt14_picks_big():
    """The paper's big run: 300K updates of at least 25,000 tokens, big (at P_drop 0.3, the paper's: predicted 2.143
    bits, the paper's 2.114; P_drop 0.1 turns within its 28 epochs)."""
    found = wmt14(300_000)
    assert (found.arch, found.model_flags) == ("vaswani_big", ""), found.budget
    assert found.dropout in candidates.DROPOUTS
    assert found.tokens_per_update >= 25_000


def fitted_floor_wmt(point):
    return budget_fit.predicted(law.FIT, law.FLOORS["wmt14_en_de"], point)


@pytest.mark.parametrize("row", ["B-dk16", "B-dk32", "D-drop0.2"])
def test_the_rows_left_out_of_the_fit_lie_within_015_bits_of_the_paper(row):
    """Table 3's rows (B) and (D)'s P_drop 0.2, never fitted: predicted within 0.15 bits of log2 of the paper's
    perplexity, WMT14's fitted floor the one offset."""
    point = next(p for p in budget_fit.test_points() if p["name"] == row)
    assert abs(fitted_floor_wmt(point) - point["loss"]) <= 0.15, (row, fitted_floor_wmt(point), point["loss"])


def test_the_rows_left_out_rank_as_the_paper_ranks_them():
    """Rows (B) and (D)'s P_drop rows, never fitted, in the order of the paper's perplexities: P_drop 0.2 ahead of
    rows (B), P_drop 0 last (the turn: docs/budget-rule.md)."""
    points = budget_fit.test_points()
    assert sorted(points, key=fitted_floor_wmt) == sorted(points, key=lambda p: p["loss"])


@pytest.mark.xfail(
    strict=True,
    reason="the rule puts P_drop 0 0.16 bits above the paper's 5.77: the turn is measured at 1.5 to 20 parameters a "
    "corpus token and Table 3's base is at 0.16, and a fit of 1.4% more cost puts the row 0.18 under "
    "(python -m benchmarks.budget_fit prints both; docs/budget-rule.md, 'Held to the paper')",
)
def test_p_drop_0_lies_within_015_bits_of_the_paper():
    point = next(p for p in budget_fit.test_points() if p["name"] == "D-drop0.0")
    assert abs(fitted_floor_wmt(point) - point["loss"]) <= 0.15


CURVES = os.path.join(REPO, "benchmarks", "records", "budget_curves")
CURVES_P0 = {
    "ru 2+2": os.path.join(CURVES, "ru_22k_p0.json"),
    "ru 3+3": os.path.join(CURVES, "ru_22k_p0_3x.json"),
    "de 2+2": os.path.join(CURVES, "de_77k_p0.json"),
    "ru 2+2 x 512": os.path.join(CURVES, "ru_22k_p0_512.json"),
}
CURVE_P01 = os.path.join(CURVES, "ru_22k_p01.json")


@pytest.mark.parametrize("model", sorted(CURVES_P0))
def test_without_dropout_the_dev_loss_turns_up_and_the_rule_turns_with_it(model):
    """The budget runs' models without dropout (2+2 and 3+3 x 256 and 2+2 x 512 on the 22k EN-RU pairs, 2+2 x 256 on the
    77k EN-DE pairs) taken past their lowest dev loss: each one's dev loss is lowest after 5.5 to 8.5 epochs and then
    rises by more than a tenth of a bit; the rule's prediction turns within 2 epochs of it and rises by the last
    validation within a third of a bit of what the curve rose (the turn's shape: the level of a corpus is the floor's
    and the data term's; docs/budget-rule.md, "The turn")."""
    one = budget_fit.read_curve(CURVES_P0[model])
    t = budget_fit.turn(one)
    assert 5.5 <= t["epochs"] <= 8.5 and t["risen"] > 0.1, t
    c, floor = one["candidate"], law.FLOORS[one["corpus"]]
    lowest = predictions.lowest_updates(c, one["epoch"], floor)
    at = budget_fit.epochs_at(one, lowest)
    assert lowest and abs(at - t["epochs"]) <= 2.0, (at, t)
    last = one["curve"][-1][0]
    risen = predictions.loss_at(c, last, one["epoch"], floor) - predictions.loss_at(c, lowest, one["epoch"], floor)
    assert abs(risen - t["risen"]) <= 0.34, (risen, t)


def test_with_dropout_the_same_run_keeps_learning_past_the_turn_and_the_rule_follows_it():
    """The 2+2 run without dropout again at P_drop 0.1 (the same schedule and data, from nothing): its dev loss is
    lowest more than twice as many epochs in as the run without dropout turned, more than half a bit under the other's
    lowest, and the rule predicts every validation from update 1,000 on within 0.25 bits, past its lowest too."""
    one, without = budget_fit.read_curve(CURVE_P01), budget_fit.read_curve(CURVES_P0["ru 2+2"])
    t, t0 = budget_fit.turn(one), budget_fit.turn(without)
    assert t["epochs"] > 2 * t0["epochs"] and t["lowest"] < t0["lowest"] - 0.5
    assert one["candidate"].model_flags == without["candidate"].model_flags and one["candidate"].dropout == 0.1
    pairs = [(x, p) for (u, x), p in zip(one["curve"], budget_fit.predicted_curve(one)) if u >= 1000]
    assert len(pairs) > 80 and all(abs(x - p) <= 0.25 for x, p in pairs)


def test_the_dev_loss_falls_to_one_lowest_and_rises_past_it_and_a_candidate_is_ranked_by_that_lowest():
    """On a small corpus each candidate's L falls to the updates lowest_updates gives and rises past them, at a rate
    that dropout slows and that grows with the parameters a corpus token; its prediction for a budget is the lowest it
    reaches, so more updates never predict worse. No turn where the corpus is unknown."""
    corpus = 22_155 * 24.0
    for c in candidates.candidates():
        lowest = predictions.lowest_updates(c, corpus, law.FLOOR)
        at = [predictions.loss_at(c, int(lowest * f), corpus) for f in (0.5, 0.9, 1.0, 1.1, 2.0)]
        assert at[0] > at[1] > at[2] < at[3] < at[4], (c.name, lowest, at)
        assert (
            predictions.predicted_loss(c, 2 * lowest, corpus) == predictions.predicted_loss(c, lowest, corpus) == at[2]
        )
        assert predictions.lowest_updates(c, 0.0, law.FLOOR) == 0
    rate = functools.partial(law.rise_rate, law.FIT)
    assert rate(10.0, 0.0, 1e6) > rate(10.0, 0.1, 1e6) > rate(10.0, 0.3, 1e6) > 0
    assert rate(10.0, 0.1, 1e6) >= rate(10.0, 0.1, 1e8) and rate(10.0, 0.1, 0.0) == 0


def test_a_budget_past_the_picks_turn_says_where_the_dev_loss_turns():
    """A MAX_UPDATE far past what a small corpus teaches: trained as asked, and the note names the update of the pick's
    lowest and the bits its dev loss is predicted to gain by the end; a budget short of the turn has no such note."""
    found = picked(22_155, max_update=300_000)
    c = candidates.Candidate("c", found.arch, found.model_flags, found.dropout, found.tokens_per_update)
    lowest = predictions.lowest_updates(c, 22_155 * 12 * 2.0 / size_classes.BATCH_FILL, found.plan["floor_bits"])
    assert 0 < lowest < 300_000
    said = f"MAX_UPDATE=300,000, as asked: the dev loss is predicted to rise past update {lowest:,} (+"
    assert any(n.startswith(said) for n in found.notes), found.notes
    assert not any("predicted to rise" in n for n in picked(22_155, max_update=1_200).notes)


def test_the_fit_figure_draws_each_curve_beside_its_prediction(tmp_path):
    paths = budget_fit.CURVES
    assert {*CURVES_P0.values(), CURVE_P01} < set(paths)
    fig = budget_fit.figure(RECORDS, str(tmp_path / "fit.png"), paths)
    assert (tmp_path / "fit.png").read_bytes()[:4] == b"\x89PNG"
    drawn = [list(line.get_ydata()) for line in fig.axes[1].lines]
    for one in map(budget_fit.read_curve, paths):
        assert [loss for _, loss in one["curve"]] in drawn and budget_fit.predicted_curve(one) in drawn
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_a_fairseq_log_reads_as_its_validation_curve(tmp_path):
    """read_log takes every validation's updates and valid nll; one logged again by a resumed run counts as last
    logged; turn finds the lowest and the rise after it."""
    log = tmp_path / "train.log"
    lines = [
        (100, 9.0),
        (200, 7.0),
        (300, 6.0),
        (200, 7.5),  # resumed from update 200's checkpoint, validated again
        (400, 6.5),
        (500, 7.0),
    ]
    log.write_text(
        "".join(
            f'03:00:00 | INFO | valid | {{"epoch": 1, "valid_nll_loss": "{x}", "valid_num_updates": "{u}"}}\n'
            f'03:00:01 | INFO | train_inner | {{"num_updates": "{u}"}}\n'
            for u, x in lines
        )
    )
    curve = budget_fit.read_log(str(log))
    assert curve == [[100, 9.0], [200, 7.5], [300, 6.0], [400, 6.5], [500, 7.0]]
    one = {"candidate": candidates.Candidate("c", "vaswani_base", "", 0.0, 1000), "epoch": 100_000.0, "curve": curve}
    t = budget_fit.turn(one)
    assert t["epochs"] == 3.0 and t["lowest"] == 6.0 and t["risen"] == 1.0
    assert t["rise"] == pytest.approx(0.5) and t["end"] == 5.0


def test_the_fitted_rows_lie_within_the_fit():
    """Every fitted Table 3 row within 0.15 bits of the constants budget/law.py holds (that they are the fit of
    benchmarks/records: tests/unit/benchmarks/test_doc_tables.py)."""
    assert all(floor >= 0 for floor in law.FLOORS.values())
    for point in budget_fit.table3_points():
        assert abs(fitted_floor_wmt(point) - point["loss"]) <= 0.15, point["name"]


# EN-RU at 200 minutes: 3+3 x 256 at 5,091 updates (17.34 BLEU) predicted 0.05 bits under 2+2 at 7,053 (18.08), their
# dev losses measured equal (5.37 bits): the rule cannot tell them apart (docs/budget-rule.md, "Where it is measured")
KNOWN_MISSES = {("ru_22k", "200m")}


def test_among_the_measured_runs_the_lowest_predicted_loss_scores_within_half_a_bleu_of_the_best():
    """At each corpus and budget of the record, of the runs with the fit's vocabulary and a candidate's P_drop: the
    one the rule predicts lowest scored within 0.5 BLEU of the best, at its recorded updates. (The run without
    dropout, no candidate, scored 11.80 at an hour on EN-RU, 0.99 above the others' best: docs/budget-rule.md.)"""
    checked = 0
    for path in RECORDS:
        with open(path) as f:
            runs = [
                r
                for r in json.load(f)
                if r.get("bleu") is not None
                and r["settings"]["VOCAB_SIZE"] == "8000"
                and float(r["settings"]["DROPOUT"]) in candidates.DROPOUTS
            ]
        for budget in sorted({r["budget"] for r in runs}):
            here = [r for r in runs if r["budget"] == budget]
            if len(here) < 2:
                continue
            corpus_name = here[0]["corpus"]

            def loss(r):
                c = budget_fit.record_candidate(r["candidate"], r["settings"])
                return predictions.predicted_loss(c, r["updates"], budget_fit.EPOCH_TOKENS[corpus_name])

            best = max(r["bleu"] for r in here)
            if (corpus_name, budget) in KNOWN_MISSES:  # still missed, and said so (fails once mended)
                assert min(here, key=loss)["bleu"] < best - 0.5, (corpus_name, budget)
                continue
            assert min(here, key=loss)["bleu"] >= best - 0.5, (corpus_name, budget)
            checked += 1
    assert checked >= 4


# ---- the properties over a sweep --------------------------------------------------------------------------

CORPORA = [10_000, 22_155, 100_000, 1_000_000, 4_500_000, 36_000_000]
MACHINES = {  # (speed, devices, budgets in seconds): minutes of one core to days of 64 GPUs
    "one core": (one_core, 1, [1200 * 2**i for i in range(12)]),
    "one GPU": (gpus(1), 1, [1800 * 2**i for i in range(9)]),
    "8 GPUs": (gpus(8), 8, [1800 * 2**i for i in range(9)]),
    "64 GPUs": (gpus(64), 64, [1800 * 2**i for i in range(9)]),
}


def least_share(speed, devices):
    """A device's least share (budget/busy_share.py) of a model, from a machine's speed: a device's seconds an update
    at each share, as one device of ``devices`` sees it."""

    def least(arch, flags):
        def seconds_at(share):
            return speed(candidates.Candidate("", arch, flags, 0.1, share * devices), 8000)

        return busy_share.busy_share(seconds_at, SHARES)

    return least


@pytest.mark.parametrize("pairs", CORPORA)
@pytest.mark.parametrize("machine", list(MACHINES))
def test_more_time_never_predicts_worse_nor_picks_smaller_nor_goes_below_the_floor(pairs, machine):
    """TIME doubling from 20 minutes of a core, or 30 minutes of GPUs, up to weeks (Sweep's properties)."""
    speed, devices, budgets = MACHINES[machine]
    sweep = Sweep(pairs, devices, least_share(speed, devices))
    for seconds in budgets:
        sweep.holds(picked(pairs, seconds=seconds, speed=speed, devices=devices, least_share=sweep.least), seconds)


@pytest.mark.parametrize("pairs", CORPORA)
def test_more_updates_never_predict_worse_nor_pick_smaller(pairs):
    """MAX_UPDATE from 100 to 1,000,000 (Sweep's properties), each trained as given. The batch may fall: a larger one
    costs no time, and past the corpus's turn the smaller wins."""
    sweep = Sweep(pairs, batch_never_falls=False)
    for n in sorted({int(100 * 10 ** (i / 10)) for i in range(41)}):
        found = picked(pairs, max_update=n)
        sweep.holds(found, n)
        assert found.max_update == n == the_pick(found)["updates"]


def test_the_gpu_scale_picks_are_the_papers_models_not_the_smallest():
    """A GPU and a day or more, on 1M to 36M pairs: the paper's base or big, never 2 or 3 layers of 256; and the
    candidates span 2 x 256 to big, and batches beyond 25,000 on several devices."""
    for pairs in (1_000_000, 4_500_000, 36_000_000):
        for devices in (1, 8, 64):
            found = picked(pairs, seconds=24 * 3600, speed=gpus(devices), devices=devices, words_a_pair=23)
            assert found.model_flags == "" and found.arch in ("vaswani_base", "vaswani_big"), found.budget
    options = picked(1_000_000, seconds=3600, speed=gpus(8), devices=8).plan["options"]
    assert {o["tokens_per_update"] for o in options} >= {2048, 25000, 8 * 4096, 2 * 8 * 4096}
    assert {(o["arch"], o["model_flags"]) for o in options} == {(a, f) for a, f, _ in candidates.MODELS}


# ---- budgets and their lines --------------------------------------------------------------------------------


def test_a_max_update_past_what_the_corpus_can_teach_is_trained_as_given_and_said():
    """One count in both lines: the pick's updates are the MAX_UPDATE given, and a note says where they pass the
    updates the corpus can still teach."""
    found = picked(22_155, max_update=3_000_000)
    assert found.max_update == 3_000_000 and "x 3,000,000 updates" in found.budget
    assert found.useful_updates < 3_000_000
    assert any(n.startswith("MAX_UPDATE=3,000,000") and "as asked" in n for n in found.notes), found.notes
    assert not [n for n in picked(22_155, max_update=1_200).notes if n.startswith("MAX_UPDATE")]


def test_a_time_a_small_corpus_cannot_use_stops_at_what_helps_and_says_so():
    found = picked(22_155, seconds=200 * 86400)
    assert the_pick(found)["limited"] in ("turns", "repeats") and found.max_update == found.useful_updates
    assert any(n.startswith("TIME=17280000s: ") and n.endswith(": the run ends there") for n in found.notes), (
        found.notes
    )
    assert picked(22_155, seconds=400 * 86400).max_update == found.max_update


def test_the_vocabulary_follows_the_corpus_not_the_budget():
    for pairs in (12_000, 76_866, 600_000, 5_000_000):
        vocabularies = {picked(pairs, seconds=s).vocab_size for s in (1200, 36000)}
        vocabularies |= {picked(pairs, max_update=n).vocab_size for n in (500, 100000)}
        assert vocabularies == {rule.settings_for(pairs, LATIN).vocab_size}


def test_a_cpu_budget_probes_no_model_that_cannot_win():
    """An hour of one core on 77k pairs: the small models are measured, and base and big, which cannot win even at
    twice their FLOPs' speed, are left unprobed and said so."""
    asked = []

    def speed(c, vocab):
        asked.append(c.model_flags)
        return one_core(c, vocab)

    def lower_bound(c, vocab):
        return None if "--d-model 256" in c.model_flags else 0.5 * one_core(c, vocab)

    found = rule.settings_for(76_866, LATIN, None, 3600, "1h", speed, 20_000, 76_866 * 24.0, 1, 4096, lower_bound)
    assert "" not in asked and "--d-model 256" in found.model_flags
    assert "not probed, since even at their fastest they predict worse" in found.explain


def test_a_time_gives_each_candidate_the_updates_that_fit():
    """TIME is turned into each candidate's updates at its speed, with the validations of a dev set of 20,000 target
    tokens, and the pick is the lowest predicted loss at those."""
    speed = speeds(4.0, 1.5, 0.5)
    found = rule.settings_for(50_000, LATIN, None, parse_time("2h"), "2h", speed, 20_000)
    for o in found.plan["options"]:
        c = candidates.Candidate(o["name"], o["arch"], o["model_flags"], o["dropout"], o["tokens_per_update"])
        assert o["updates"] == updates_that_fit(parse_time("2h"), speed(c, 8000), c.tokens_per_update, 20_000)
        assert o["seconds_per_update"] == pytest.approx(speed(c, 8000), abs=1e-4)
    chosen = min(found.plan["options"], key=lambda o: o["predicted_valid_loss_bits"])
    assert chosen["picked"] and (found.model_flags, found.max_update) == (chosen["model_flags"], chosen["updates"])
    assert found.plan["budget"] == "TIME=2h" and found.explain.startswith("TIME=2h: ")


def test_min_pairs_is_checked_before_any_probe(tmp_path):
    prefix = corpus(tmp_path, many(100))

    def probe(candidate, vocab):
        raise AssertionError("probed")

    with pytest.raises(CorpusError, match="TRAIN has 100 lines: too few to train a translation model from scratch"):
        rule.settings([prefix], "en", "de", None, "2h", probe, min_pairs=10_000)


@pytest.mark.parametrize(
    "pairs, vocab, size_class",
    [(5_000_000, 32000, "large"), (600_000, 12000, "medium"), (200_000, 8000, "medium"), (50_000, 8000, "small")],
)
def test_without_a_budget_the_settings_follow_the_corpus_size(pairs, vocab, size_class):
    found = rule.settings_for(pairs, LATIN)
    assert found.vocab_size == vocab and found.size_class.startswith(size_class) and found.joint
    assert (found.dropout, found.arch) == ((0.1, "vaswani_base") if size_class == "large" else (0.3, "vaswani_base"))
    assert found.explain.startswith(f"no MAX_UPDATE or TIME: a full run of the {found.size_class} class")
    assert (
        found.budget.startswith(f"full run ({size_class}): N=6, d_model 512") and len("picked: " + found.budget) < 120
    )


def test_the_picked_line_stays_under_120_characters_for_every_class_and_budget():
    """The recipe prints "picked: " and this line; the widest: big at 64 GPUs' batch with a vocabulary a side."""
    for pairs in (10_000, 50_000, 150_000, 600_000, 5_000_000):
        for scripts in (LATIN, ("LATIN", "CYRILLIC")):
            for max_update in (None, 100, 1_200, 30_000, 300_000, 3_000_000):
                for devices in (1, 64):
                    found = rule.settings_for(pairs, scripts, max_update, corpus_tokens=pairs * 20, devices=devices)
                    assert len("picked: " + found.budget) < 120, found.budget


def test_the_explanation_says_why_a_lower_prediction_of_a_larger_model_is_not_yet_picked():
    """Between two budgets of the grid, a larger model that has just become the best waits for the next: the
    explanation names it and why."""
    sweep = [(pairs, int(1800 * 10 ** (i / 15))) for pairs in (22_155, 200_000) for i in range(60)]
    for pairs, seconds in sweep:  # 30 minutes to 30 years of a core, 15 a decade
        found = picked(pairs, seconds=seconds)
        probed = [o for o in found.plan["options"] if o["limited"] != "not probed" and o["predicted_valid_loss_bits"]]
        lowest = min(probed, key=lambda o: o["predicted_valid_loss_bits"])
        if (lowest["arch"], lowest["model_flags"]) != (found.arch, found.model_flags):
            assert "bits lower, but was the best at no smaller budget:" in found.explain
            return
    pytest.fail("no budget of the sweep waits for the grid")


def test_close_predictions_are_decided_on_speed_measured_again():
    """EN-RU at 200 minutes of a core: 2 and 3 layers of 256 at 2,048 tokens predicted within TIE_BITS (P_drop 0.1,
    measured, within the rule's error of 0.3 and picked on that evidence), and one probe
    of each decided between them (3 layers: 1.40 s kept from an earlier day, against 1.56 to 1.74 s measured afresh;
    the figures here are made up, in that ratio). Both are measured again (remeasure), the pick made again from those
    figures and the plan says so; a pick without close rivals, or a MAX_UPDATE, measures nothing again."""
    figures = {2: 1.07, 3: 1.40}  # seconds an update at 2,048 tokens: one probe each
    asked = []

    def speed(c, vocab):
        layers = c.model.encoder_layers
        if c.model.d_model == 256 and c.tokens_per_update == 2048 and layers in figures:
            return figures[layers]
        return one_core(c, vocab) * 2

    def remeasure(models, vocab):
        asked.append(sorted(c.model.encoder_layers for c in models))
        figures.update({2: 1.00, 3: 1.60})  # measured again
        return [candidates.model_words(c) for c in models]

    found = rule.settings_for(22_155, LATIN, None, 12000, "200m", speed, 20_000, 733_184.0, 1, 4096, None, remeasure)
    assert asked == [[2, 3]] and found.budget.startswith("N=2 x d_model 256, d_ff 1024, P_drop 0.1, 2,048 tokens")
    assert any(
        n.startswith("tie: 2,048 tokens, P_drop 0.3") and n.endswith("picked the measured one") for n in found.notes
    )
    assert any(n.startswith("speed measured again: N=3, d_model 256") for n in found.notes), found.notes
    assert all(len(f"note: {n}") < 120 for n in found.notes)
    asked.clear()
    rule.settings_for(22_155, LATIN, 5000, 0, "", None, 20_000, 733_184.0, 1, 4096, None, remeasure)
    rule.settings_for(22_155, LATIN, None, 1200, "20m", one_core, 20_000, 733_184.0, 1, 4096, None, remeasure)
    assert asked == []


def test_a_time_says_how_far_down_its_model_holds():
    """The fewest seconds at which the rule still picks the model it picks for 4 hours of one core (3 layers of 256):
    there it does, 6% below it picks the smaller model; where the smallest is picked, it holds down to the least TIME.
    A training that finds its machine slower re-picks below it (recipes/planner/repick.py)."""

    def at(seconds):
        return rule.settings_for(76_866, LATIN, None, seconds, "", one_core, 20_000, 76_866 * 24.0)

    found = at(4 * 3600)
    low = rule.holds_down_to(at, 4 * 3600, found)
    assert "--encoder-layers 3" in found.model_flags and 120 < low < 4 * 3600
    assert at(low).model_flags == found.model_flags
    assert "--encoder-layers 2" in at(int(low / rule.HOLDS_WITHIN**1.2)).model_flags
    smallest = at(3600)
    assert "--encoder-layers 2" in smallest.model_flags and rule.holds_down_to(at, 3600, smallest) == 120
