"""The whole run's time beside training's (recipes/planner/speed/whole_run.py) and a validation's cost with the dev
BLEU (recipes/planner/probe_arithmetic.py)."""

from recipes.planner.probe_arithmetic import (
    BEAM_TOKEN_COST,
    VALID_TOKEN_COST,
    training_time,
    updates_that_fit,
    validation_seconds,
)
from recipes.planner.speed.whole_run import (
    DATA_SECONDS_A_PAIR,
    PROGRAM_START_SECONDS,
    Translation,
    seconds_translating,
    whole_run,
)


def test_a_validation_with_the_dev_bleu_costs_the_dev_sets_translation_too():
    plain = validation_seconds(1.0, 4000, 20000)
    with_bleu = validation_seconds(1.0, 4000, 20000, bleu=True)
    assert plain == 5 * VALID_TOKEN_COST and with_bleu == 5 * (VALID_TOKEN_COST + BEAM_TOKEN_COST)
    # the same TIME fits fewer updates, and the time of those updates is longer
    assert updates_that_fit(1800, 1.0, 4000, 20000, bleu=True) < updates_that_fit(1800, 1.0, 4000, 20000)
    assert training_time(1000, 1.0, 4000, 20000, bleu=True) > training_time(1000, 1.0, 4000, 20000)
    assert training_time(updates_that_fit(1800, 1.0, 4000, 20000, bleu=True), 1.0, 4000, 20000, bleu=True) <= 1800


def test_the_whole_run_adds_the_data_the_translations_and_the_exports_to_training():
    translations = [Translation("the test set translated", 20000), Translation("the parent scored first", 20000)]
    found = whole_run(3600, 100_000, 1e-3, translations, exports=2, beam=4)
    data = 100_000 * DATA_SECONDS_A_PAIR + PROGRAM_START_SECONDS
    translating = 2 * seconds_translating(20000, 1e-3, 4)
    assert translating == 2 * (PROGRAM_START_SECONDS + 20000 * 1e-3 * BEAM_TOKEN_COST)
    assert found["seconds"] == int(3600 + data + PROGRAM_START_SECONDS + translating + 2 * (30 + PROGRAM_START_SECONDS))
    assert found["said"].startswith("the whole run about 64 min (")
    for part in ("data", "averaging 15 s", "the test set translated", "the parent scored first", "2 exports"):
        assert part in found["said"]
    # a wider beam costs in proportion; the data stages done, none
    assert seconds_translating(20000, 1e-3, 8) - PROGRAM_START_SECONDS == 2 * (translating / 2 - PROGRAM_START_SECONDS)
    assert "data" not in whole_run(3600, 100_000, 1e-3, [], 0, 4, data=False)["said"]


def test_validations_that_would_take_the_time_come_further_apart():
    """TIME=5m of a 2+2 x 256 model at 1.13 s an update of 2,048 tokens, a dev set of 19,306 target tokens translated
    for the dev BLEU at each validation (19 s each): the recipe's 20 would take 6 minutes, more than the time; five
    come instead, 23 updates apart, and 116 updates fit beside them. Without the BLEU (5 s each) the 20 would take 46%
    of the time: 10 come, 15 updates apart."""
    from recipes.planner.probe_arithmetic import LEAST_VALIDATIONS, validation_interval, validations

    interval = validation_interval(300, 1.13, 2048, 19306, bleu=True)
    fit = updates_that_fit(300, 1.13, 2048, 19306, interval, bleu=True)
    assert interval == 23 and fit == 116 and validations(fit, interval) == LEAST_VALIDATIONS
    assert updates_that_fit(300, 1.13, 2048, 19306, 0, bleu=True) < 20  # the recipe's own leave almost none
    assert validation_interval(300, 1.13, 2048, 19306) == 15
    assert validation_interval(300, 1.13, 2048, 1000) == 0  # a small dev set: the recipe's 20
    assert validation_interval(3600, 1.13, 2048, 19306, bleu=True) == 0  # an hour: the 20 take 11% of it
    assert validation_interval(100, 1.13, 2048, 10**6, bleu=True) == 0  # none fit at all: refused as such


def test_validations_spaced_for_the_time_still_come_five_times_where_a_cap_ends_the_run_sooner():
    """The same TIME=5m and dev set, where a fine-tuning's epochs stop it at 30 updates: 5 validations, 6 apart, not
    the time's 23 apart (one validation, nothing to choose the model by)."""
    from recipes.planner.speed.probing import Probe
    from recipes.planner.speed.time_budget import budget

    probe = Probe("vaswani_base", "", 8000, 2048)
    found = budget(
        probe, "5m", 30, 2048, 19306, bleu=True, speed=lambda p: {"seconds": 1.13, "said": "a figure"}, here=False
    )
    assert found["MAX_UPDATE"] == "30" and found["SAVE_INTERVAL_UPDATES"] == "6" and found["TIME_FILLS"] == "0"
    free = budget(
        probe, "5m", 0, 2048, 19306, bleu=True, speed=lambda p: {"seconds": 1.13, "said": "a figure"}, here=False
    )
    assert free["SAVE_INTERVAL_UPDATES"] == "23" and free["TIME_FILLS"] == "1"
