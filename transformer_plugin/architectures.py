"""The model's sizes, once: the base model's (Table 3, row "base") and each architecture's overrides of them.

config.py's dataclass takes its defaults from ``BASE`` and registers ``ARCHITECTURES``; the recipes' space
estimate (recipes/engine/space.py) reads this file as it is, without fairseq (it runs at
every start of a recipe), so this module imports nothing.
"""

from typing import Dict

# Table 3, row "base": N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=d_model/h=64, P_drop=0.1 (65M parameters)
BASE: Dict[str, object] = dict(
    encoder_layers=6,
    decoder_layers=6,
    d_model=512,
    d_ff=2048,
    attention_heads=8,
    d_k=None,
    d_v=None,
    dropout=0.1,
    positional_encoding="sinusoidal",
    max_source_positions=1024,
    max_target_positions=1024,
)

ARCHITECTURES: Dict[str, Dict[str, object]] = {
    # Table 3, row "base": the dataclass's defaults (BASE)
    "vaswani_base": {},
    # Table 3, row "big": N=6, d_model=1024, d_ff=4096, h=16, d_k=d_v=64, P_drop=0.3 (213M params)
    "vaswani_big": dict(d_model=1024, d_ff=4096, attention_heads=16, dropout=0.3),
    # Section 6.1: the big model for English-French uses P_drop = 0.1 instead of 0.3
    "vaswani_big_en_fr": dict(d_model=1024, d_ff=4096, attention_heads=16, dropout=0.1),
    # Section 6.3: 4 layers, d_model = 1024, other settings from the base model (h = 8, d_ff = 2048)
    "vaswani_parsing": dict(encoder_layers=4, decoder_layers=4, d_model=1024),
    # Not in the paper: a small model for CPU demos and tests
    "vaswani_tiny": dict(encoder_layers=2, decoder_layers=2, d_model=64, d_ff=256, attention_heads=4),
}
