"""Eq. (3) written out as a lambda, against the schedule fairseq drives."""

import pytest
import torch
from fairseq.optim.adam import FairseqAdam, FairseqAdamConfig

from transformer_plugin.lr_scheduler.inverse_sqrt import (
    VaswaniInverseSqrtConfig,
    VaswaniInverseSqrtSchedule,
    paper_lrate,
)

eq3 = lambda step, d_model, warmup=4000: d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)  # noqa: E731


def schedule(d_model, warmup=4000, multiplier=1.0, peak_warmup=None):
    params = [torch.nn.Parameter(torch.zeros(2))]
    optimizer = FairseqAdam(FairseqAdamConfig(lr=[1.0], adam_betas="(0.9, 0.98)", adam_eps=1e-9, tpu=False), params)
    cfg = VaswaniInverseSqrtConfig(
        warmup_updates=warmup, d_model=d_model, lr_multiplier=multiplier, peak_warmup_updates=peak_warmup
    )
    return VaswaniInverseSqrtSchedule(cfg, optimizer), optimizer


@pytest.mark.parametrize("d_model", [512, 1024])
@pytest.mark.parametrize("step", [1, 100, 4000, 10000, 100000])
def test_update_k_uses_eq3_of_k(d_model, step):
    sched, optimizer = schedule(d_model)
    sched.step_update(step - 1)  # fairseq calls step_update(n) after n updates
    assert optimizer.get_lr() == pytest.approx(eq3(step, d_model), rel=1e-12)
    assert paper_lrate(step, d_model) == pytest.approx(eq3(step, d_model), rel=1e-12)


def test_first_update_and_peak():
    sched, optimizer = schedule(512)
    assert optimizer.get_lr() == pytest.approx(eq3(1, 512))  # set before the first update
    assert max(paper_lrate(s, 512) for s in range(1, 20000)) == pytest.approx(6.99e-4, rel=1e-3)
    assert paper_lrate(4000, 1024) == pytest.approx(4.94e-4, rel=1e-3)


def test_multiplier_scales_the_curve():
    sched, optimizer = schedule(512, warmup=100, multiplier=2.0)
    sched.step_update(49)
    assert optimizer.get_lr() == pytest.approx(2.0 * eq3(50, 512, 100))


@pytest.mark.parametrize("multiplier", [1.0, 0.5])
def test_peak_warmup_keeps_the_papers_peak_over_a_shorter_warmup(multiplier):
    """--peak-warmup-updates 4000 with --warmup-updates 200: linear to the peak of 4000 warm-up updates,
    reached at update 200, then decaying as step_num^-0.5; unset, Eq. (3) as written."""
    sched, optimizer = schedule(512, warmup=200, multiplier=multiplier, peak_warmup=4000)
    rates = {}
    for step in (1, 100, 200, 201, 800, 1200):
        sched.step_update(step - 1)
        rates[step] = optimizer.get_lr()
    assert rates[200] == pytest.approx(multiplier * eq3(4000, 512), rel=1e-12)  # 6.99e-4 times the multiplier
    assert rates[100] == pytest.approx(rates[200] / 2, rel=1e-12) and rates[1] == pytest.approx(rates[200] / 200)
    assert rates[800] == pytest.approx(rates[200] / 2, rel=1e-12)  # (800 / 200)^-0.5
    assert max(rates.values()) == rates[200]
    sched, optimizer = schedule(512, warmup=200, multiplier=multiplier)
    sched.step_update(199)
    assert optimizer.get_lr() == pytest.approx(multiplier * eq3(200, 512, 200))  # the paper's own peak for 200: higher


@pytest.mark.parametrize(
    "kwargs,flag",
    [
        (dict(d_model=None), "--d-model"),
        (dict(d_model=512, warmup=0), "--warmup-updates"),
        (dict(d_model=512, peak_warmup=0), "--peak-warmup-updates"),
    ],
)
def test_bad_configuration_names_the_flag(kwargs, flag):
    with pytest.raises(ValueError, match=flag):
        schedule(**kwargs)


def test_d_model_follows_the_models_in_a_hydra_config():
    """In a hydra config the schedule's d_model is the model's (model.d_model) unless given; a model
    without one stops with the key to set."""
    from omegaconf import OmegaConf

    params = [torch.nn.Parameter(torch.zeros(2))]
    optimizer = FairseqAdam(FairseqAdamConfig(lr=[1.0], adam_betas="(0.9, 0.98)", adam_eps=1e-9, tpu=False), params)
    lr_scheduler = OmegaConf.structured(VaswaniInverseSqrtConfig(warmup_updates=100))
    cfg = OmegaConf.create({"model": {"d_model": 256}, "lr_scheduler": lr_scheduler})
    assert VaswaniInverseSqrtSchedule(cfg.lr_scheduler, optimizer).d_model == 256
    cfg.lr_scheduler.d_model = 1024
    assert VaswaniInverseSqrtSchedule(cfg.lr_scheduler, optimizer).d_model == 1024
    cfg = OmegaConf.create({"model": {"encoder_embed_dim": 512}, "lr_scheduler": lr_scheduler})
    with pytest.raises(ValueError, match="lr_scheduler.d_model"):
        VaswaniInverseSqrtSchedule(cfg.lr_scheduler, optimizer)
