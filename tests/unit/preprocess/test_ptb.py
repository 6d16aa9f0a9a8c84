"""preprocess/ptb.py: the WSJ trees read, cleaned, split and linearised (on the project's own small
treebank in the LDC layout), errors that name the file, all-or-nothing output, extra trees."""

from preprocess import ptb
from transformer_plugin_cli.parsing.trees import linearise


def test_prepare_splits_and_files(toy_gold):
    root, report, gold = toy_gold
    assert {k: v["sentences"] for k, v in report["splits"].items()} == {"train": 200, "valid": 10, "test": 10}
    out = root / "out"
    for split in ("train", "valid", "test"):
        words = (out / f"{split}.words").read_text().splitlines()
        trees = (out / f"{split}.trees").read_text().splitlines()
        assert len(words) == len(trees) and "-NONE-" not in (out / f"{split}.trees").read_text()
        assert "-SBJ" not in (out / f"{split}.trees").read_text()
    targets = (out / "test.trees").read_text().splitlines()
    assert [" ".join(linearise(t)) for t in gold] == targets
    assert [" ".join(t.words()) for t in gold] == (out / "test.words").read_text().splitlines()


def test_prepare_errors_name_the_problem(tmp_path, capsys):
    ptb.write_toy_treebank(str(tmp_path / "tb"), sentences_per_file=2, files_per_section=1)
    for f in (tmp_path / "tb" / "wsj" / "22").iterdir():
        f.unlink()
    assert ptb.main(["prepare", "--treebank", str(tmp_path / "tb"), "--out", str(tmp_path / "o")]) == 1
    assert "no wsj_*.mrg files for sections 22" in capsys.readouterr().err
    ptb.write_toy_treebank(str(tmp_path / "tb"), sentences_per_file=2, files_per_section=1)
    bad = tmp_path / "tb" / "wsj" / "05" / "wsj_0500.mrg"
    bad.write_text(bad.read_text() + "\n)\n")
    assert ptb.main(["prepare", "--treebank", str(tmp_path / "tb"), "--out", str(tmp_path / "o")]) == 1
    assert f"{bad}:" in capsys.readouterr().err
    bad.write_bytes(b"( (S (NN caf\xe9)) )\n")  # Latin-1, not UTF-8
    assert ptb.main(["prepare", "--treebank", str(tmp_path / "tb"), "--out", str(tmp_path / "o")]) == 1
    assert f"{bad}: not UTF-8 text" in capsys.readouterr().err


def test_prepare_writes_all_or_nothing(tmp_path, capsys):
    """A split that fails after others were read, or a missing extra-trees file, leaves no output at all."""
    ptb.write_toy_treebank(str(tmp_path / "tb"), sentences_per_file=2, files_per_section=1)
    bad = tmp_path / "tb" / "wsj" / "23" / "wsj_2300.mrg"  # the test split comes last
    bad.write_text(bad.read_text() + "\n)\n")
    assert ptb.main(["prepare", "--treebank", str(tmp_path / "tb"), "--out", str(tmp_path / "o")]) == 1
    assert f"{bad}:" in capsys.readouterr().err and not (tmp_path / "o").exists()
    ptb.write_toy_treebank(str(tmp_path / "tb"), sentences_per_file=2, files_per_section=1)
    missing = [str(tmp_path / "a.trees"), str(tmp_path / "b.trees")]
    assert (
        ptb.main(
            ["prepare", "--treebank", str(tmp_path / "tb"), "--out", str(tmp_path / "o"), "--extra-trees", *missing]
        )
        == 1
    )
    assert f"extra trees file(s) do not exist: {', '.join(missing)}" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_extra_trees_for_the_semi_supervised_setting(tmp_path):
    ptb.write_toy_treebank(str(tmp_path / "tb"), sentences_per_file=2, files_per_section=1)
    extra = tmp_path / "berkeley.trees"
    extra.write_text("(S (NP (NNS dogs)) (VP (VBP bark)))\n\n(S (NP broken\n( (S (NN fine)) )\n")
    report = ptb.prepare(str(tmp_path / "tb"), str(tmp_path / "o"), [str(extra)], log=lambda *_: None)
    assert report["extra"][str(extra)] == {"sentences": 2, "left_out_unparsable_or_empty": 2}
    words = (tmp_path / "o" / "train.words").read_text().splitlines()
    assert len(words) == 40 + 2 and words[-2:] == ["dogs bark", "fine"]


# ---- repair ------------------------------------------------------------------------------------
