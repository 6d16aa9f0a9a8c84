"""transformer_plugin_cli/files.py: a file appears under its name only complete."""

import os

import pytest

from transformer_plugin_cli.files import atomic_path, publish, write_lines


def test_a_failed_write_leaves_the_earlier_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    write_lines(str(path), ["old"])
    with pytest.raises(RuntimeError):
        with atomic_path(str(path)) as tmp, open(tmp, "w") as f:
            f.write("half")
            raise RuntimeError("killed mid-write")
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]


def test_publish_renames_every_output_with_the_report_last(tmp_path, monkeypatch):
    (tmp_path / "big.bin.tmp").write_text("already written")
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (renamed.append(os.path.basename(b)), real_replace(a, b)))
    publish(str(tmp_path), {"train.en": ["a", "b"]}, {"pairs": 2}, written=["big.bin"])
    assert renamed == ["big.bin", "train.en", "report.json"]
    assert (tmp_path / "train.en").read_text() == "a\nb\n" and not list(tmp_path.glob("*.tmp"))
