"""transformer_plugin/config.py is the one home of the plugin's defaults: the registered scheduler and
criterion take their dataclasses from it, and the scheduler's d_model is the model's by interpolation."""

from omegaconf import OmegaConf

from transformer_plugin import config


def test_the_scheduler_and_criterion_defaults_are_the_configs():
    from transformer_plugin.lr_scheduler.inverse_sqrt import VaswaniInverseSqrtSchedule, paper_lrate
    from transformer_plugin.criterions.label_smoothed_cross_entropy import VaswaniLabelSmoothedCrossEntropy

    assert VaswaniInverseSqrtSchedule.__dataclass is config.VaswaniInverseSqrtConfig
    assert VaswaniLabelSmoothedCrossEntropy.__dataclass is config.VaswaniLabelSmoothedCrossEntropyConfig
    assert paper_lrate(4000, 512) == paper_lrate(4000, 512, warmup_steps=config.VaswaniInverseSqrtConfig.warmup_updates)


def test_the_schedules_d_model_is_the_models():
    cfg = OmegaConf.create(
        {
            "model": OmegaConf.structured(config.VaswaniTransformerConfig(d_model=768)),
            "lr_scheduler": OmegaConf.structured(config.VaswaniInverseSqrtConfig),
        }
    )
    assert cfg.lr_scheduler.d_model == 768
