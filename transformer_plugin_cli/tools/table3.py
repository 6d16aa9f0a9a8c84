"""Table 3 of the paper (variations of the base model on newstest2013): the rows as fairseq-train flags,
and the collected results as a markdown table beside the paper's values.

``recipes/wmt14_table3.sh`` trains every row with ``recipes/wmt14_en_de_{base,big}.sh`` (no checkpoint
averaging, evaluated on the dev set), then calls ``collect``:

    vaswani-table3 rows                 # the row ids, in the paper's order
    vaswani-table3 plan base C-N2       # per row: id, recipe, fairseq-train flags
    vaswani-table3 collect --work runs/wmt14_en_de --out table3.md
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..console import console_script
from ..fairseq_output import log_records
from ..files import write_text


@dataclass(frozen=True)
class Row:
    id: str
    group: str  # (A) .. (E), base, big
    change: str  # what differs from the base model, in the paper's symbols
    flags: Dict[str, str] = field(default_factory=dict)
    ppl: float = 0.0  # the paper's dev perplexity (per word-piece)
    bleu: float = 0.0  # the paper's dev BLEU
    params_m: Optional[int] = None  # the paper's parameter count x 1e6, where given
    big: bool = False  # trained with the big recipe (300k steps)


def _heads(h, d):
    return {"--attention-heads": str(h), "--d-k": str(d), "--d-v": str(d)}


ROWS: List[Row] = [
    Row(
        "base", "base", "N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1, eps_ls=0.1, 100K", {}, 4.92, 25.8, 65
    ),
    Row("A-h1", "(A)", "h=1, d_k=d_v=512", _heads(1, 512), 5.29, 24.9),
    Row("A-h4", "(A)", "h=4, d_k=d_v=128", _heads(4, 128), 5.00, 25.5),
    Row("A-h16", "(A)", "h=16, d_k=d_v=32", _heads(16, 32), 4.91, 25.8),
    Row("A-h32", "(A)", "h=32, d_k=d_v=16", _heads(32, 16), 5.01, 25.4),
    Row("B-dk16", "(B)", "d_k=16", {"--d-k": "16"}, 5.16, 25.1, 58),
    Row("B-dk32", "(B)", "d_k=32", {"--d-k": "32"}, 5.01, 25.4, 60),
    Row("C-N2", "(C)", "N=2", {"--encoder-layers": "2", "--decoder-layers": "2"}, 6.11, 23.7, 36),
    Row("C-N4", "(C)", "N=4", {"--encoder-layers": "4", "--decoder-layers": "4"}, 5.19, 25.3, 50),
    Row("C-N8", "(C)", "N=8", {"--encoder-layers": "8", "--decoder-layers": "8"}, 4.88, 25.5, 80),
    Row(
        "C-dmodel256",
        "(C)",
        "d_model=256, d_k=d_v=32",
        {"--d-model": "256", "--d-k": "32", "--d-v": "32"},
        5.75,
        24.5,
        28,
    ),
    Row(
        "C-dmodel1024",
        "(C)",
        "d_model=1024, d_k=d_v=128",
        {"--d-model": "1024", "--d-k": "128", "--d-v": "128"},
        4.66,
        26.0,
        168,
    ),
    Row("C-dff1024", "(C)", "d_ff=1024", {"--d-ff": "1024"}, 5.12, 25.4, 53),
    Row("C-dff4096", "(C)", "d_ff=4096", {"--d-ff": "4096"}, 4.75, 26.2, 90),
    Row("D-drop0.0", "(D)", "P_drop=0.0", {"--dropout": "0.0"}, 5.77, 24.6),
    Row("D-drop0.2", "(D)", "P_drop=0.2", {"--dropout": "0.2"}, 4.95, 25.5),
    Row("D-ls0.0", "(D)", "eps_ls=0.0", {"--label-smoothing": "0.0"}, 4.67, 25.3),
    Row("D-ls0.2", "(D)", "eps_ls=0.2", {"--label-smoothing": "0.2"}, 5.47, 25.7),
    Row("E-learned", "(E)", "learned positional embedding", {"--positional-encoding": "learned"}, 4.92, 25.7),
    Row("big", "big", "N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3, 300K", {}, 4.33, 26.4, 213, big=True),
]
ROWS_BY_ID = {row.id: row for row in ROWS}


def row(row_id: str) -> Row:
    if row_id not in ROWS_BY_ID:
        raise KeyError(f"unknown Table 3 row {row_id!r}; rows: {' '.join(ROWS_BY_ID)}")
    return ROWS_BY_ID[row_id]


def read_valid_ppl(log_path: str) -> Optional[float]:
    """The dev perplexity that fairseq-validate (``--log-format json``) printed last, or None."""
    if not os.path.isfile(log_path):
        return None
    with open(log_path, encoding="utf-8") as f:
        valid = log_records(f.read(), "valid")
    return float(valid[-1]["valid_ppl"]) if valid and "valid_ppl" in valid[-1] else None


def count_parameters(checkpoint: str) -> Optional[int]:
    """Parameters of the model in a checkpoint (the shared embedding counted once), or None."""
    if not os.path.isfile(checkpoint):
        return None
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    seen, total = set(), 0
    for tensor in load_checked(checkpoint)["model"].values():
        if not tensor.is_floating_point():
            continue
        key = (tensor.data_ptr(), tuple(tensor.shape))  # tied weights share storage after loading
        if key not in seen:
            seen.add(key)
            total += tensor.numel()
    return total


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def collect(work: str, row_ids: List[str]) -> str:
    """The markdown table: ours beside the paper for every row in ``row_ids``."""
    lines = [
        "| row | change from base | dev PPL (ours) | paper | dev BLEU (ours) | paper | params x1e6 (ours) | paper |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row_id in row_ids:
        r = row(row_id)
        run = os.path.join(work, f"table3-{r.id}")
        scores_path = os.path.join(run, "results", "scores.valid.json")
        bleu = None
        if os.path.isfile(scores_path):
            with open(scores_path) as f:
                scores = json.load(f)
            bleu = scores.get("tokenized_bleu_compound_split", scores.get("sacrebleu"))
        params = count_parameters(os.path.join(run, "checkpoints", "checkpoint_last.pt"))
        lines.append(
            f"| {r.group} {r.id} | {r.change} | {_fmt(read_valid_ppl(os.path.join(run, 'results', 'validate.log')))}"
            f" | {r.ppl:.2f} | {_fmt(bleu, 1)} | {r.bleu:.1f} | {_fmt(params / 1e6 if params else None, 1)}"
            f" | {r.params_m if r.params_m else ''} |"
        )
    lines.append("")
    lines.append(
        "Dev = newstest2013, no checkpoint averaging (as Table 3). BLEU: tokenized with compound splitting, "
        "as the paper; perplexity per word-piece from fairseq-validate. '-' = not run (yet)."
    )
    return "\n".join(lines) + "\n"


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("rows", help="print the row ids in the paper's order")
    p = sub.add_parser("plan", help="per row, one tab-separated line: id, recipe (base or big), fairseq-train flags")
    p.add_argument("rows", nargs="*", help="row ids (default: all)")
    c = sub.add_parser("collect", help="write the markdown table of ours beside the paper")
    c.add_argument("--work", required=True, help="WORK of the runs (each row in WORK/table3-<row>)")
    c.add_argument("--rows", nargs="+", default=[r.id for r in ROWS])
    c.add_argument("--out", help="also write the table here")
    args = parser.parse_args(argv)
    try:
        if args.command == "rows":
            print(" ".join(r.id for r in ROWS))
        elif args.command == "plan":
            for r in [row(i) for i in args.rows] or ROWS:
                recipe = "wmt14_en_de_big.sh" if r.big else "wmt14_en_de_base.sh"
                print(f"{r.id}\t{recipe}\t" + " ".join(f"{k} {v}" for k, v in r.flags.items()))
        else:
            table = collect(args.work, args.rows)
            print(table, end="")
            if args.out:
                write_text(args.out, table)
    except KeyError as e:
        print(f"table3: error: {e.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
