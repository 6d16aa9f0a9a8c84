"""preprocess.shards: round-robin shards of a line-aligned corpus, every pair once, sides in step."""

import pytest

from preprocess.shards import main, split


def corpus(tmp_path, en, de):
    (tmp_path / "train.sp.en").write_text("".join(f"{line}\n" for line in en), encoding="utf-8")
    (tmp_path / "train.sp.de").write_text("".join(f"{line}\n" for line in de), encoding="utf-8")
    return str(tmp_path / "train.sp")


def test_round_robin_keeps_every_pair_once_and_the_sides_aligned(tmp_path):
    prefix = corpus(tmp_path, [f"en {i}" for i in range(10)], [f"de {i}" for i in range(10)])
    assert split(prefix, ["en", "de"], 3, str(tmp_path / "shards")) == [4, 3, 3]
    for s in range(3):
        en = (tmp_path / "shards" / f"train.sp.shard{s}.en").read_text().splitlines()
        de = (tmp_path / "shards" / f"train.sp.shard{s}.de").read_text().splitlines()
        assert en == [f"en {i}" for i in range(s, 10, 3)] and de == [f"de {i}" for i in range(s, 10, 3)]
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == sorted(
        f"train.sp.shard{s}.{lang}" for s in range(3) for lang in ("en", "de")
    )


@pytest.mark.parametrize("en,de,shorter", [(5, 4, "de"), (4, 5, "en")])
def test_sides_of_different_lengths_name_the_files_and_leave_no_shard(tmp_path, en, de, shorter, capsys):
    prefix = corpus(tmp_path, [f"e{i}" for i in range(en)], [f"d{i}" for i in range(de)])
    assert (
        main(["split", "--prefix", prefix, "--langs", "en", "de", "--shards", "2", "--out", str(tmp_path / "s")]) == 2
    )
    err = capsys.readouterr().err
    assert f"train.sp.{shorter} has 4 lines and" in err and "must be line-aligned" in err
    assert list((tmp_path / "s").iterdir()) == []


def test_more_shards_than_pairs_is_refused(tmp_path):
    prefix = corpus(tmp_path, ["a", "b"], ["c", "d"])
    with pytest.raises(ValueError, match="2 lines: too few for 3 shards"):
        split(prefix, ["en", "de"], 3, str(tmp_path / "s"))
