"""transformer_plugin/patches/third_party_warnings.py: the warnings fairseq's calls raise in hydra and torch are
silenced, each by its message as those libraries word it; any other warning still shows."""

import warnings

import pytest

from transformer_plugin.patches import third_party_warnings

# as hydra-core 1.3.2 and torch 2.13.0 word them (copied from a fairseq-train and a fairseq-generate run)
RAISED = [
    (UserWarning, "hydra.experimental.initialize() is no longer experimental. Use hydra.initialize()"),
    (
        UserWarning,
        "\nThe version_base parameter is not specified.\nPlease specify a compatability version level, or None.\n",
    ),
    (UserWarning, "hydra.experimental.compose() is no longer experimental. Use hydra.compose()"),
    (
        UserWarning,
        "In 'config': Usage of deprecated keyword in package header '# @package _group_'.\nSee https://hydra.cc",
    ),
    (
        UserWarning,
        "\n'config' is validated against ConfigStore schema with the same name.\nThis behavior is deprecated",
    ),
    (UserWarning, "\nThe strict flag in the compose API is deprecated.\nSee https://hydra.cc/docs/1.2/upgrades"),
    (
        FutureWarning,
        "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
    ),
    (
        UserWarning,
        "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used.",
    ),
]


@pytest.mark.parametrize("category, message", RAISED)
def test_each_is_silenced(category, message):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        third_party_warnings.apply()
        warnings.warn(message, category)
    assert caught == []


def test_any_other_warning_still_shows():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        third_party_warnings.apply()
        warnings.warn("hydra.experimental.something_else() is deprecated", UserWarning)
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated", FutureWarning)
        warnings.warn("'pin_memory' argument is set as true but no accelerator is found", DeprecationWarning)
    assert len(caught) == 3
