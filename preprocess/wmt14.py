"""WMT14 English-German and English-French as the paper used them (Section 5.1), ready for sentencepiece.

``prepare`` does, for ``--pair en-de`` or ``--pair en-fr``:

1. fetch the standard archives under their original names: downloaded with resume (a ``.part`` file
   and an HTTP range request), or taken from ``--from DIR`` for offline use, where every missing or
   empty archive is named in one message before anything is done. newstest2013 comes from WMT13's
   ``test.tgz``, or from WMT14's ``dev.tgz`` where ``--from`` has only that. Test and dev archives
   are checked against the md5 sums sacreBLEU publishes for them (``--ignore-pinned-md5`` accepts
   others and says so in the report); every archive is checked for completeness (HTTP length, gzip
   CRC, the expected members) and its md5 is written to the report;
2. extract the files each corpus needs (nothing else), every archive read to its end before any
   cleaning starts. An earlier extraction is reused only when made from an archive with the same md5,
   so a damaged, replaced or repaired archive is always read again;
3. clean the training corpora (the ``Moses`` rules of preprocess/cleaning.py), counting every dropped
   pair by reason: invalid UTF-8, an empty side, more than ``--max-len`` words on a side, a length ratio
   above ``--max-ratio`` (as Moses' clean-corpus-n). CRLF line ends are stripped and counted. Source and
   target files of different lengths are an error naming both files;
4. normalise punctuation and Unicode as is standard (Moses' normalize-punctuation via sacremoses,
   control characters removed, whitespace collapsed) on training and dev text and on the test source;
5. read dev (newstest2013) and test (newstest2014, the "full" release) from their SGML files as
   sacreBLEU does. The test references are kept exactly as released (``test.ref.<tgt>``), for
   detokenized sacreBLEU; normalised copies (``test.<tgt>``) are what fairseq binarizes.

Outputs in ``--out``: ``{train,valid,test}.{src,tgt}``, ``{valid,test}.ref.<tgt>`` and
``report.json`` with every count. They appear under their final names only when the whole
preparation succeeded (written under temporary names, renamed at the end, the report last).

    python -m preprocess.wmt14 prepare --pair en-de --out data/wmt14_en_de [--from ~/archives] [--workers 8]
    python -m preprocess.wmt14 urls --pair en-fr          # what would be downloaded, and from where
    python -m preprocess.wmt14 toy-archives --out DIR     # small archives in the real layouts, for a toy run
"""

import argparse
import contextlib
import gzip
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from preprocess import cleaning
from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import full_disk_error, publish, write_json


class DataError(Exception):
    """A problem with an archive or a corpus file; the message names the file."""


@dataclass(frozen=True)
class Archive:
    name: str  # the original file name, as on statmt.org and as expected in --from DIR
    url: str
    md5: Optional[str] = None  # pinned where a maintained registry publishes it (sacreBLEU's test sets)


ARCHIVES = {
    a.name: a
    for a in [
        Archive("training-parallel-europarl-v7.tgz", "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz"),
        Archive("training-parallel-commoncrawl.tgz", "https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz"),
        Archive("training-parallel-nc-v9.tgz", "https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz"),
        Archive("training-parallel-un.tgz", "https://www.statmt.org/wmt13/training-parallel-un.tgz"),
        Archive("training-giga-fren.tar", "https://www.statmt.org/wmt10/training-giga-fren.tar"),
        # md5 sums as in sacreBLEU's dataset registry (wmt13, wmt14/full)
        Archive("test.tgz", "https://www.statmt.org/wmt13/test.tgz", "48eca5d02f637af44e85186847141f67"),
        Archive("test-full.tgz", "https://www.statmt.org/wmt14/test-full.tgz", "a8cd784e006feb32ac6f3d9ec7eb389a"),
        # WMT14's own dev sets, which most users have (fairseq's prepare scripts fetch it): newstest2013
        # also as plain text, one segment a line; read when --from has it and not WMT13's test.tgz
        Archive("dev.tgz", "https://www.statmt.org/wmt14/dev.tgz"),
    ]
}


@dataclass(frozen=True)
class Corpus:
    name: str
    archive: str
    member: str  # path inside the archive, with {lang}; a ".gz" member is decompressed after extraction


# WMT14's constrained training data (Section 5.1: ~4.5M pairs En-De, ~36M En-Fr); dev newstest2013,
# test newstest2014 ("full": the complete test set released after the evaluation).
PAIRS = {
    "en-de": dict(
        train=[
            Corpus("europarl-v7", "training-parallel-europarl-v7.tgz", "training/europarl-v7.de-en.{lang}"),
            Corpus("commoncrawl", "training-parallel-commoncrawl.tgz", "commoncrawl.de-en.{lang}"),
            Corpus("news-commentary-v9", "training-parallel-nc-v9.tgz", "training/news-commentary-v9.de-en.{lang}"),
        ],
        valid=Corpus("newstest2013", "test.tgz", "test/newstest2013-src.{lang}.sgm"),
        test_src=Corpus("newstest2014", "test-full.tgz", "test-full/newstest2014-deen-src.{lang}.sgm"),
        test_ref=Corpus("newstest2014", "test-full.tgz", "test-full/newstest2014-deen-ref.{lang}.sgm"),
    ),
    "en-fr": dict(
        train=[
            Corpus("europarl-v7", "training-parallel-europarl-v7.tgz", "training/europarl-v7.fr-en.{lang}"),
            Corpus("commoncrawl", "training-parallel-commoncrawl.tgz", "commoncrawl.fr-en.{lang}"),
            Corpus("un", "training-parallel-un.tgz", "un/undoc.2000.fr-en.{lang}"),
            Corpus("news-commentary-v9", "training-parallel-nc-v9.tgz", "training/news-commentary-v9.fr-en.{lang}"),
            Corpus("giga-fren", "training-giga-fren.tar", "giga-fren.release2.fixed.{lang}.gz"),
        ],
        valid=Corpus("newstest2013", "test.tgz", "test/newstest2013-src.{lang}.sgm"),
        test_src=Corpus("newstest2014", "test-full.tgz", "test-full/newstest2014-fren-src.{lang}.sgm"),
        test_ref=Corpus("newstest2014", "test-full.tgz", "test-full/newstest2014-fren-ref.{lang}.sgm"),
    ),
}


DEV_TGZ_VALID = Corpus("newstest2013", "dev.tgz", "dev/newstest2013.{lang}")


def valid_corpus(pair: str, from_dir: Optional[str] = None) -> Corpus:
    """newstest2013 from WMT13's test.tgz, or from WMT14's dev.tgz where --from has only that."""

    def has(name: str) -> bool:
        return from_dir is not None and os.path.isfile(os.path.join(from_dir, name))

    return DEV_TGZ_VALID if has("dev.tgz") and not has("test.tgz") else PAIRS[pair]["valid"]


def archives_for(pair: str, from_dir: Optional[str] = None) -> List[Archive]:
    spec = PAIRS[pair]
    names = [c.archive for c in spec["train"]] + [valid_corpus(pair, from_dir).archive, spec["test_src"].archive]
    return [ARCHIVES[n] for n in dict.fromkeys(names)]


# ---- 1. fetch and verify ----------------------------------------------------------------------


def md5sum(path: str) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_md5(archive: Archive, path: str, ignore_pinned: bool = False, log=print) -> str:
    digest = md5sum(path)
    if archive.md5 and digest != archive.md5:
        message = f"{path}: md5 {digest} but {archive.url} has md5 {archive.md5} (a damaged or different file)"
        if not ignore_pinned:
            raise DataError(message)
        log(f"WARNING: {message}; going on because of --ignore-pinned-md5")
    return digest


def download(url: str, dest: str, attempts: int = 5, timeout: float = 60.0, log=print) -> None:
    """Download ``url`` to ``dest``, resuming ``dest.part`` with a range request after an interruption.

    ``dest`` appears only when the whole file arrived (the length the server announced).
    """
    part = dest + ".part"
    for attempt in range(1, attempts + 1):
        have = os.path.getsize(part) if os.path.exists(part) else 0
        request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if have and response.status == 206:
                    total = _total_from_content_range(response.headers.get("Content-Range"), url)
                    log(f"resuming {url} at byte {have:,} of {total:,}")
                    mode = "ab"
                else:  # 200: the server sends the whole file (no range support, or nothing to resume)
                    length = response.headers.get("Content-Length")
                    total = int(length) if length is not None else None
                    have, mode = 0, "wb"
                    log(f"downloading {url}" + (f" ({total:,} bytes)" if total else ""))
                with open(part, mode) as f:
                    shutil.copyfileobj(response, f, 1 << 20)
        except urllib.error.HTTPError as e:
            if e.code == 416 and have:  # the range starts at or past the end: start again from zero
                os.remove(part)
                continue
            raise DataError(f"{url}: HTTP {e.code} {e.reason}") from e
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            if attempt == attempts:
                raise DataError(
                    f"{url}: download failed after {attempts} attempts ({e}); {part} is kept, run again to resume"
                ) from e
            log(f"{url}: {e}; retrying in {2**attempt} s")
            time.sleep(2**attempt)
            continue
        size = os.path.getsize(part)
        if total is None or size == total:
            os.replace(part, dest)
            return
        if attempt == attempts:
            raise DataError(f"{url}: got {size:,} of {total:,} bytes; {part} is kept, run again to resume")
        log(f"{url}: connection ended at byte {size:,} of {total:,}; resuming")


def _total_from_content_range(value: Optional[str], url: str) -> int:
    m = re.fullmatch(r"bytes \d+-\d+/(\d+)", (value or "").strip())
    if not m:
        raise DataError(f"{url}: partial response without a usable Content-Range ({value!r})")
    return int(m.group(1))


def fetch_all(archives: Sequence[Archive], download_dir: str, from_dir: Optional[str], log=print) -> Dict[str, str]:
    """Each archive's path on disk: from ``from_dir`` (offline) or downloaded into ``download_dir``.

    Every archive is looked at before any is used: all those missing or empty are named in one message.
    """
    paths, problems = {}, []
    for archive in archives:
        if from_dir is not None:
            path = os.path.join(from_dir, archive.name)
            if not os.path.isfile(path):
                alternative = " (or WMT14's dev.tgz)" if archive.name == "test.tgz" else ""
                problems.append(f"{path}{alternative} is missing (download it from {archive.url})")
            elif os.path.getsize(path) == 0:
                problems.append(f"{path} is empty (0 bytes; download it again from {archive.url})")
            paths[archive.name] = path
            continue
        path = os.path.join(download_dir, archive.name)
        if not os.path.isfile(path):
            os.makedirs(download_dir, exist_ok=True)
            download(archive.url, path, log=log)
        paths[archive.name] = path
    if problems:
        raise DataError(
            f"--from {from_dir} needs every archive under its original name; "
            f"{len(problems)} not there: " + "; ".join(problems)
        )
    return paths


# ---- 2. extract --------------------------------------------------------------------------------


def extract(archive_path: str, members: Sequence[str], raw_dir: str, md5: str) -> Dict[str, str]:
    """Extract ``members`` (decompressing ``.gz`` members) into ``raw_dir``; returns member -> file.

    Reading the archive to its end checks every gzip CRC; a damaged or truncated archive or a missing
    member is a DataError naming the archive. An earlier extraction is reused only when it was made
    from an archive with the same ``md5`` and the same members (``raw_dir/extracted.json``), so a
    replaced or repaired archive is always read again.
    """
    wanted = set(members)
    out = {m: os.path.join(raw_dir, os.path.basename(m[:-3] if m.endswith(".gz") else m)) for m in members}
    stamp = os.path.join(raw_dir, "extracted.json")
    made_from = {"archive": os.path.basename(archive_path), "md5": md5, "members": sorted(wanted)}
    if os.path.isfile(stamp) and all(os.path.isfile(p) for p in out.values()):
        with open(stamp) as f:
            if json.load(f) == made_from:
                return out
    os.makedirs(raw_dir, exist_ok=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    found = set()
    try:
        with tarfile.open(archive_path, "r:*") as tar:
            for info in tar:  # one pass over the whole archive, so that truncation is always noticed
                if info.name in wanted and info.isfile():
                    source = tar.extractfile(info)
                    if info.name.endswith(".gz"):
                        source = gzip.GzipFile(fileobj=source)
                    with source, open(out[info.name] + ".tmp", "wb") as f:
                        shutil.copyfileobj(source, f, 1 << 20)
                    found.add(info.name)
    except BaseException as e:
        for path in out.values():  # nothing half-extracted stays
            with contextlib.suppress(FileNotFoundError):
                os.remove(path + ".tmp")
        if (
            isinstance(e, (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError))
            and full_disk_error(e) is None
        ):
            raise DataError(f"{archive_path}: damaged or truncated archive ({type(e).__name__}: {e})") from e
        raise  # a full disk is not the archive's fault (exits_on_a_full_disk says so)
    missing = sorted(wanted - found)
    if missing:
        raise DataError(f"{archive_path}: has no member {', '.join(missing)} (is it the right archive?)")
    for m in members:
        os.replace(out[m] + ".tmp", out[m])
    write_json(stamp, made_from)
    return out


# ---- 3./4. clean and normalise: preprocess/cleaning.py's MOSES rules ---------------------------------------

RULES = cleaning.Moses  # this recipe's rule set


def _clean_chunk(job):
    """Each raw pair's (reason, None) where it is dropped, or (None, (source, target)) normalised."""
    pairs, rules = job
    cleaned = []
    for raw in pairs:
        try:
            texts = [line.rstrip(b"\n").rstrip(b"\r").decode("utf-8") for line in raw]
        except UnicodeDecodeError:
            cleaned.append(("invalid_utf8", None))
            continue
        reasons: List[str] = []
        kept = rules.clean(*texts, note=reasons.append)
        cleaned.append((reasons[-1] if kept is None else None, kept))
    return cleaned


def read_pairs(src_path: str, tgt_path: str, chunk: int = 2_000) -> Iterator[List[Tuple[bytes, bytes]]]:
    """Chunks of raw line pairs; a DataError naming both files when their line counts differ."""
    with open(src_path, "rb") as fs, open(tgt_path, "rb") as ft:
        n = 0
        while True:
            pairs = []
            for _ in range(chunk):
                s, t = fs.readline(), ft.readline()
                if not s and not t:
                    break
                if not s or not t:
                    longer, shorter = (tgt_path, src_path) if not s else (src_path, tgt_path)
                    raise DataError(
                        f"{shorter} ends after {n + len(pairs):,} lines but {longer} has more:"
                        " source and target must have one sentence per line, aligned"
                    )
                pairs.append((s, t))
            if not pairs:
                return
            n += len(pairs)
            yield pairs


def clean_corpus(
    src_path, tgt_path, out_src, out_tgt, rules: cleaning.Moses, max_pairs=None, pool=None
) -> Dict[str, int]:
    """Append the cleaned, normalised pairs of one corpus to the open files ``out_src``/``out_tgt``."""
    counts = dict(read=0, kept=0, crlf=0, **{r: 0 for r in RULES.reasons})

    def jobs():
        for pairs in read_pairs(src_path, tgt_path):
            if max_pairs is not None:
                pairs = pairs[: max(0, max_pairs - counts["read"])]
                if not pairs:
                    return
            counts["read"] += len(pairs)
            counts["crlf"] += sum(s.endswith(b"\r\n") or t.endswith(b"\r\n") for s, t in pairs)
            yield pairs, rules

    results = pool.imap(_clean_chunk, jobs()) if pool else map(_clean_chunk, jobs())
    for chunk in results:
        for reason, texts in chunk:
            if reason:
                counts[reason] += 1
            else:
                out_src.write(texts[0] + "\n")
                out_tgt.write(texts[1] + "\n")
                counts["kept"] += 1
    assert counts["kept"] + sum(counts[r] for r in RULES.reasons) == counts["read"]
    return counts


# ---- 5. SGML test sets -------------------------------------------------------------------------

_SEG = re.compile(r"<seg[^>]*>(.*)</seg>")


def read_sgml(path: str) -> List[str]:
    """The segments of a WMT "fake SGML" file in file order, as sacreBLEU extracts them."""
    segments = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{number}: not UTF-8 ({e.reason} at byte {e.start} of the line)") from e
            if line.startswith("<seg "):
                m = _SEG.search(line)
                if not m:
                    raise DataError(f"{path}:{number}: a <seg> line without </seg>")
                segments.append(re.sub(r"\s+", " ", m.group(1).strip()))
    if not segments:
        raise DataError(f"{path}: no <seg> lines; not a WMT SGML file")
    return segments


def segment_ids(path: str) -> List[str]:
    """Where each segment of ``path`` comes from: ``doc D seg S`` in SGML, ``line N`` in plain text."""
    if not path.endswith(".sgm"):
        with open(path, "rb") as f:
            return [f"line {n}" for n, _ in enumerate(f, 1)]
    ids, doc = [], "?"
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace")
            m = re.match(r"<doc\b[^>]*\bdocid=\"([^\"]*)\"", line)
            doc = m.group(1) if m else doc
            if line.startswith("<seg "):
                seg = re.search(r"\bid=\"?([^\"> ]*)", line)
                ids.append(f"doc {doc} seg {seg.group(1) if seg else '?'}")
    return ids


def read_segments(path: str) -> List[str]:
    """newstest segments from an SGML file, or from a plain-text one (WMT14's dev.tgz), in file order."""
    if path.endswith(".sgm"):
        return read_sgml(path)
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                lines.append(re.sub(r"\s+", " ", raw.decode("utf-8").strip()))
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{number}: not UTF-8 ({e.reason} at byte {e.start} of the line)") from e
    return lines


def _check_parallel(name: str, src_path: str, tgt_path: str, src: List[str], tgt: List[str]) -> None:
    if len(src) == len(tgt):
        return
    a, b = segment_ids(src_path), segment_ids(tgt_path)
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    first, second = (ids[i] if i < len(ids) else "the end of the file" for ids in (a, b))
    raise DataError(
        f"{name} set: {src_path} has {len(src)} segments but {tgt_path} has {len(tgt)};"
        f" the first that differs is {first} in the first, {second} in the second"
    )


# ---- the whole preparation ---------------------------------------------------------------------


def prepare(
    pair: str,
    out: str,
    from_dir: Optional[str] = None,
    download_dir: Optional[str] = None,
    max_len: int = 250,
    max_ratio: float = 1.5,
    max_pairs: Optional[int] = None,
    workers: int = 1,
    ignore_pinned_md5: bool = False,
    log=print,
) -> Dict:
    """The whole preparation (see the module doc). Every archive is found, verified and read to its
    end before any cleaning starts; the outputs appear under their final names only at the end."""
    if pair not in PAIRS:
        raise DataError(f"unknown pair {pair!r}; choose from {', '.join(PAIRS)}")
    spec = PAIRS[pair]
    valid = valid_corpus(pair, from_dir)
    src, tgt = pair.split("-")
    rules = RULES(src, tgt, max_len, max_ratio)
    raw = os.path.join(out, "raw")
    os.makedirs(out, exist_ok=True)
    report = {"pair": pair, "archives": {}, "train": {}, "max_len": max_len, "max_ratio": max_ratio}

    archives = archives_for(pair, from_dir)
    paths = fetch_all(archives, download_dir or os.path.join(out, "archives"), from_dir, log)
    for archive in archives:
        path = paths[archive.name]
        digest = _check_md5(archive, path, ignore_pinned_md5, log)
        report["archives"][archive.name] = {"path": os.path.abspath(path), "md5": digest, "md5_pinned": archive.md5}
        if archive.md5 and digest != archive.md5:
            report["archives"][archive.name]["md5_differs_from_pinned"] = "accepted with --ignore-pinned-md5"

    # every member of every archive, each archive read once to its end, before any cleaning
    wanted: Dict[str, List[str]] = {}
    for corpus, langs in [
        *((c, (src, tgt)) for c in spec["train"]),
        (valid, (src, tgt)),
        (spec["test_src"], (src,)),
        (spec["test_ref"], (tgt,)),
    ]:
        wanted.setdefault(corpus.archive, []).extend(corpus.member.format(lang=lang) for lang in langs)
    files: Dict[str, str] = {}
    for name, members in wanted.items():
        files.update(
            extract(paths[name], members, os.path.join(raw, name.split(".")[0]), report["archives"][name]["md5"])
        )

    def member_files(corpus: Corpus, langs):
        return [files[corpus.member.format(lang=lang)] for lang in langs]

    pool = multiprocessing.Pool(workers) if workers > 1 else None
    try:
        with (
            open(os.path.join(out, f"train.{src}.tmp"), "w", encoding="utf-8") as fs,
            open(os.path.join(out, f"train.{tgt}.tmp"), "w", encoding="utf-8") as ft,
        ):
            for corpus in spec["train"]:
                src_file, tgt_file = member_files(corpus, (src, tgt))
                counts = clean_corpus(src_file, tgt_file, fs, ft, rules, max_pairs, pool)
                report["train"][corpus.name] = counts
                dropped = ", ".join(f"{r} {counts[r]:,}" for r in RULES.reasons)
                log(
                    f"{corpus.name}: read {counts['read']:,} pairs, kept {counts['kept']:,}; dropped: {dropped};"
                    f" CRLF line ends stripped: {counts['crlf']:,}"
                )
    finally:
        if pool:
            pool.close()
            pool.join()
    totals = {k: sum(c[k] for c in report["train"].values()) for k in ("read", "kept", "crlf", *RULES.reasons)}
    report["train_total"] = totals

    valid_files = member_files(valid, (src, tgt))
    test_files = member_files(spec["test_src"], (src,)) + member_files(spec["test_ref"], (tgt,))
    valid_src, valid_tgt = (read_segments(f) for f in valid_files)
    test_src, test_ref = (read_segments(f) for f in test_files)
    _check_parallel("valid", *valid_files, valid_src, valid_tgt)
    _check_parallel("test", *test_files, test_src, test_ref)
    texts = {
        f"valid.{src}": [rules.normalise(s, src) for s in valid_src],
        f"valid.{tgt}": [rules.normalise(s, tgt) for s in valid_tgt],
        f"valid.ref.{tgt}": valid_tgt,
        f"test.{src}": [rules.normalise(s, src) for s in test_src],
        f"test.{tgt}": [rules.normalise(s, tgt) for s in test_ref],
        f"test.ref.{tgt}": test_ref,
    }
    report["valid"] = {"corpus": valid.name, "archive": valid.archive, "pairs": len(valid_src)}
    report["test"] = {"corpus": spec["test_src"].name, "pairs": len(test_src)}
    publish(out, texts, report, written=[f"train.{src}", f"train.{tgt}"])  # all made: now under their final names
    log(
        f"train: kept {totals['kept']:,} of {totals['read']:,} pairs"
        f" ({', '.join(f'{r} {totals[r]:,}' for r in RULES.reasons)} dropped);"
        f" valid {len(valid_src):,} ({valid.name}, {valid.archive}); test {len(test_src):,} ({spec['test_src'].name})"
    )
    return report


# ---- toy archives ------------------------------------------------------------------------------


def sgml(lines: Sequence[str], kind: str, setid: str, lang: str, docs: int = 3) -> str:
    """``lines`` as a WMT test set's SGML file holds them (``kind`` src or ref), in ``docs`` documents: what
    :func:`read_sgml` reads back; for the toy archives here and the benchmark's large ones."""
    head = {
        "src": f'<srcset setid="{setid}" srclang="any">',
        "ref": f'<refset setid="{setid}" srclang="any" trglang="{lang}">',
    }[kind]
    body, per_doc = [head], -(-len(lines) // docs)
    for d in range(0, len(lines), per_doc):
        body.append(f'<doc sysid="{kind}" docid="doc{d}" genre="news" origlang="en">')
        body += [f'<seg id="{i + 1}">{line}</seg>' for i, line in enumerate(lines[d : d + per_doc])]
        body.append("</doc>")
    body.append(f"</{kind}set>")
    return "\n".join(body) + "\n"


def write_toy_archives(out: str, pair: str = "en-de", pairs_per_corpus: int = 700, test: int = 60, seed: int = 1):
    """Small archives with the original names and inner layouts of ``pair``, filled with the synthetic
    language pair of :mod:`preprocess.synthetic_pair` (English-like source, made-up target, every fifth
    pair in quotes, typographic on the target side); every member the preparation reads is there.
    For trying a recipe offline and for the tests."""
    import io
    import random

    from .synthetic_pair import Grammar, make_lexicon

    rng = random.Random(seed)
    grammar = Grammar(make_lexicon(rng), rng)
    src, tgt = pair.split("-")
    spec = PAIRS[pair]
    files: Dict[str, Dict[str, bytes]] = {}

    def sample(n):  # every fifth pair quoted, German-style on the target side, as news text often is
        pairs = [grammar.sentence_pair() for _ in range(n)]
        return [(f'"{a}"', f"\u201e{b}\u201c") if i % 5 == 0 else (a, b) for i, (a, b) in enumerate(pairs)]

    for corpus in spec["train"]:
        lines = sample(pairs_per_corpus)
        for lang, side in ((src, 0), (tgt, 1)):
            data = "".join(p[side] + "\n" for p in lines).encode()
            member = corpus.member.format(lang=lang)
            files.setdefault(corpus.archive, {})[member] = (
                gzip.compress(data, mtime=0) if member.endswith(".gz") else data
            )
    dev, test_pairs = sample(test), sample(test)
    for corpus, kind, lang, lines in (
        (spec["valid"], "src", src, dev),
        (spec["valid"], "src", tgt, dev),
        (spec["test_src"], "src", src, test_pairs),
        (spec["test_ref"], "ref", tgt, test_pairs),
    ):
        side = 0 if lang == src else 1
        text = sgml([p[side] for p in lines], kind, corpus.name, lang)
        files.setdefault(corpus.archive, {})[corpus.member.format(lang=lang)] = text.encode()
    os.makedirs(out, exist_ok=True)
    for name, members in files.items():
        mode = "w:gz" if name.endswith(".tgz") else "w"
        with tarfile.open(os.path.join(out, name), mode) as tar:
            for member, data in sorted(members.items()):
                info = tarfile.TarInfo(member)
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))
    return sorted(files)


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="fetch, verify, extract, clean and normalise one language pair")
    p.add_argument("--pair", required=True, choices=sorted(PAIRS))
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--from", dest="from_dir", help="directory with the archives under their original names (offline)")
    p.add_argument("--download-dir", help="where downloads go (default OUT/archives)")
    p.add_argument("--max-len", type=int, default=250, help="drop pairs with more words on a side (Moses: 250)")
    p.add_argument("--max-ratio", type=float, default=1.5, help="drop pairs whose word-count ratio is higher")
    p.add_argument("--max-pairs", type=int, help="read at most this many pairs per corpus (toy runs)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for normalisation")
    p.add_argument(
        "--ignore-pinned-md5",
        action="store_true",
        help="warn instead of failing when a test archive differs from sacreBLEU's md5 (toy archives)",
    )
    u = sub.add_parser("urls", help="print the archives a pair needs: name, URL, pinned md5")
    u.add_argument("--pair", required=True, choices=sorted(PAIRS))
    t = sub.add_parser("toy-archives", help="write small archives in the real layouts (synthetic text)")
    t.add_argument("--out", required=True)
    t.add_argument("--pair", default="en-de", choices=sorted(PAIRS))
    t.add_argument("--pairs-per-corpus", type=int, default=700)
    t.add_argument("--test", type=int, default=60, help="sentences in the dev and in the test set")
    t.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            prepare(
                args.pair,
                args.out,
                args.from_dir,
                args.download_dir,
                args.max_len,
                args.max_ratio,
                args.max_pairs,
                args.workers,
                args.ignore_pinned_md5,
            )
        elif args.command == "urls":
            for a in archives_for(args.pair):  # the download default: WMT13's test.tgz for newstest2013
                print(f"{a.name}\t{a.url}\t{a.md5 or '-'}")
        else:
            for name in write_toy_archives(args.out, args.pair, args.pairs_per_corpus, args.test, args.seed):
                print(os.path.join(args.out, name))
    except DataError as e:
        print(f"wmt14: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
