"""transformer_plugin_cli/paper.py: the paper's fairseq flags, with the plugin's defaults read from
transformer_plugin/config.py (their one home) and Adam's and beam search's from paper.py."""

import pytest

from transformer_plugin import config
from transformer_plugin_cli import paper


def flag(flags, name):
    return flags[flags.index(name) + 1]


def test_training_flags_take_the_plugins_defaults_from_its_config(monkeypatch):
    flags = paper.training_flags()
    assert flag(flags, "--warmup-updates") == "4000" and flag(flags, "--label-smoothing") == "0.1"  # Sections 5.3, 5.4
    assert flag(flags, "--adam-betas") == "(0.9, 0.98)" and flag(flags, "--adam-eps") == "1e-09"
    monkeypatch.setattr(config.VaswaniInverseSqrtConfig, "warmup_updates", 123)
    monkeypatch.setattr(config.VaswaniLabelSmoothedCrossEntropyConfig, "label_smoothing", 0.25)
    flags = paper.training_flags()
    assert flag(flags, "--warmup-updates") == "123" and flag(flags, "--label-smoothing") == "0.25"
    assert flag(paper.training_flags(warmup_updates=7), "--warmup-updates") == "7"


@pytest.mark.parametrize("argv, expected", [
    (["decoding"], ["--beam", "4", "--lenpen", "0.6", "--max-len-a", "1", "--max-len-b", "50"]),  # Section 6.1
    (["decoding", "--parsing"], ["--beam", "21", "--lenpen", "0.3", "--max-len-a", "1", "--max-len-b", "300"]),  # 6.3
    (["decoding", "--parsing", "--beam", "5"], ["--beam", "5", "--lenpen", "0.3", "--max-len-a", "1", "--max-len-b", "300"]),
])  # fmt: skip
def test_decoding_flags(argv, expected, capsys):
    assert paper.main(argv) == 0
    assert capsys.readouterr().out.split() == expected

