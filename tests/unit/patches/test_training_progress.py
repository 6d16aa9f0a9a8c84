"""transformer_plugin/patches/training_progress.py: the progress line of fairseq-train (the whole run through the
recipes: tests/integration/test_parallel_text_recipe.py)."""

import datetime
import json

import pytest

from transformer_plugin.patches.training_progress import MARGIN, duration, fitting, laid_out, line, validation_cost

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


def test_with_time_the_line_never_promises_past_the_deadline():
    # 500 of 1,572 in 19 minutes (2.28 s an update): 1,072 left would take 41 minutes, and TIME leaves 2
    text = line(500, 1572, 0.0, 0, 19 * 60, clock=NOON, deadline=120)
    assert text == "update 500 of about 552 (91%) | 19 min elapsed | about 2 min left, TIME ends it at 12:02"
    # within the deadline: the line as without one
    assert line(400, 1200, 0.0, 0, 27 * 60, clock=NOON, deadline=3600).endswith("about 54 min left, ends 12:54")
    # past it already: nothing left, and no end later than now
    assert line(500, 1572, 0.0, 0, 19 * 60, clock=NOON, deadline=-5).endswith("about 0 s left, TIME ends it at 12:00")


def test_a_run_slower_than_planned_replans_the_updates_that_fit():
    # 1,572 planned; 2.28 s an update here, 600 s left, a validation of 30 s every 100 updates: (600 - 30) / 2.58,
    # less the margin
    assert fitting(500, 1572, 1572, 2.28, 600, (30.0, 100)) == 500 + int(570 / 2.58 * (1 - MARGIN))
    assert fitting(500, 1572, 1572, 2.28, 600, (0.0, 0)) == 500 + int(600 / 2.28 * (1 - MARGIN))
    # within 20% of the plan: it holds (fairseq's --stop-time-hours still ends it on time)
    assert fitting(500, 600, 600, 0.5, 60, (0.0, 0)) is None
    # faster than planned: the plan's count holds
    assert fitting(500, 1572, 1572, 0.1, 3600, (0.0, 0)) is None
    # cut to 700 while the machine was busy, quiet again: back up, never past the plan's 1,572
    assert fitting(600, 700, 1572, 0.5, 3600, (0.0, 0)) == 1572
    assert fitting(600, 700, 1572, 0.5, 200, (0.0, 0)) == 600 + int(200 / 0.5 * (1 - MARGIN))
    # no time left: one more update, validated and saved
    assert fitting(500, 1572, 1572, 2.28, 0, (0.0, 0)) == 501


def test_a_run_that_would_pass_its_deadline_by_any_amount_replans():
    """fairseq's --stop-time-hours stops a run at the deadline and then validates it: a --max-update that fits all but
    a validation's time ends that validation past TIME (51 s with the dev BLEU on a loaded core), so it re-plans
    however small the shortfall; one that ends early by less than REPLAN holds."""
    # 1,000 planned; 900 fit by the deadline at 1 s an update and a 53 s last validation: 10% short, re-planned
    assert fitting(100, 1000, 1000, 1.0, 853, (53.0, 0)) == 100 + int(800 * (1 - MARGIN))
    # re-planned there, the next interval's noise (2% slower) leaves it
    assert fitting(200, 860, 1000, 1.02, 853 - 100, (53.0, 0)) is None


def test_the_next_validation_is_the_dearest_so_far_at_the_speed_now():
    # 17 s on a quiet core at 1 s an update; the core shared since, 2 s an update: 34 s
    assert validation_cost([(17.0, 1.0)], 2.0) == 34.0
    # the dearest: a later one, longer hypotheses, at the speed it was timed at
    assert validation_cost([(17.0, 1.0), (30.0, 2.0)], 2.0) == 34.0
    assert validation_cost([(17.0, 1.0), (40.0, 2.0)], 2.0) == 40.0
    # one timed before any interval was measured counts as it took; none yet: nothing
    assert validation_cost([(12.0, None)], 3.0) == 12.0 and validation_cost([], 1.0) == 0.0


def test_the_replan_lowers_max_update_says_so_and_records_it(tmp_path, caplog):
    from types import SimpleNamespace

    from transformer_plugin.patches import training_progress as tp

    cfg = SimpleNamespace(
        optimization=SimpleNamespace(max_update=1572, stop_time_hours=1200 / 3600),
        checkpoint=SimpleNamespace(save_interval_updates=100, save_dir=str(tmp_path)),
    )
    trainer = SimpleNamespace(cumulative_training_time=lambda: 1140.0)  # 19 minutes of 20 spent
    tp._run.clear()
    tp._run.update(cfg=cfg, trainer=trainer, is_master=True, max_update=1572, planned=1572)
    with caplog.at_level("INFO", logger="progress"):
        tp._measured(500, 2.28, tp._deadline(), 4000.0)
    assert cfg.optimization.max_update == 500 + int(60 / 2.28 * (1 - MARGIN)) == tp._run["max_update"]
    assert "time: re-planned at update 500: 2.28 s an update here, where --max-update 1,572 needed at most 0.763 s" in (
        caplog.text
    )
    record = json.loads((tmp_path / "time_budget.json").read_text())["replans"][0]
    assert record["max_update_planned"] == record["max_update_before"] == 1572
    assert record["max_update_now"] == cfg.optimization.max_update
    tp._run.clear()


def test_a_second_run_in_one_process_is_planned_afresh(data_bin, tmp_path):
    """Two fairseq-trains in one process (the tests, a notebook), both with TIME: the second's plan is its own
    --max-update, not what the first planned or measured."""
    import fairseq_cli.train  # noqa: F401  (the patch changes fairseq-train's module: loaded first, as there)
    from helpers import trained_updates

    from transformer_plugin.patches import training_progress

    training_progress.apply()

    def train(save_dir, updates):
        return trained_updates(
            data_bin, save_dir, "--log-interval", "1", "--max-update", str(updates), "--stop-time-hours", "1"
        )[0]

    assert train(tmp_path / "first", 2) == 2
    assert train(tmp_path / "second", 6) == 6


def test_a_replanned_run_lays_its_checkpoints_and_warm_up_over_its_new_length():
    from transformer_plugin.patches.training_progress import laid_out, schedule_for

    # the recipes' 20 checkpoints of 1,572 updates (every 78), cut to 510 at update 500: every 25, the warm-up over
    assert laid_out(1572) == 78 and schedule_for(500, 1572, 510, 78, 157) == (25, None)
    # cut at update 50, still warming up (157 of 1,572): the warm-up a third as long, as the run
    assert schedule_for(50, 1572, 510, 78, 157) == (25, round(157 * 510 / 1572))
    # cut at update 100 to a tenth: the warm-up ends at the next update, not behind the run
    assert schedule_for(100, 1572, 157, 78, 157) == (7, 101)
    # back up towards the plan; 1,000 updates apart at most; an interval given otherwise is kept
    assert schedule_for(600, 700, 1572, 35, 0) == (78, None)
    assert schedule_for(600, 100_000, 30_000, 1000, 0) == (1000, None)
    assert schedule_for(500, 1572, 510, 100, 0) == (100, None)


def test_the_warm_up_shortened_mid_run_is_the_schedule_of_the_new_length(tmp_path):
    """Eq. (3)'s schedule and fairseq's inverse_sqrt (fine-tuning's), cut during the warm-up: from the next update on,
    the rate is the one a run planned with the shorter warm-up would have."""
    from types import SimpleNamespace

    from fairseq.optim.lr_scheduler.inverse_square_root_schedule import (
        InverseSquareRootLRScheduleConfig,
        InverseSquareRootSchedule,
    )
    from omegaconf import OmegaConf

    from transformer_plugin.config import VaswaniInverseSqrtConfig
    from transformer_plugin.lr_scheduler.inverse_sqrt import VaswaniInverseSqrtSchedule
    from transformer_plugin.patches import training_progress as tp

    from fairseq.optim import FairseqOptimizer

    class Optimizer(FairseqOptimizer):  # what the schedules read and set: the rate
        def __init__(self):
            self.lr = 0.0

        def set_lr(self, lr):
            self.lr = lr

        def get_lr(self):
            return self.lr

    def scheduler(kind, warmup):
        if kind == "paper":
            cfg = OmegaConf.structured(VaswaniInverseSqrtConfig(warmup_updates=warmup, d_model=256))
            cfg.peak_warmup_updates = 4000
            return VaswaniInverseSqrtSchedule(cfg, Optimizer())
        cfg = OmegaConf.structured(
            InverseSquareRootLRScheduleConfig(warmup_updates=warmup, warmup_init_lr=0, lr=[3e-4])
        )
        return InverseSquareRootSchedule(cfg, Optimizer())

    for kind in ("paper", "fairseq"):
        running = scheduler(kind, 157)
        for n in range(1, 51):
            running.step_update(n)
        trainer = SimpleNamespace(lr_scheduler=running, get_num_updates=lambda: 50)
        cfg = SimpleNamespace(
            optimization=SimpleNamespace(max_update=1572, stop_time_hours=1200 / 3600),
            checkpoint=SimpleNamespace(save_interval_updates=78, save_dir=str(tmp_path)),
            lr_scheduler=running.cfg,
        )
        trainer.cumulative_training_time = lambda: 900.0
        tp._run.clear()
        tp._run.update(cfg=cfg, trainer=trainer, is_master=True, max_update=1572, planned=1572)
        tp._measured(50, 0.6, tp._deadline(), 4000.0)  # 300 s left at 0.6 s: 500 updates more
        fit = cfg.optimization.max_update
        assert fit == 50 + int(300 / 0.6 * (1 - MARGIN)) and cfg.checkpoint.save_interval_updates == fit // 20
        warmup = round(157 * fit / 1572)
        assert running.cfg.warmup_updates == warmup
        record = json.loads((tmp_path / "time_budget.json").read_text())["replans"][0]
        assert record["warmup_updates"] == [157, warmup] and record["save_interval_updates"] == [78, fit // 20]
        reference = scheduler(kind, warmup)
        for n in (51, warmup - 1, warmup, warmup + 1, 400):
            running.step_update(n)
            reference.step_update(n)
            assert running.optimizer.get_lr() == pytest.approx(reference.optimizer.get_lr(), rel=1e-12), (kind, n)
    tp._run.clear()


def test_where_the_time_alone_bounds_the_updates_a_faster_run_trains_more(tmp_path, monkeypatch):
    """TRANSFORMER_PLUGIN_TIME_FILLS=1 (the recipes' plan: no cap lower than the time): 103 updates planned at 1.13 s,
    the run measures 0.8 s and 4 s validations every 5 updates: more updates fit by the deadline, and --max-update
    rises to them; without it the plan's 103 hold."""
    from types import SimpleNamespace

    from transformer_plugin.patches import training_progress as tp

    assert fitting(20, 103, None, 0.8, 210, (4.0, 5)) == 20 + int(206 / 1.6 * (1 - MARGIN))
    assert fitting(20, 103, 103, 0.8, 210, (4.0, 5)) is None

    def replanned(fills):
        cfg = SimpleNamespace(
            optimization=SimpleNamespace(max_update=103, stop_time_hours=240 / 3600),
            checkpoint=SimpleNamespace(save_interval_updates=5, save_dir=str(tmp_path)),
            dataset=SimpleNamespace(validate_interval_updates=5),  # the recipes validate where they save
        )
        trainer = SimpleNamespace(cumulative_training_time=lambda: 30.0)
        tp._run.clear()
        tp._run.update(cfg=cfg, trainer=trainer, is_master=True, max_update=103, planned=103, validations=[(4.0, None)])
        monkeypatch.setenv("TRANSFORMER_PLUGIN_TIME_FILLS", fills)
        tp._measured(20, 0.8, tp._deadline(), 4000.0)
        tp._run.clear()
        return cfg

    cfg = replanned("1")
    assert 130 < cfg.optimization.max_update < 150 and cfg.checkpoint.save_interval_updates == laid_out(
        cfg.optimization.max_update
    )
    assert cfg.dataset.validate_interval_updates == cfg.checkpoint.save_interval_updates  # the validations follow
    assert replanned("0").optimization.max_update == 103
