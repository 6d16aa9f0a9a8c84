"""preprocess/debian_l10n.py offline: packages in the real Debian layout, built here with dpkg-deb;
cleaning counts; the split; apt-get replaced by a script on PATH; errors that name the file."""

import json
import os
import shutil
import stat
import subprocess

import pytest

from preprocess import debian_l10n as l10n

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (Debian's dpkg)")

GAME = [
    ("The dragon sleeps under the mountain", "Der Drache schläft unter dem Berg"),
    ("Open the ~gate to the north", "Öffne das ~Tor im Norden"),  # LibreOffice accelerator
    ("Save the _game before you leave", "Speichere das _Spiel, bevor du gehst"),  # GTK accelerator
    ("menu\x04Close all open windows now", "Alle offenen Fenster jetzt schließen"),  # with a context
    (
        "One arrow hits the target\x00%d arrows hit the target",
        "Ein Pfeil trifft das Ziel\x00%d Pfeile treffen das Ziel",
    ),
    ("A message that spans\ntwo lines of text", "Eine Meldung, die sich über\nzwei Zeilen erstreckt"),
    ("This one is not translated", ""),
    ("Same in both languages here", "Same in both languages here"),
    ("Too short", "Zu kurz"),
    ("one two three four five six seven eight nine ten", "eins zwei drei"),  # ratio 10/3
]
TOOL = [
    ("The dragon sleeps under the mountain!", "Der Drache ruht unter dem Berg!"),  # a duplicate of GAME's first
    ("could not open the file for reading", "konnte die Datei nicht zum Lesen öffnen"),
    *[(f"error number {i} in line {i + 1}", f"Fehler Nummer {i} in Zeile {i + 1}") for i in range(20)],
]


def make_debs(root, game=GAME, tool=TOOL):
    root.mkdir(exist_ok=True)
    l10n.build_deb(
        str(root),
        "game-data",
        {
            "usr/share/games/game/locale/de/LC_MESSAGES/game.mo": l10n.mo_bytes(game),
            "usr/share/games/game/locale/fr/LC_MESSAGES/game.mo": l10n.mo_bytes(
                [("The dragon sleeps under the mountain", "Le dragon dort")]
            ),
            "usr/share/doc/game-data/copyright": b"free\n",
        },
    )
    l10n.build_deb(str(root), "tool", {"usr/share/locale/de/LC_MESSAGES/tool.mo": l10n.mo_bytes(tool)})
    return root


def prepare(debs, out, **kw):
    kw.setdefault("packages", ["game-data", "tool"])
    kw.setdefault("valid", 3)
    kw.setdefault("test", 4)
    return l10n.prepare(str(out), debs=str(debs), log=lambda *_: None, **kw)


def read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def corpus(out):
    return {
        split: list(zip(read(out / f"{split}.en"), read(out / f"{split}.de"))) for split in ("train", "valid", "test")
    }


def test_mo_writer_is_read_by_gnu_gettext(tmp_path):
    """The test catalogues are real ones: GNU msgunfmt reads them back (where gettext is installed)."""
    if shutil.which("msgunfmt") is None:
        pytest.skip("msgunfmt (GNU gettext) not installed")
    path = tmp_path / "x.mo"
    path.write_bytes(l10n.mo_bytes(GAME[:5]))
    po = subprocess.run(["msgunfmt", str(path)], capture_output=True, text=True, check=True).stdout
    assert 'msgid "The dragon sleeps under the mountain"' in po
    assert 'msgctxt "menu"' in po and 'msgid_plural "%d arrows hit the target"' in po


def test_prepare_cleans_splits_and_reports(tmp_path):
    debs, out = make_debs(tmp_path / "debs"), tmp_path / "out"
    report = prepare(debs, out)
    pairs = corpus(out)
    everything = dict(pair for split in pairs.values() for pair in split)
    assert (
        everything["The dragon sleeps under the mountain"] == "Der Drache schläft unter dem Berg"
    )  # first package wins
    assert "The dragon sleeps under the mountain!" not in everything  # differs only in punctuation: a duplicate
    assert everything["Open the gate to the north"] == "Öffne das Tor im Norden"
    assert everything["Save the game before you leave"] == "Speichere das Spiel, bevor du gehst"
    assert everything["Close all open windows now"] == "Alle offenen Fenster jetzt schließen"
    assert everything["One arrow hits the target"] == "Ein Pfeil trifft das Ziel"
    assert everything["A message that spans two lines of text"] == "Eine Meldung, die sich über zwei Zeilen erstreckt"
    assert report["dropped"] == {"duplicate": 1, "length ratio": 1, "too short": 1, "untranslated": 2}
    assert report["pairs"] == {"train": len(everything) - 7, "valid": 3, "test": 4}
    assert report["kept_per_package"] == {"game-data": 6, "tool": 21}
    assert report["packages"]["tool"]["version"] == "1.0-1"
    assert len(report["packages"]["tool"]["sha256"]) == 64
    assert json.loads((out / "report.json").read_text()) == report
    assert not list(out.glob("*.tmp"))


def test_split_depends_on_the_sentences_not_the_package_order(tmp_path):
    debs = make_debs(tmp_path / "debs")
    prepare(debs, tmp_path / "a")
    prepare(debs, tmp_path / "b", packages=["tool", "game-data"])
    a, b = corpus(tmp_path / "a"), corpus(tmp_path / "b")
    for split in ("valid", "test"):
        assert {en for en, _ in a[split]} - {"The dragon sleeps under the mountain"} == {en for en, _ in b[split]} - {
            "The dragon sleeps under the mountain!"
        }
    train_a, test_a = {l10n.duplicate_key(en) for en, _ in a["train"]}, {l10n.duplicate_key(en) for en, _ in a["test"]}
    assert not train_a & test_a


def test_rerun_reuses_only_the_same_packages_and_settings(tmp_path):
    debs, out = make_debs(tmp_path / "debs"), tmp_path / "out"
    prepare(debs, out)
    before = (out / "train.en").stat().st_mtime_ns
    prepare(debs, out)
    assert (out / "train.en").stat().st_mtime_ns == before
    prepare(debs, out, valid=2)
    assert len(read(out / "valid.en")) == 2
    game = [*GAME, ("A brand new message in version two", "Eine ganz neue Meldung in Version zwei")]
    for deb in debs.iterdir():
        deb.unlink()
    make_debs(debs, game=game)  # a new version of the package, same name
    prepare(debs, out, valid=2)
    assert "A brand new message in version two" in {en for split in corpus(out).values() for en, _ in split}


def test_every_missing_package_is_named_at_once(tmp_path):
    debs = make_debs(tmp_path / "debs")
    with pytest.raises(l10n.DataError, match=r"2 of 4 packages: absent-one absent-two"):
        prepare(debs, tmp_path / "out", packages=["game-data", "absent-one", "tool", "absent-two"])
    assert not (tmp_path / "out").exists()


def test_damaged_package_is_named(tmp_path):
    debs, out = make_debs(tmp_path / "debs"), tmp_path / "out"
    deb = next(debs.glob("tool_*.deb"))
    deb.write_bytes(deb.read_bytes()[:-200])
    with pytest.raises(l10n.DataError, match=rf"{deb.name}: damaged package"):
        prepare(debs, out)
    assert not (out / "train.en").exists() and not (out / "report.json").exists()


def test_damaged_catalogue_is_named(tmp_path):
    debs = tmp_path / "debs"
    debs.mkdir()
    l10n.build_deb(str(debs), "game-data", {"usr/share/locale/de/LC_MESSAGES/game.mo": b"not a catalogue at all"})
    with pytest.raises(
        l10n.DataError, match=r"game-data_1.0-1_all.deb:.*de/LC_MESSAGES/game.mo: not a readable gettext"
    ):
        prepare(debs, tmp_path / "out", packages=["game-data"])


def test_package_without_catalogues_of_the_language_is_an_error(tmp_path):
    debs = make_debs(tmp_path / "debs")
    with pytest.raises(l10n.DataError, match=r"tool_1.0-1_all.deb: package tool has no fr/LC_MESSAGES/\*.mo"):
        prepare(debs, tmp_path / "out", packages=["game-data", "tool"], lang="fr")  # game-data has French


def test_too_few_pairs_for_the_splits(tmp_path):
    debs = make_debs(tmp_path / "debs")
    with pytest.raises(l10n.DataError, match=r"only 27 pairs after cleaning: too few for 20 valid and 10 test"):
        prepare(debs, tmp_path / "out", valid=20, test=10)


def fake_apt_get(tmp_path, debs, monkeypatch):
    """An ``apt-get download`` that copies from ``debs`` and fails, as apt-get does, on unknown names."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "apt-get"
    script.write_text(f"""#!/bin/sh
[ "$1" = download ] || exit 100
for f in {debs}/"$2"_*.deb; do
  [ -e "$f" ] || {{ echo "E: Unable to locate package $2" >&2; exit 100; }}
  cp "$f" .
done
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_download_with_apt_get_and_every_failure_at_once(tmp_path, monkeypatch):
    debs = make_debs(tmp_path / "debs")
    fake_apt_get(tmp_path, debs, monkeypatch)
    out, downloads = tmp_path / "out", tmp_path / "downloads"
    report = l10n.prepare(
        str(out), ["game-data", "tool"], download_dir=str(downloads), valid=3, test=4, log=lambda *_: None
    )
    assert sorted(os.listdir(downloads)) == ["game-data_1.0-1_all.deb", "tool_1.0-1_all.deb"]
    assert report["pairs"]["test"] == 4
    with pytest.raises(
        l10n.DataError,
        match=r"(?s)failed for 2 of 3 packages.*gone-a: E: Unable to locate package gone-a"
        r".*gone-b: E: Unable to locate package gone-b",
    ):
        l10n.prepare(
            str(tmp_path / "out2"), ["gone-a", "tool", "gone-b"], download_dir=str(downloads), log=lambda *_: None
        )
    assert sorted(os.listdir(downloads)) == ["game-data_1.0-1_all.deb", "tool_1.0-1_all.deb"]  # nothing half-written


def test_toy_debs_and_cli(tmp_path):
    debs = tmp_path / "debs"
    assert l10n.main(["toy-debs", "--out", str(debs)]) == 0
    out = tmp_path / "out"
    assert (
        l10n.main(
            [
                "prepare",
                "--out",
                str(out),
                "--debs",
                str(debs),
                "--packages",
                "toy-game-data",
                "toy-tool",
                "--valid",
                "10",
                "--test",
                "10",
            ]
        )
        == 0
    )
    assert len(read(out / "test.de")) == 10 and len(read(out / "train.en")) == 100
    assert l10n.main(["prepare", "--out", str(out), "--debs", str(debs), "--packages", "absent"]) == 1


def test_default_package_list_is_printed(capsys):
    assert l10n.main(["packages"]) == 0
    assert capsys.readouterr().out.split() == l10n.PACKAGES
