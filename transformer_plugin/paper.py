"""The paper's training and decoding settings as fairseq flags: their one home.

The recipes (demo, WMT14, WSJ parsing) read them with this command, one flag per line; the tests and
benchmarks import the functions.

    python -m transformer_plugin.paper training --warmup-updates 4000 --label-smoothing 0.1
    python -m transformer_plugin.paper decoding --beam 4 --lenpen 0.6 --max-len-b 50

The model's settings (N, d_model, d_ff, h, d_k, d_v, P_drop, Table 3) are the architectures'
defaults in models/vaswani_transformer.py; the batch size (Section 5.1) is planned per machine by
recipes/lib.sh (plan_batch).
"""

import argparse
import sys
from typing import List

WARMUP_STEPS = 4000  # Eq. (3)
LABEL_SMOOTHING = 0.1  # Section 5.4, eps_ls
BEAM, LENPEN, MAX_LEN_B = 4, 0.6, 50  # Section 6.1: beam 4, alpha 0.6, output length up to input + 50
PARSING_BEAM, PARSING_LENPEN, PARSING_MAX_LEN_B = 21, 0.3, 300  # Section 6.3


def training_flags(warmup_updates: int = WARMUP_STEPS, label_smoothing: float = LABEL_SMOOTHING) -> List[str]:
    """Section 5.3: Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9, the learning rate of Eq. (3)
    with warmup_steps = ``warmup_updates``; Section 5.4: label smoothing eps_ls = ``label_smoothing``.
    The schedule and the criterion are this plugin's. No gradient clipping: fairseq's default."""
    return ["--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-09",
            "--lr-scheduler", "vaswani_inverse_sqrt", "--warmup-updates", str(warmup_updates),
            "--criterion", "vaswani_label_smoothed_cross_entropy", "--label-smoothing", str(label_smoothing)]  # fmt: skip


def decoding_flags(beam: int = BEAM, lenpen: float = LENPEN, max_len_b: int = MAX_LEN_B) -> List[str]:
    """Section 6.1: beam search with beam size ``beam`` and length penalty alpha = ``lenpen``, the
    output at most ``max_len_b`` tokens longer than the input (Section 6.3 for parsing: 21, 0.3, 300)."""
    return ["--beam", str(beam), "--lenpen", str(lenpen), "--max-len-a", "1", "--max-len-b", str(max_len_b)]


def number(text: str) -> str:
    """A number, kept as written (so that the recipes' stamps see the flags as the user typed them)."""
    float(text)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Print the paper's fairseq flags, one per line.")
    sub = parser.add_subparsers(dest="which", required=True)
    training = sub.add_parser("training", help="fairseq-train flags of Section 5")
    training.add_argument("--warmup-updates", type=int, default=WARMUP_STEPS)
    training.add_argument("--label-smoothing", type=number, default=LABEL_SMOOTHING)
    decoding = sub.add_parser("decoding", help="fairseq-generate flags of Section 6")
    decoding.add_argument("--beam", type=int, default=BEAM)
    decoding.add_argument("--lenpen", type=number, default=LENPEN)
    decoding.add_argument("--max-len-b", type=int, default=MAX_LEN_B)
    a = parser.parse_args(argv)
    if a.which == "training":
        flags = training_flags(a.warmup_updates, a.label_smoothing)
    else:
        flags = decoding_flags(a.beam, a.lenpen, a.max_len_b)
    print("\n".join(flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
