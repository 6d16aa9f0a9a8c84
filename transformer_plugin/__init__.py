"""transformer_plugin: "Attention Is All You Need" (Vaswani et al., 2017) as a fairseq --user-dir plugin.

Importing this package registers, in fairseq's registries:
- model ``vaswani_transformer`` and its architectures (models/vaswani_transformer.py);
- criterion ``vaswani_label_smoothed_cross_entropy`` (criterions/label_smoothed_cross_entropy.py);
- lr scheduler ``vaswani_inverse_sqrt``, Eq. (3) (lr_scheduler/inverse_sqrt.py);
and lets fairseq load its own checkpoints under torch >= 2.6 through an exact allowlist
(checkpoint_safety.py), keeps the last batch that fairseq's batching drops and copies checkpoints
atomically (fairseq_fixes.py).
"""

from . import checkpoint_safety  # noqa: F401  (first: before fairseq loads any checkpoint)
from . import fairseq_fixes  # noqa: F401  (keeps fairseq's dropped last batch; atomic checkpoint copies)
from .criterions import label_smoothed_cross_entropy  # noqa: F401
from .lr_scheduler import inverse_sqrt  # noqa: F401
from .models import vaswani_transformer  # noqa: F401

__version__ = "0.1.0"
