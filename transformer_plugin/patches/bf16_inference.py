"""``--bf16`` generates in bfloat16.

fairseq-generate and fairseq-interactive cast the model to float16 for ``--fp16`` but leave it in
float32 for ``--bf16``. Every fairseq model's ``prepare_for_inference_``, which they (and
``from_pretrained``) call on each loaded model, now casts it to bfloat16 when the configuration says
``bf16``. ``from_pretrained`` passes the checkpoint's own configuration, so a model trained with
``--bf16`` loads in bfloat16 unless ``bf16=False`` is given.
"""

import torch
from fairseq.models import BaseFairseqModel

from ._patching import replace

UPSTREAM = None  # no upstream issue found
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1"


def _cast_for_bf16(original):
    def prepare_for_inference_(self, cfg):
        original(self, cfg)
        if getattr(cfg.common, "bf16", False):
            self.to(torch.bfloat16)

    return prepare_for_inference_


def apply() -> None:
    replace(BaseFairseqModel, "prepare_for_inference_", _cast_for_bf16)
