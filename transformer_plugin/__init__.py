"""transformer_plugin: "Attention Is All You Need" (Vaswani et al., 2017) as a fairseq --user-dir plugin.

``register()`` puts in fairseq's registries:
- model ``vaswani_transformer`` and its architectures (models/vaswani_transformer.py);
- criterion ``vaswani_label_smoothed_cross_entropy`` (criterions/label_smoothed_cross_entropy.py);
- lr scheduler ``vaswani_inverse_sqrt``, Eq. (3) (lr_scheduler/inverse_sqrt.py);
and applies the plugin's patches to fairseq (``patches/``, one module per defect, listed once in the
log): among them, fairseq loads its own checkpoints under torch >= 2.6 through an exact allowlist,
keeps the last batch its batching drops, and copies checkpoints atomically.

It runs when this package is imported with fairseq already imported (``--user-dir``), or else right
after fairseq is first imported. So the package's tools that do not need fairseq
(``python -m transformer_plugin.evalb``, ``.trees``, ``.table3 rows``, ...) start without its
several seconds of imports, and anything that uses fairseq finds the plugin registered.
"""

import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"


def register() -> None:
    """Register the plugin's parts with fairseq and apply its fixes to fairseq (once; later calls do nothing)."""
    from . import patches

    patches.apply_all()  # first: before fairseq loads any checkpoint
    from .criterions import label_smoothed_cross_entropy  # noqa: F401
    from .lr_scheduler import inverse_sqrt  # noqa: F401
    from .models import vaswani_transformer  # noqa: F401


class _RegisterAfterFairseq(importlib.abc.MetaPathFinder):
    """An import hook that finds the ``fairseq`` package as the other finders do and calls register()
    as soon as fairseq's own ``__init__`` has run; it then removes itself."""

    def find_spec(self, name, path=None, target=None):
        if name != "fairseq":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def exec_then_register(module):
                exec_module(module)
                register()

            spec.loader.exec_module = exec_then_register
        return spec


if "fairseq" in sys.modules:
    register()
elif not any(isinstance(finder, _RegisterAfterFairseq) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterFairseq())
