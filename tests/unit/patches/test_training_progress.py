"""transformer_plugin/patches/training_progress.py: the progress line of fairseq-train (the whole run through the
recipes: tests/integration/test_parallel_text_recipe.py)."""

import datetime

from transformer_plugin.patches.training_progress import duration, line

NOON = datetime.datetime(2026, 11, 27, 12, 0)


def test_the_line_says_how_far_how_long_and_when_it_ends():
    # 400 of 1,200 updates, 27 minutes after it started at update 0: 54 minutes left
    assert (
        line(400, 1200, 0.0, 0, 27 * 60, clock=NOON)
        == "update 400 of 1,200 (33%) | 27 min elapsed | about 54 min left, ends 12:54"
    )


def test_a_resumed_run_is_timed_by_what_this_process_did():
    # resumed at update 1,000: 100 updates in 10 minutes, 1,100 left
    text = line(1100, 2200, 0.0, 1000, 600, {"loss": "5.234", "bleu": "14.1"}, clock=NOON)
    assert (
        text == "update 1,100 of 2,200 (50%) | 10 min elapsed | about 1.8 h left, ends 13:50 | "
        "valid loss 5.23 valid bleu 14.10"
    )


def test_an_end_on_another_day_names_the_day_and_the_last_update_has_none():
    assert "ends Sat 28 Nov 12:00" in line(100, 200, 0.0, 0, 86400, clock=NOON)
    assert line(200, 200, 0.0, 0, 3600, clock=NOON) == "update 200 of 200 (100%) | 60 min elapsed"


def test_durations_for_people():
    assert [duration(s) for s in (40, 27 * 60, 3.4 * 3600, 2.1 * 86400)] == ["40 s", "27 min", "3.4 h", "2.1 days"]
