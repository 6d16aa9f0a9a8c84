"""What the patches say to people: bytes and seconds in words, and the OSError of a full disk behind an error.

The plugin's own copy, so that ``transformer_plugin/`` copied alone still loads with ``--user-dir``: the tools
package has the same three in ``transformer_plugin_cli/files.py`` (the tools start without fairseq, which any
import of this package brings), and tests/unit/patches/test_units.py holds the two copies to the same answers.
"""

import errno
from typing import Optional

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
