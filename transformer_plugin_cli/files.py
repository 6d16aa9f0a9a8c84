"""Writing files so that a half-written one never appears under its final name.

Every tool and data preparation of this package writes through these: the content goes to
``NAME.tmp`` beside the final name and is renamed over it (``os.replace``, atomic on one file
system) only once complete; a failure removes the temporary file and leaves any earlier file as it
was. (fairseq's own checkpoint copies get the same treatment from the plugin's
``transformer_plugin/patches/atomic_checkpoint_copy.py``.)
"""

import contextlib
import errno
import functools
import json
import os
import shutil
import sys
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

TMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield the temporary name to write ``path``'s content under; rename it to ``path`` when the block
    succeeds, remove it when the block fails."""
    tmp = path + TMP_SUFFIX
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_text(path: str, text: str) -> None:
    """``text`` into ``path`` (UTF-8), atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_lines(path: str, lines: Iterable[str]) -> None:
    """``lines`` into ``path``, one per line (UTF-8), atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def write_json(path: str, obj, indent: int = 2) -> None:
    """``obj`` as JSON into ``path``, atomically."""
    write_text(path, json.dumps(obj, indent=indent) + "\n")


def save_torch(obj, path: str) -> None:
    """``torch.save(obj)`` into ``path``, atomically."""
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def publish(out: str, texts: Dict[str, List[str]], report: Dict, written: Sequence[str] = ()) -> None:
    """All of a preparation's outputs at once: each of ``texts`` ({name: lines}) and ``report`` (as
    report.json) written into ``out`` under their temporary names, then renamed together with
    ``written`` (names already written under their temporary names), the report last; so a
    preparation that fails leaves no output under a final name."""
    try:
        for name, lines in texts.items():
            with open(os.path.join(out, name + TMP_SUFFIX), "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
        with open(os.path.join(out, "report.json" + TMP_SUFFIX), "w") as f:
            json.dump(report, f, indent=2)
    except BaseException:  # a full disk, say: no temporary file stays behind
        for name in (*written, *texts, "report.json"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(out, name + TMP_SUFFIX))
        raise
    for name in (*written, *texts, "report.json"):
        os.replace(os.path.join(out, name + TMP_SUFFIX), os.path.join(out, name))


# ---- a full disk ---------------------------------------------------------------------------------------
# (size, duration and full_disk_error have a twin in the plugin, transformer_plugin/patches/_units.py, which
# imports nothing of this package; tests/unit/patches/test_units.py holds the two to the same answers)

FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def size(n: float) -> str:
    """Bytes for people: 1.4 GB, 312.0 MB."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000


def duration(seconds: float) -> str:
    """Seconds for people: '40 s', '27 min', '3.4 h', '2.1 days'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def full_disk_error(error: BaseException) -> Optional[OSError]:
    """The OSError of a full disk or quota behind ``error`` (torch.save raises a RuntimeError whose context
    is the OSError of the write), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in FULL_DISK:
            return error
        error = error.__cause__ or error.__context__
    return None


def exits_on_a_full_disk(main: Callable) -> Callable:
    """A tool's ``main`` that ends on a full disk (or quota) with one line, naming the file and the space
    free, instead of a traceback; the writers above have removed their temporary files by then."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except Exception as e:
            cause = full_disk_error(e)
            if cause is None:
                raise
            where = os.path.abspath(cause.filename or ".")
            existing = where
            while not os.path.exists(existing):
                existing = os.path.dirname(existing)
            free = shutil.disk_usage(existing).free
            sys.exit(
                f"{where}: {cause.strerror} ({free / 1e6:,.1f} MB free there): nothing was left half-written; make "
                "room and run the same command again"
            )

    return wrapper
