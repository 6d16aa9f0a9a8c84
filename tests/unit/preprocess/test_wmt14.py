"""preprocess/wmt14.py offline: archives in the real WMT14 layouts, built here; cleaning counts; SGML;
downloads with resume from a local HTTP server; errors that name the file."""

import gzip
import hashlib
import http.server
import io
import json
import os
import tarfile
import threading

import pytest

from preprocess import wmt14

# The original inner names of the WMT14 archives, written out independently of preprocess/wmt14.py
EN_DE_MEMBERS = {
    "training-parallel-europarl-v7.tgz": ["training/europarl-v7.de-en.de", "training/europarl-v7.de-en.en"],
    "training-parallel-commoncrawl.tgz": ["commoncrawl.de-en.de", "commoncrawl.de-en.en"],
    "training-parallel-nc-v9.tgz": ["training/news-commentary-v9.de-en.de", "training/news-commentary-v9.de-en.en"],
    "test.tgz": ["test/newstest2013-src.de.sgm", "test/newstest2013-src.en.sgm"],
    "test-full.tgz": ["test-full/newstest2014-deen-ref.de.sgm", "test-full/newstest2014-deen-src.en.sgm"],
}


def members(path):
    with tarfile.open(path) as tar:
        return sorted(m.name for m in tar.getmembers())


def add_member(path, name, data: bytes):
    """Rewrite the archive at ``path`` with member ``name`` replaced by ``data``."""
    with tarfile.open(path) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    files[name] = data
    with tarfile.open(path, "w:gz" if path.endswith("gz") else "w") as tar:
        for member, content in files.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))


@pytest.fixture(scope="module")
def toy_en_de(tmp_path_factory):
    root = tmp_path_factory.mktemp("wmt14")
    wmt14.write_toy_archives(str(root / "archives"), "en-de", pairs_per_corpus=50, test=12)
    return root


def prepare(archives, out, **kw):
    kw.setdefault("ignore_pinned_md5", True)
    return wmt14.prepare("en-de", str(out), from_dir=str(archives), log=lambda *_: None, **kw)


def test_toy_archives_have_the_original_layout(toy_en_de):
    archives = toy_en_de / "archives"
    assert sorted(os.listdir(archives)) == sorted(EN_DE_MEMBERS)
    for name, expected in EN_DE_MEMBERS.items():
        assert members(archives / name) == expected


def test_prepare_from_directory(toy_en_de):
    out = toy_en_de / "prepared"
    report = prepare(toy_en_de / "archives", out)
    lines = {f: (out / f).read_text(encoding="utf-8").splitlines() for f in os.listdir(out) if "." in f}
    assert len(lines["train.en"]) == len(lines["train.de"]) == report["train_total"]["kept"] == 150
    assert [c["read"] for c in report["train"].values()] == [50, 50, 50]
    for split in ("valid", "test"):
        assert len(lines[f"{split}.en"]) == len(lines[f"{split}.de"]) == len(lines[f"{split}.ref.de"]) == 12
    # the test reference is the SGML text exactly; the source is what the first <seg> holds
    with tarfile.open(toy_en_de / "archives" / "test-full.tgz") as tar:
        sgml = tar.extractfile("test-full/newstest2014-deen-ref.de.sgm").read().decode()
    first = sgml.split('<seg id="1">')[1].split("</seg>")[0]
    assert lines["test.ref.de"][0] == first
    on_disk = json.loads((out / "report.json").read_text())
    md5 = hashlib.md5((toy_en_de / "archives" / "test.tgz").read_bytes()).hexdigest()
    assert on_disk["archives"]["test.tgz"]["md5"] == md5 and on_disk["archives"]["test.tgz"]["md5_pinned"]


def test_en_fr_layout_with_gzipped_giga_members(tmp_path):
    wmt14.write_toy_archives(str(tmp_path / "a"), "en-fr", pairs_per_corpus=20, test=5)
    assert members(tmp_path / "a" / "training-giga-fren.tar") == [
        "giga-fren.release2.fixed.en.gz",
        "giga-fren.release2.fixed.fr.gz",
    ]
    assert members(tmp_path / "a" / "training-parallel-un.tgz") == ["un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr"]
    report = wmt14.prepare(
        "en-fr", str(tmp_path / "out"), from_dir=str(tmp_path / "a"), ignore_pinned_md5=True, log=lambda *_: None
    )
    assert list(report["train"]) == ["europarl-v7", "commoncrawl", "un", "news-commentary-v9", "giga-fren"]
    assert report["train_total"]["kept"] == 100
    assert len((tmp_path / "out" / "test.ref.fr").read_text().splitlines()) == 5


def test_cleaning_counts_every_dropped_pair(tmp_path):
    wmt14.write_toy_archives(str(tmp_path / "a"), "en-de", pairs_per_corpus=5, test=3)
    en = [b"Good one.\n", b"\n", b"Bad \xff byte.\n", b"w " * 9 + b"\n", b"short\n", b"Windows line\r\n", b"Last.\n"]
    de = [
        b"Gut eins.\n",
        b"Leer?\n",
        b"Ok.\n",
        b"w\n",
        b"a b c\n",
        b"Windows Zeile\r\n",
        b"\xe2\x80\x9eLetzte\xe2\x80\x9c.\n",
    ]
    archive = str(tmp_path / "a" / "training-parallel-nc-v9.tgz")
    add_member(archive, "training/news-commentary-v9.de-en.en", b"".join(en))
    add_member(archive, "training/news-commentary-v9.de-en.de", b"".join(de))
    report = prepare(tmp_path / "a", tmp_path / "out", max_len=8, max_ratio=1.5)
    counts = report["train"]["news-commentary-v9"]
    assert counts == dict(read=7, kept=3, crlf=1, invalid_utf8=1, empty=1, too_long=1, ratio=1)
    kept = (tmp_path / "out" / "train.de").read_text(encoding="utf-8").splitlines()[-3:]
    assert kept == ["Gut eins.", "Windows Zeile", '"Letzte".']  # CR gone, „“ normalised


def test_normalisation():
    assert wmt14.RULES("en", "de").normalise("„Hallo“ ,  sagte\u00a0er\x07…", "de") == '"Hallo" , sagte er...'
    assert wmt14.RULES("en", "fr").normalise("l’eau  «x»", "fr") == 'l\'eau "x"'


def test_line_count_mismatch_names_both_files(toy_en_de, tmp_path, capsys):
    archives = tmp_path / "a"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=3)
    add_member(str(archives / "training-parallel-commoncrawl.tgz"), "commoncrawl.de-en.de", b"eins\nzwei\n")
    code = wmt14.main(
        [
            "prepare",
            "--pair",
            "en-de",
            "--out",
            str(tmp_path / "out"),
            "--from",
            str(archives),
            "--ignore-pinned-md5",
            "--workers",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "commoncrawl.de-en.de ends after 2 lines but" in err and "commoncrawl.de-en.en has more" in err
    assert not (tmp_path / "out" / "train.en").exists()  # nothing half-written under a final name


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage", "no member", "md5"])
def test_bad_archives_are_named(tmp_path, capsys, damage):
    archives = tmp_path / "a"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=3)
    name = "test.tgz" if damage == "md5" else "training-parallel-europarl-v7.tgz"
    path = archives / name
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "garbage":
        path.write_bytes(b"<html>404 Not Found</html>")
    elif damage == "no member":
        with tarfile.open(path, "w:gz") as tar:
            info = tarfile.TarInfo("training/europarl-v7.fr-en.en")
            tar.addfile(info, io.BytesIO(b""))
    args = ["prepare", "--pair", "en-de", "--out", str(tmp_path / "out"), "--from", str(archives), "--workers", "1"]
    code = wmt14.main(args + ([] if damage == "md5" else ["--ignore-pinned-md5"]))
    err = capsys.readouterr().err
    assert code == 1 and str(path) in err, err
    expected = {
        "missing": "is missing",
        "truncated": "damaged or truncated",
        "garbage": "damaged or truncated",
        "no member": "has no member training/europarl-v7.de-en.de",
        "md5": "has md5 48eca5d02f637af44e85186847141f67",
    }
    assert expected[damage] in err


def test_sgml_segments(tmp_path):
    path = tmp_path / "x.sgm"
    path.write_text(
        '<srcset setid="t" srclang="any">\n<doc docid="a" genre="news">\n<p>\n'
        '<seg id="1"> Ein  Satz &amp; mehr. </seg>\n</p>\n<seg id="2">Zwei</seg>\n</doc>\n</srcset>\n'
    )
    assert wmt14.read_sgml(str(path)) == ["Ein Satz &amp; mehr.", "Zwei"]  # as sacreBLEU extracts them
    path.write_bytes(b'<seg id="1">ok</seg>\n<seg id="2">Stra\xdfe</seg>\n')  # Latin-1
    with pytest.raises(wmt14.DataError, match="x.sgm:2: not UTF-8"):
        wmt14.read_sgml(str(path))
    path.write_text('<seg id="1">no end\n')
    with pytest.raises(wmt14.DataError, match="x.sgm:1: a <seg> line without </seg>"):
        wmt14.read_sgml(str(path))


# ---- downloads ---------------------------------------------------------------------------------

PAYLOAD = os.urandom(300_000)


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves PAYLOAD at /file; honours Range unless the server says not to; can cut a response short."""

    def do_GET(self):
        server = self.server
        server.requests.append(self.headers.get("Range"))
        if self.path != "/file":
            self.send_error(404)
            return
        start = 0
        if self.headers.get("Range") and server.ranges:
            start = int(self.headers["Range"].split("=")[1].split("-")[0])
            if start >= len(PAYLOAD):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        else:
            self.send_response(200)
        body = PAYLOAD[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.cut_after:  # send part of the body, then drop the connection
            self.wfile.write(body[: server.cut_after])
            server.cut_after = 0
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    httpd.requests, httpd.ranges, httpd.cut_after = [], True, 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()


def url(server, path="/file"):
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def test_download_resumes_a_partial_file(server, tmp_path):
    dest = tmp_path / "x.tgz"
    (tmp_path / "x.tgz.part").write_bytes(PAYLOAD[:100_000])
    wmt14.download(url(server), str(dest), log=lambda *_: None)
    assert dest.read_bytes() == PAYLOAD and not (tmp_path / "x.tgz.part").exists()
    assert server.requests == ["bytes=100000-"]


def test_download_restarts_when_the_server_ignores_ranges(server, tmp_path):
    server.ranges = False
    (tmp_path / "x.tgz.part").write_bytes(b"stale bytes from another file")
    wmt14.download(url(server), str(tmp_path / "x.tgz"), log=lambda *_: None)
    assert (tmp_path / "x.tgz").read_bytes() == PAYLOAD


def test_download_continues_after_a_dropped_connection(server, tmp_path):
    server.cut_after = 120_000
    wmt14.download(url(server), str(tmp_path / "x.tgz"), log=lambda *_: None)
    assert (tmp_path / "x.tgz").read_bytes() == PAYLOAD
    assert server.requests == [None, "bytes=120000-"]


def test_download_error_names_the_url(server, tmp_path):
    with pytest.raises(wmt14.DataError, match=r"http://127.0.0.1:\d+/missing: HTTP 404"):
        wmt14.download(url(server, "/missing"), str(tmp_path / "y.tgz"), log=lambda *_: None)
    assert not (tmp_path / "y.tgz").exists()


def test_prepare_downloads_into_the_download_dir(server, tmp_path, monkeypatch):
    """Without --from, every archive is fetched from its URL (here: a local server with toy archives)."""
    wmt14.write_toy_archives(str(tmp_path / "served"), "en-de", pairs_per_corpus=5, test=3)
    served = {name: (tmp_path / "served" / name).read_bytes() for name in EN_DE_MEMBERS}
    fetched = []

    def fake_download(source, dest, **kw):
        fetched.append(source)
        with open(dest, "wb") as f:
            f.write(served[os.path.basename(source)])

    monkeypatch.setattr(wmt14, "download", fake_download)
    report = wmt14.prepare("en-de", str(tmp_path / "out"), ignore_pinned_md5=True, log=lambda *_: None)
    assert sorted(fetched) == sorted(a.url for a in wmt14.archives_for("en-de"))
    assert all(u.startswith("https://www.statmt.org/") for u in fetched)
    assert report["archives"]["test.tgz"]["path"] == str(tmp_path / "out" / "archives" / "test.tgz")
    fetched.clear()
    wmt14.prepare("en-de", str(tmp_path / "out"), ignore_pinned_md5=True, log=lambda *_: None)
    assert fetched == []  # archives on disk are not downloaded again


def test_gzip_members_are_checked(tmp_path):
    """A corrupt .gz inside the giga tar is reported with the archive's name."""
    wmt14.write_toy_archives(str(tmp_path / "a"), "en-fr", pairs_per_corpus=5, test=3)
    tar_path = str(tmp_path / "a" / "training-giga-fren.tar")
    add_member(tar_path, "giga-fren.release2.fixed.en.gz", gzip.compress(b"x\n" * 100)[:-12])
    with pytest.raises(wmt14.DataError, match="training-giga-fren.tar: damaged or truncated"):
        wmt14.prepare(
            "en-fr", str(tmp_path / "out"), from_dir=str(tmp_path / "a"), ignore_pinned_md5=True, log=lambda *_: None
        )


# ---- re-runs, all archives up front, all-or-nothing outputs, dev.tgz ---------------------------


def read_member(path, name):
    with tarfile.open(path) as tar:
        return tar.extractfile(name).read()


def test_a_rerun_reads_a_damaged_or_replaced_archive_again(tmp_path, capsys):
    archives, out = tmp_path / "a", tmp_path / "out"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=3)
    prepare(archives, out)
    # a replaced test set: the new one is read, not the earlier extraction
    sgml = read_member(archives / "test-full.tgz", "test-full/newstest2014-deen-ref.de.sgm").decode()
    add_member(
        str(archives / "test-full.tgz"),
        "test-full/newstest2014-deen-ref.de.sgm",
        sgml.replace('<seg id="1">', '<seg id="1">Ersetzt ').encode(),
    )
    prepare(archives, out)
    assert (out / "test.ref.de").read_text(encoding="utf-8").startswith("Ersetzt ")
    # a truncated europarl after a good run: an error naming it, not the earlier extraction
    europarl = archives / "training-parallel-europarl-v7.tgz"
    europarl.write_bytes(europarl.read_bytes()[: europarl.stat().st_size // 2])
    args = [
        "prepare",
        "--pair",
        "en-de",
        "--out",
        str(out),
        "--from",
        str(archives),
        "--workers",
        "1",
        "--ignore-pinned-md5",
    ]
    assert wmt14.main(args) == 1
    assert f"{europarl}: damaged or truncated" in capsys.readouterr().err


def test_every_missing_or_empty_archive_is_named_before_any_work(tmp_path, capsys):
    archives, out = tmp_path / "a", tmp_path / "out"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=3)
    (archives / "training-parallel-commoncrawl.tgz").unlink()
    (archives / "test.tgz").unlink()
    (archives / "training-parallel-nc-v9.tgz").write_bytes(b"")
    args = [
        "prepare",
        "--pair",
        "en-de",
        "--out",
        str(out),
        "--from",
        str(archives),
        "--workers",
        "1",
        "--ignore-pinned-md5",
    ]
    assert wmt14.main(args) == 1
    err = capsys.readouterr().err
    assert "3 not there" in err
    assert f"{archives / 'training-parallel-commoncrawl.tgz'} is missing" in err
    assert f"{archives / 'test.tgz'} (or WMT14's dev.tgz) is missing" in err
    assert f"{archives / 'training-parallel-nc-v9.tgz'} is empty (0 bytes" in err
    assert not (out / "raw").exists() and not list(out.glob("train.*"))  # nothing extracted, nothing cleaned


def test_outputs_appear_only_when_everything_succeeded(tmp_path, capsys):
    archives, out = tmp_path / "a", tmp_path / "out"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=6)  # 3 documents of 2 segments
    sgml = read_member(archives / "test-full.tgz", "test-full/newstest2014-deen-ref.de.sgm").decode()
    dropped = sgml.replace(
        sgml[sgml.index('<seg id="2">') : sgml.index("</seg>", sgml.index('<seg id="2">')) + 7], "", 1
    )
    member = "test-full/newstest2014-deen-ref.de.sgm"
    add_member(str(archives / "test-full.tgz"), member, dropped.encode())
    args = [
        "prepare",
        "--pair",
        "en-de",
        "--out",
        str(out),
        "--from",
        str(archives),
        "--workers",
        "1",
        "--ignore-pinned-md5",
    ]
    assert wmt14.main(args) == 1
    err = capsys.readouterr().err
    assert "test set:" in err and "newstest2014-deen-src.en.sgm has 6 segments" in err
    assert "newstest2014-deen-ref.de.sgm has 5" in err
    assert "the first that differs is doc doc0 seg 2 in the first, doc doc2 seg 1 in the second" in err
    assert not [p.name for p in out.iterdir() if not p.name.endswith(".tmp") and p.name != "raw"]


def test_newstest2013_from_wmt14_dev_tgz(tmp_path):
    """WMT14's dev.tgz (newstest2013 as plain text) where --from has it instead of WMT13's test.tgz."""
    archives = tmp_path / "a"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=3)
    with_test_tgz = prepare(archives, tmp_path / "one")
    plain = {}
    for lang in ("en", "de"):
        sgm = tmp_path / f"newstest2013.{lang}.sgm"
        sgm.write_bytes(read_member(archives / "test.tgz", f"test/newstest2013-src.{lang}.sgm"))
        plain[lang] = "".join(segment + "\n" for segment in wmt14.read_sgml(str(sgm)))
    (archives / "test.tgz").unlink()
    with tarfile.open(archives / "dev.tgz", "w:gz") as tar:
        for lang, text in plain.items():
            info = tarfile.TarInfo(f"dev/newstest2013.{lang}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    report = prepare(archives, tmp_path / "two")
    assert report["valid"]["archive"] == "dev.tgz" and with_test_tgz["valid"]["archive"] == "test.tgz"
    for name in ("valid.en", "valid.de", "valid.ref.de"):
        assert (tmp_path / "two" / name).read_text() == (tmp_path / "one" / name).read_text()


def test_the_report_records_a_test_set_accepted_against_its_pinned_md5(tmp_path):
    archives = tmp_path / "a"
    wmt14.write_toy_archives(str(archives), "en-de", pairs_per_corpus=5, test=3)
    report = json.loads(json.dumps(prepare(archives, tmp_path / "out")))
    entry = report["archives"]["test.tgz"]
    assert entry["md5_pinned"] == "48eca5d02f637af44e85186847141f67" != entry["md5"]
    assert entry["md5_differs_from_pinned"] == "accepted with --ignore-pinned-md5"
    assert "md5_differs_from_pinned" not in report["archives"]["training-parallel-europarl-v7.tgz"]
