"""The plugin's own sizes, durations and full-disk test (patches/_units.py) answer as the tools' do
(transformer_plugin_cli/files.py): one wording for both, though the plugin imports nothing of the tools."""

import errno

import pytest

from transformer_plugin.patches import _units
from transformer_plugin_cli import files


@pytest.mark.parametrize("n", [0, 999, 1000, 1_400_000, 312_000_000, 2.5e12, 7e15, -2048])
def test_size(n):
    assert _units.size(n) == files.size(n)


@pytest.mark.parametrize("seconds", [0, 40, 89.6, 90, 27 * 60, 89 * 60, 90 * 60, 3.4 * 3600, 48 * 3600, 2.1 * 86400])
def test_duration(seconds):
    assert _units.duration(seconds) == files.duration(seconds)


def test_full_disk_error():
    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise full
        except OSError as e:
            raise RuntimeError("torch.save failed") from e
    except RuntimeError as wrapped:
        assert _units.full_disk_error(wrapped) is full and files.full_disk_error(wrapped) is full
    other = OSError(errno.EACCES, "Permission denied")
    assert _units.full_disk_error(other) is None and files.full_disk_error(other) is None
    assert _units.FULL_DISK == files.FULL_DISK
