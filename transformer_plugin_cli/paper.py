"""The paper's training and decoding settings as fairseq flags, for the recipes, tests and benchmarks.

    vaswani-paper-flags training                          # Section 5.3-5.4
    vaswani-paper-flags training --warmup-updates 400     # a default changed
    vaswani-paper-flags decoding                          # Section 6.1
    vaswani-paper-flags decoding --parsing                # Section 6.3: beam 21, lenpen 0.3, input + 300

one flag per line. Defaults: warmup_steps and eps_ls are the plugin's own (transformer_plugin/config.py:
``VaswaniInverseSqrtConfig``, ``VaswaniLabelSmoothedCrossEntropyConfig``), read from there; Adam's and beam
search's are fairseq's flags, whose paper values live here and nowhere else (``ADAM_BETAS``, ``ADAM_EPS``,
``DECODING``, ``PARSING_DECODING``). The model's settings are the architectures' (config.py); the batch
size (Section 5.1) is planned per machine by the recipes' plan (recipes/planner/layout.py).

Nothing here imports fairseq (several seconds, and the recipes ask for these flags while they plan
every stage): the plugin's defaults are read from config.py's source (:func:`plugin_default`).
"""

import argparse
import ast
import importlib.util
import os
import sys
from typing import List, NamedTuple, Optional

from transformer_plugin_cli.console import console_script

ADAM_BETAS, ADAM_EPS = "(0.9, 0.98)", "1e-09"  # Section 5.3: beta_1, beta_2, epsilon


class Decoding(NamedTuple):
    """Beam search with ``beam`` hypotheses and length penalty alpha = ``lenpen``, the output at most
    ``max_len_b`` tokens longer than the input."""

    beam: int
    lenpen: float
    max_len_b: int


DECODING = Decoding(beam=4, lenpen=0.6, max_len_b=50)  # Section 6.1
PARSING_DECODING = Decoding(beam=21, lenpen=0.3, max_len_b=300)  # Section 6.3


def plugin_default(dataclass: str, name: str, config: Optional[str] = None):
    """The default of field ``name`` of ``dataclass`` in transformer_plugin/config.py (or ``config``),
    read from its source: ``name: type = field(default=LITERAL, ...)``. config.py cannot be imported
    without fairseq."""
    if config is None:
        spec = importlib.util.find_spec("transformer_plugin")  # finds the package without running it
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("the transformer_plugin package is not installed in this environment")
        config = os.path.join(list(spec.submodule_search_locations)[0], "config.py")
    with open(config, encoding="utf-8") as f:
        tree = ast.parse(f.read(), config)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == dataclass:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == name:
                    call = item.value
                    for keyword in getattr(call, "keywords", []):
                        if keyword.arg == "default":
                            try:
                                return ast.literal_eval(keyword.value)
                            except ValueError:
                                break  # not a literal (an interpolation, say)
    raise LookupError(f"{config}: no literal default for {dataclass}.{name}")


def training_flags(
    warmup_updates: Optional[int] = None, label_smoothing: Optional[float] = None, schedule: Optional[List[str]] = None
) -> List[str]:
    """Section 5.3: Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9, the learning rate of Eq. (3)
    with warmup_steps = ``warmup_updates``; Section 5.4: label smoothing eps_ls = ``label_smoothing``;
    None: the paper's (the plugin's defaults). The schedule and the criterion are the plugin's. No
    gradient clipping: fairseq's default. ``schedule``: another schedule's flags in place of Eq. (3)'s (a
    fine-tuning's, recipes/planner/finetuning.py)."""
    if warmup_updates is None:
        warmup_updates = plugin_default("VaswaniInverseSqrtConfig", "warmup_updates")
    if label_smoothing is None:
        label_smoothing = plugin_default("VaswaniLabelSmoothedCrossEntropyConfig", "label_smoothing")
    if schedule is None:
        schedule = ["--lr-scheduler", "vaswani_inverse_sqrt", "--warmup-updates", str(warmup_updates)]
    return [
        "--optimizer",
        "adam",
        "--adam-betas",
        ADAM_BETAS,
        "--adam-eps",
        ADAM_EPS,
        *schedule,
        "--criterion",
        "vaswani_label_smoothed_cross_entropy",
        "--label-smoothing",
        str(label_smoothing),
    ]


def decoding_flags(
    beam: Optional[int] = None,
    lenpen: Optional[float] = None,
    max_len_b: Optional[int] = None,
    settings: Decoding = DECODING,
) -> List[str]:
    """fairseq-generate's flags for ``settings`` (Section 6.1 by default), with any of them changed."""
    beam = settings.beam if beam is None else beam
    lenpen = settings.lenpen if lenpen is None else lenpen
    max_len_b = settings.max_len_b if max_len_b is None else max_len_b
    return ["--beam", str(beam), "--lenpen", str(lenpen), "--max-len-a", "1", "--max-len-b", str(max_len_b)]


def number(text: str) -> str:
    """A number, kept as written (so that the recipes' stamps see the flags as the user typed them)."""
    float(text)
    return text


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Print the paper's fairseq flags, one per line.")
    sub = parser.add_subparsers(dest="which", required=True)
    training = sub.add_parser("training", help="fairseq-train flags of Section 5 (default: the paper's)")
    training.add_argument("--warmup-updates", type=int)
    training.add_argument("--label-smoothing", type=number)
    decoding = sub.add_parser("decoding", help="fairseq-generate flags of Section 6.1 (default: the paper's)")
    decoding.add_argument("--beam", type=int)
    decoding.add_argument("--lenpen", type=number)
    decoding.add_argument("--max-len-b", type=int)
    decoding.add_argument(
        "--parsing", action="store_true", help="Section 6.3's settings (English constituency parsing)"
    )
    a = parser.parse_args(argv)
    if a.which == "training":
        flags = training_flags(a.warmup_updates, a.label_smoothing)
    else:
        flags = decoding_flags(a.beam, a.lenpen, a.max_len_b, PARSING_DECODING if a.parsing else DECODING)
    print("\n".join(flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
