"""recipes/planner/finetuning.py: INIT='s batch, rate and length from the practice of fine-tuning OPUS-MT models, and
its small corpora (a few hundred pairs, a dev set and a test set of 200 held out, the best checkpoint by dev BLEU)."""

import pytest

from recipes.planner import finetuning
from transformer_plugin_cli.tools.report import scheduled_rate


@pytest.mark.parametrize("pairs", [500, 2_000, 10_000, 100_000, 5_000_000])
@pytest.mark.parametrize("budget", [{}, {"max_update": 300}, {"updates_that_fit": 4_000}])
def test_every_corpus_and_budget_gets_a_ramp_inside_its_updates_and_one_line(pairs, budget):
    found = finetuning.decide(pairs, pairs * 24, **budget)
    assert 1 <= found.warmup <= max(1, found.max_update // 10) and found.warmup <= finetuning.MAX_WARMUP
    assert finetuning.MIN_TOKENS <= found.tokens_per_update <= finetuning.MAX_TOKENS
    assert found.peak_rate == 3e-4
    assert found.by_bleu == (pairs < 10_000) and found.patience == (10 if found.by_bleu else 0)
    assert len("picked: " + found.picked_line()) < 120, found.picked_line()


def test_with_no_budget_the_length_is_epochs_of_the_corpus_and_a_budget_is_trained_as_given():
    """500 pairs of 24 target pieces: 64 sentences (1,536 tokens) an update, 8 updates an epoch, 10 epochs."""
    found = finetuning.decide(500, 500 * 24)
    assert (found.tokens_per_update, found.max_update, found.epochs, found.length_from) == (1536, 80, 10.0, "epochs")
    assert finetuning.decide(500, 500 * 24, max_update=300).max_update == 300
    timed = finetuning.decide(500, 500 * 24, updates_that_fit=1234)
    assert (timed.max_update, timed.warmup, timed.length_from) == (1234, 123, "TIME")
    assert finetuning.decide(5_000_000, 5_000_000 * 30, max_update=1_000_000).warmup == 16_000  # OPUS-MT's at most


def test_a_corpus_too_small_is_refused_naming_what_is_held_out_and_the_setting():
    assert finetuning.held_out(500, False, False) == {"valid": 200, "test": 200}
    assert finetuning.held_out(500, True, False) == {"valid": None, "test": 200}
    assert finetuning.held_out(1_000_000, False, False) == {"valid": 2000, "test": 2000}  # the from-scratch share
    finetuning.check_pairs(500, 400)  # 100 left: fine-tuned
    with pytest.raises(finetuning.FineTuningError, match=r"TRAIN has 450 lines, less the 400 held out .* under 100"):
        finetuning.check_pairs(450, 400)
    with pytest.raises(finetuning.FineTuningError, match=r"TRAIN has 90 lines: under 100 .*FINETUNE_MIN_PAIRS=100"):
        finetuning.check_pairs(90, 0)


def test_the_flags_are_fairseqs_inverse_sqrt_at_fine_tunings_peak_and_the_report_draws_what_fairseq_sets():
    found = finetuning.decide(500, 500 * 24, max_update=300)
    flags = " ".join(found.training_flags())
    assert "--lr-scheduler inverse_sqrt --lr 0.0003 --warmup-updates 30 --warmup-init-lr 0" in flags
    assert "--adam-betas (0.9, 0.98)" in flags and "--label-smoothing 0.1" in flags  # the paper's Adam and smoothing
    schedule = {"kind": "inverse_sqrt", "peak": 3e-4, "warmup": 30, "start": 0.0}
    assert scheduled_rate(schedule, 15) == pytest.approx(1.5e-4)  # half-way up the ramp
    assert scheduled_rate(schedule, 30) == pytest.approx(3e-4)
    assert scheduled_rate(schedule, 120) == pytest.approx(1.5e-4)  # then sqrt(30 / 120) of the peak


def test_a_time_that_fits_less_than_an_epoch_on_cpu_is_refused_saying_what_an_epoch_takes():
    """NLLB's 600M on CPU workers: 30 s an update, TIME=1h fits about 113 updates of a corpus whose epoch is 2,084."""
    from recipes.planner.finetuning import FineTuningError, check_an_epoch, decide

    tuning = decide(20_000, 20_000 * 25, None, 113)
    with pytest.raises(FineTuningError) as e:
        check_an_epoch(tuning, 20_000 * 25, 30.0, "1h")
    epoch = -(-20_000 * 25 // tuning.tokens_per_update)
    assert (
        f"TIME=1h: 113 updates of 30.0 s fit on these CPU workers, less than one epoch of the corpus ({epoch:,}"
        in str(e.value)
    )
    assert "A GPU (GPUS=1), or a longer TIME" in str(e.value)
    check_an_epoch(decide(20_000, 20_000 * 25, None, epoch), 20_000 * 25, 30.0, "1d")  # an epoch fits: no error
