"""transformer_plugin_cli/paper.py: the paper's fairseq flags, with the plugin's defaults read from
transformer_plugin/config.py (their one home) and Adam's and beam search's from paper.py."""

import pytest

from transformer_plugin import config
from transformer_plugin_cli import paper


def flag(flags, name):
    return flags[flags.index(name) + 1]


def test_training_flags_take_the_plugins_defaults_from_its_config():
    flags = paper.training_flags()
    assert flag(flags, "--warmup-updates") == "4000" and flag(flags, "--label-smoothing") == "0.1"  # Sections 5.3, 5.4
    assert flag(flags, "--adam-betas") == "(0.9, 0.98)" and flag(flags, "--adam-eps") == "1e-09"
    assert flag(paper.training_flags(warmup_updates=7), "--warmup-updates") == "7"


def test_the_defaults_read_from_config_source_are_the_dataclasses():
    """paper.py reads config.py's source (no fairseq import); what it reads is what fairseq gets."""
    for dataclass in (config.VaswaniInverseSqrtConfig, config.VaswaniLabelSmoothedCrossEntropyConfig):
        for name in ("warmup_updates", "lr_multiplier", "label_smoothing", "report_accuracy"):
            if hasattr(dataclass, name):
                assert paper.plugin_default(dataclass.__name__, name) == getattr(dataclass, name)


def test_a_changed_default_in_config_reaches_the_flags(tmp_path, monkeypatch):
    source = open(config.__file__, encoding="utf-8").read()
    changed = source.replace("warmup_updates: int = field(default=4000", "warmup_updates: int = field(default=123")
    assert changed != source
    (tmp_path / "config.py").write_text(changed)
    real = paper.plugin_default
    monkeypatch.setattr(paper, "plugin_default", lambda cls, name: real(cls, name, str(tmp_path / "config.py")))
    assert flag(paper.training_flags(), "--warmup-updates") == "123"
    with pytest.raises(LookupError, match="no literal default for VaswaniInverseSqrtConfig.d_model"):
        real("VaswaniInverseSqrtConfig", "d_model")  # an interpolation, not a literal


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["decoding"], ["--beam", "4", "--lenpen", "0.6", "--max-len-a", "1", "--max-len-b", "50"]),  # Section 6.1
        (
            ["decoding", "--parsing"],
            ["--beam", "21", "--lenpen", "0.3", "--max-len-a", "1", "--max-len-b", "300"],
        ),  # 6.3
        (
            ["decoding", "--parsing", "--beam", "5"],
            ["--beam", "5", "--lenpen", "0.3", "--max-len-a", "1", "--max-len-b", "300"],
        ),
    ],
)
def test_decoding_flags(argv, expected, capsys):
    assert paper.main(argv) == 0
    assert capsys.readouterr().out.split() == expected
