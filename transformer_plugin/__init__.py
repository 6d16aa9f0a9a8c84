"""transformer_plugin: "Attention Is All You Need" (Vaswani et al., 2017) as a fairseq --user-dir plugin.

What ``--user-dir`` loads, and nothing else. Importing this package registers in fairseq's registries
- model ``vaswani_transformer`` and its architectures (models/vaswani_transformer.py; their defaults
  in config.py);
- criterion ``vaswani_label_smoothed_cross_entropy`` (criterions/label_smoothed_cross_entropy.py);
- lr scheduler ``vaswani_inverse_sqrt``, Eq. (3) (lr_scheduler/inverse_sqrt.py);
and applies the plugin's patches to fairseq (``patches/``, one module per fairseq defect, each naming
its upstream issue; listed once in the log). The paper's modules are in ``modules/``.

The tools (averaging, scoring, reports, Table 3, exports, parsing, data preparation) are the sibling
package ``transformer_plugin_cli``, installed as ``vaswani-*`` console scripts.
"""

__version__ = "0.1.0"


def register() -> None:
    """Register the plugin's parts with fairseq and apply its patches to fairseq. Runs when the package
    is imported; later calls do nothing new (fairseq's registries and the patches refuse doubles)."""
    from . import patches

    patches.apply_all()  # first: before fairseq loads any checkpoint
    from .criterions import label_smoothed_cross_entropy  # noqa: F401
    from .lr_scheduler import inverse_sqrt  # noqa: F401
    from .models import vaswani_transformer  # noqa: F401


register()
