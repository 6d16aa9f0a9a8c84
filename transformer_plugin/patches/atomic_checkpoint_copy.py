"""No half-written checkpoint under its final name.

fairseq's ``save_checkpoint`` writes the first checkpoint file atomically (a temporary file, then a
rename) but copies it to the others, among them ``checkpoint_last.pt``, with a plain copy: a crash
during that copy leaves a truncated ``checkpoint_last.pt``, the file a re-run resumes from. This
patch makes that copy atomic too, for local paths (remote paths keep fairseq's own handling).
"""

import os
import shutil

from fairseq import checkpoint_utils
from fairseq.file_io import PathManager

from ._patching import replace

UPSTREAM = None  # no upstream issue found
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


class AtomicCopyPathManager(PathManager):
    """fairseq's PathManager whose ``copy`` of local files goes through a temporary file and a rename."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if PathManager.path_requires_pathmanager(dst_path) or "://" in dst_path:
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        if not overwrite and os.path.exists(dst_path):
            return False
        tmp = dst_path + ".tmp"
        shutil.copyfile(src_path, tmp)
        os.replace(tmp, dst_path)
        return True


def apply() -> None:
    replace(checkpoint_utils, "PathManager", lambda original: AtomicCopyPathManager)
