"""English-German sentence pairs from the gettext catalogues that Debian packages ship: real text, offline.

Free software is translated by people, message by message, into gettext catalogues (``.mo`` files),
and Debian ships them inside its packages. ``prepare`` turns the German catalogues of a fixed list
of packages (the narrative of a game's campaigns, a strategy game's help, compiler and version
control messages, office, graphics and finance applications) into a parallel corpus:

1. fetch every package's ``.deb`` with ``apt-get download`` into ``--download-dir``, or take it from
   ``--debs DIR``; all packages that cannot be found are named in one message before any is read;
2. read the ``<lang>/LC_MESSAGES/*.mo`` members of each package (``dpkg-deb --fsys-tarfile``,
   Python's gettext parser): the English msgid and its translation; for plural messages the
   singular; message contexts are dropped. A package without such catalogues, a damaged ``.deb``
   and an unreadable catalogue are errors naming the file;
3. clean (the ``Gettext`` rules of preprocess/cleaning.py), counting every dropped pair by reason:
   untranslated (empty, or equal to the English), fewer than ``--min-words`` or more than ``--max-words``
   words on a side, a word-count ratio above ``--max-ratio``, and duplicates. Whitespace is collapsed
   (multi-line messages become one line), control characters are removed, and so are keyboard accelerator
   marks (LibreOffice's ``~``, and an ``_`` before a letter where a string has exactly one, as GTK's). Two
   messages whose English differs only in case and punctuation ("Open file" and "Open file...") are
   duplicates; the first translation met, in package order, is kept;
4. split by a hash of that case- and punctuation-free English: the ``--test`` and ``--valid`` pairs
   with the lowest hashes, then the rest for training. The split does not depend on the package
   order, and no English sentence (nor a variant of it) is in two splits.

Outputs in ``--out``: ``{train,valid,test}.{en,de}`` and ``report.json`` (counts per reason and per
package, each package's version and sha256). They appear only when every step succeeded, and a
re-run with the same packages and settings leaves them as they are.

The package names are Debian 12 (bookworm) ones (``packages`` lists them); on another release give
``--packages``.

    python -m preprocess.debian_l10n prepare --out data/debian_en_de [--debs DIR]
    python -m preprocess.debian_l10n packages
    python -m preprocess.debian_l10n toy-debs --out DIR     # small packages in the real layout, for tests
"""

import argparse
import gettext
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from preprocess import cleaning
from transformer_plugin_cli.console import console_script
from transformer_plugin_cli.files import publish

WESNOTH_CAMPAIGNS = "did dm dw ei httt l low nr sof sota sotbe thot trow tsg ttb utbs".split()
PACKAGES = [
    "wesnoth-1.16-data",
    *[f"wesnoth-1.16-{c}" for c in WESNOTH_CAMPAIGNS],  # campaign dialogue and help
    "freeciv-data",  # a strategy game's help: history, rules
    "gcc-12-locales",
    "git",
    "gnupg-l10n",
    "aptitude-common",
    "mc-data",  # tools' messages
    "libreoffice-l10n-de",
    "gnumeric-common",
    "lyx-common",
    "gnucash-common",
    "evolution-common",
    "pidgin-data",
    "inkscape",
    "gimp-data",
    "blender-data",
    "vlc-l10n",
    "grass-core",
]


class DataError(Exception):
    """A problem with a package or a catalogue; the message names the file."""


def fetch(packages: Sequence[str], download_dir: str, debs: Optional[str] = None, log=print) -> Dict[str, str]:
    """The ``.deb`` of every package: from ``debs`` if given, else downloaded (kept in ``download_dir``)."""
    found, missing = {}, []
    for package in packages:
        where = debs if debs is not None else download_dir
        matches = sorted(glob.glob(os.path.join(where, f"{package}_*.deb")))
        if len(matches) > 1:
            raise DataError(f"{len(matches)} files for package {package} in {where}: {', '.join(matches)}; keep one")
        if matches:
            found[package] = matches[0]
        elif debs is not None:
            missing.append(package)
    if missing:
        raise DataError(f"no .deb in {debs} for {len(missing)} of {len(packages)} packages: {' '.join(missing)}")
    todo = [p for p in packages if p not in found]
    if todo:
        if shutil.which("apt-get") is None:
            raise DataError(f"apt-get is not on PATH: download {' '.join(todo)} elsewhere and give --debs DIR")
        os.makedirs(download_dir, exist_ok=True)
        errors = []
        for package in todo:  # one at a time: apt-get download fetches nothing when one name is unknown
            log(f"apt-get download {package}")
            with tempfile.TemporaryDirectory(dir=download_dir) as tmp:  # no half-downloaded .deb under its name
                proc = subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True, text=True)
                downloaded = glob.glob(os.path.join(tmp, "*.deb"))
                if proc.returncode != 0 or len(downloaded) != 1:
                    errors.append(f"{package}: {(proc.stderr.strip().splitlines() or ['no .deb written'])[-1]}")
                    continue
                found[package] = os.path.join(download_dir, os.path.basename(downloaded[0]))
                os.replace(downloaded[0], found[package])
        if errors:
            raise DataError(
                f"apt-get download failed for {len(errors)} of {len(packages)} packages"
                " (names are Debian 12 ones: run apt-get update, or give --packages or --debs DIR):\n  "
                + "\n  ".join(errors)
            )
    return {p: found[p] for p in packages}


def catalogues(deb: str, lang: str) -> Iterator[Tuple[str, bytes]]:
    """(path, bytes) of every ``<lang>/LC_MESSAGES/*.mo`` regular file in the package ``deb``."""
    if shutil.which("dpkg-deb") is None:
        raise DataError("dpkg-deb is not on PATH (Debian's dpkg package); it reads the .deb files")
    pattern = re.compile(rf"(^|/){re.escape(lang)}/LC_MESSAGES/[^/]+\.mo$")
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE, stderr=stderr)
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    if member.isfile() and pattern.search(member.name):
                        yield member.name, tar.extractfile(member).read()
        except tarfile.TarError as e:
            proc.kill()
            proc.wait()
            raise DataError(f"{deb}: damaged package ({e})") from e
        finally:
            proc.stdout.close()
        if proc.wait() != 0:
            stderr.seek(0)
            raise DataError(f"{deb}: damaged package (dpkg-deb: {stderr.read().decode(errors='replace').strip()})")


def messages(data: bytes, name: str) -> Iterator[Tuple[str, str]]:
    """(English, translation) of every translated message of one ``.mo`` catalogue, in msgid order."""
    try:
        catalogue = gettext.GNUTranslations(io.BytesIO(data))._catalog
    except (OSError, UnicodeDecodeError, ValueError, IndexError) as e:
        raise DataError(f"{name}: not a readable gettext catalogue ({e})") from e
    for key, translation in sorted(catalogue.items(), key=lambda item: str(item[0])):
        if isinstance(key, tuple):  # plural message: (msgid, n); keep the singular
            if key[1] != 0:
                continue
            key = key[0]
        if key:  # msgid "" is the catalogue's header
            yield key.split("\x04")[-1], translation  # "context\x04msgid"


RULES = cleaning.Gettext  # this recipe's rule set (preprocess/cleaning.py)


def duplicate_key(english: str) -> str:
    """English without case and punctuation: messages that agree here are one sentence."""
    return " ".join(re.findall(r"\w+", english.lower()))


def split_of(keys: Sequence[str], valid: int, test: int) -> Dict[str, str]:
    """Each key's split: the ``test`` keys of lowest sha256, then ``valid``, then train."""
    if valid + test >= len(keys):
        raise DataError(f"only {len(keys)} pairs after cleaning: too few for {valid} valid and {test} test pairs")
    ranked = sorted(keys, key=lambda k: hashlib.sha256(k.encode("utf-8")).hexdigest())
    return {k: "test" if i < test else "valid" if i < test + valid else "train" for i, k in enumerate(ranked)}


def sha256sum(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def deb_version(deb: str) -> str:
    proc = subprocess.run(["dpkg-deb", "--field", deb, "Version"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise DataError(f"{deb}: damaged package (dpkg-deb: {proc.stderr.strip()})")
    return proc.stdout.strip()


def prepare(
    out: str,
    packages: Sequence[str] = PACKAGES,
    debs: Optional[str] = None,
    download_dir: Optional[str] = None,
    lang: str = "de",
    valid: int = 1000,
    test: int = 1500,
    min_words: int = 3,
    max_words: int = 80,
    max_ratio: float = 3.0,
    log=print,
) -> dict:
    """Fetch, read, clean and split (module docstring); returns the report."""
    settings = dict(
        packages=list(packages),
        lang=lang,
        valid=valid,
        test=test,
        min_words=min_words,
        max_words=max_words,
        max_ratio=max_ratio,
    )
    if len(set(packages)) != len(packages):
        raise DataError(f"a package is named twice in --packages: {' '.join(packages)}")
    files = fetch(packages, download_dir or os.path.join(out, "debs"), debs, log)
    identity = {
        p: {"file": os.path.basename(f), "version": deb_version(f), "sha256": sha256sum(f)} for p, f in files.items()
    }
    report_path = os.path.join(out, "report.json")
    if os.path.exists(report_path):
        with open(report_path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("settings") == settings and previous.get("packages") == identity:
            log(f"{out}: already prepared from the same packages and settings")
            return previous

    rules = RULES("en", lang, max_words, max_ratio, min_words)
    dropped, kept_per_package = Counter(), Counter()

    def count_dropped(reason: str) -> None:
        dropped[reason] += 1

    pairs: Dict[str, Tuple[str, str]] = {}  # duplicate key -> (en, de)
    for package, deb in files.items():
        count = 0
        for name, data in catalogues(deb, lang):
            count += 1
            for msgid, msgstr in messages(data, f"{deb}:{name}"):
                pair = rules.clean(msgid, msgstr, note=count_dropped)
                if pair is None:
                    continue
                key = duplicate_key(pair[0])
                if key in pairs:
                    count_dropped("duplicate")
                else:
                    pairs[key] = pair
                    kept_per_package[package] += 1
        if count == 0:
            raise DataError(f"{deb}: package {package} has no {lang}/LC_MESSAGES/*.mo catalogues")
        log(f"{package} {identity[package]['version']}: {count} catalogues, {kept_per_package[package]} pairs kept")

    splits = split_of(list(pairs), valid, test)
    os.makedirs(out, exist_ok=True)
    if os.path.exists(report_path):
        os.remove(report_path)  # outputs without their report are never taken for finished ones
    sizes, texts = {}, {}
    for split in ("train", "valid", "test"):
        chosen = [pairs[k] for k in pairs if splits[k] == split]
        texts[f"{split}.en"], texts[f"{split}.{lang}"] = [en for en, _ in chosen], [de for _, de in chosen]
        sizes[split] = len(chosen)
    report = {
        "settings": settings,
        "packages": identity,
        "pairs": sizes,
        "kept_per_package": dict(kept_per_package),
        "dropped": dict(sorted(dropped.items())),
    }
    publish(out, texts, report)
    log(f"{out}: train {sizes['train']}, valid {sizes['valid']}, test {sizes['test']} pairs; dropped {dict(dropped)}")
    return report


# ---- small packages in the real layout, for tests -------------------------------------------


def mo_bytes(entries: Sequence[Tuple[str, str]]) -> bytes:
    """A gettext ``.mo`` catalogue (little-endian, UTF-8) of (msgid, msgstr) entries; plural forms as
    "singular\\0plural", contexts as "context\\x04msgid", as GNU msgfmt writes them."""
    entries = sorted([("", "Content-Type: text/plain; charset=UTF-8\n"), *entries])
    ids = [e[0].encode("utf-8") for e in entries]
    strs = [e[1].encode("utf-8") for e in entries]
    n, header = len(entries), 28
    ids_start = header + 16 * n
    offsets, blob = [], b""
    for s in ids + strs:
        offsets.append((len(s), ids_start + len(blob)))
        blob += s + b"\0"
    table = b"".join(int(length).to_bytes(4, "little") + int(o).to_bytes(4, "little") for length, o in offsets)
    head = b"".join(int(x).to_bytes(4, "little") for x in (0x950412DE, 0, n, header, header + 8 * n, 0, 0))
    return head + table + blob


def build_deb(out_dir: str, package: str, files: Dict[str, bytes], version: str = "1.0-1") -> str:
    """``out_dir/<package>_<version>_all.deb`` holding ``files`` (path inside the package -> bytes)."""
    with tempfile.TemporaryDirectory() as root:
        for path, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "wb") as f:
                f.write(data)
        os.makedirs(os.path.join(root, "DEBIAN"))
        with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
            f.write(
                f"Package: {package}\nVersion: {version}\nArchitecture: all\nMaintainer: test <t@example.org>\n"
                f"Description: translations for tests\n"
            )
        deb = os.path.join(out_dir, f"{package}_{version}_all.deb")
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", root, deb], check=True, capture_output=True
        )
    return deb


def write_toy_debs(
    out: str, packages: Sequence[str] = ("toy-game-data", "toy-tool"), pairs_per_package: int = 60
) -> List[str]:
    """Small packages in the layout of the real ones: German catalogues beside other languages and files."""
    os.makedirs(out, exist_ok=True)
    made = []
    for p, package in enumerate(packages):
        entries = [
            (
                f"The {p} player number {i} opens the gate to the north",
                f"Der {p} Spieler Nummer {i} öffnet das Tor im Norden",
            )
            for i in range(pairs_per_package)
        ]
        files = {
            f"usr/share/locale/de/LC_MESSAGES/{package}.mo": mo_bytes(entries),
            f"usr/share/locale/fr/LC_MESSAGES/{package}.mo": mo_bytes([("Open the gate now", "Ouvrez la porte")]),
            f"usr/share/doc/{package}/copyright": b"public domain\n",
        }
        made.append(build_deb(out, package, files))
    return made


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="fetch the packages, read their catalogues, clean and split")
    p.add_argument("--out", required=True, help="directory for {train,valid,test}.{en,de} and report.json")
    p.add_argument("--debs", help="take the .deb files from here (<package>_<version>_<arch>.deb) instead of apt-get")
    p.add_argument("--download-dir", help="where apt-get download writes (default OUT/debs)")
    p.add_argument("--packages", nargs="+", default=PACKAGES, help="Debian packages to read (default: the list above)")
    p.add_argument("--lang", default="de", help="catalogue language, the target side")
    p.add_argument("--valid", type=int, default=1000, help="validation pairs")
    p.add_argument("--test", type=int, default=1500, help="test pairs")
    p.add_argument("--min-words", type=int, default=3)
    p.add_argument("--max-words", type=int, default=80)
    p.add_argument("--max-ratio", type=float, default=3.0, help="largest ratio of the two sides' word counts")
    sub.add_parser("packages", help="print the default package list")
    t = sub.add_parser("toy-debs", help="write small packages in the real layout (for tests)")
    t.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "packages":
        print("\n".join(PACKAGES))
        return 0
    if args.command == "toy-debs":
        for deb in write_toy_debs(args.out):
            print(deb)
        return 0
    try:
        prepare(
            args.out,
            args.packages,
            args.debs,
            args.download_dir,
            args.lang,
            args.valid,
            args.test,
            args.min_words,
            args.max_words,
            args.max_ratio,
        )
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
