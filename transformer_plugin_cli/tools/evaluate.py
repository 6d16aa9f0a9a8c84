"""Score fairseq-generate output against references, with labels that say how each score was computed.

- ``sacreBLEU`` on detokenized text, with its signature (the comparable modern number);
- ``chrF`` (sacreBLEU's implementation), with its signature;
- ``tokenized BLEU with compound splitting``, as the paper reported WMT14 En-De (tensor2tensor's
  get_ende_bleu.sh): both sides tokenized with the Moses tokenizer (sacremoses), every hyphen
  ``a-b`` rewritten ``a ##AT##-##AT## b``, then BLEU on the tokens (sacreBLEU with tokenize=none).

fairseq-generate prints hypotheses in batch order; ``fairseq_output.hypotheses`` puts them back in corpus
order and refuses output that misses a sentence.

    vaswani-evaluate --generate-output gen.out --reference test.de [--tokenized-bleu --lang de]
"""

import argparse
import os
import re
import sys
from typing import Dict, List, Optional

import sacrebleu

from ..console import console_script
from ..fairseq_output import hypotheses as read_hypotheses
from ..files import write_json, write_lines


def compound_split(text: str) -> str:
    r"""tensor2tensor's compound splitting, ``perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'``.

    One left-to-right pass, as in that script: ``a-b-c`` becomes ``a ##AT##-##AT## b-c``.
    """
    return re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", text)


def tokenized_bleu(hypotheses: List[str], references: List[str], lang: str, split_compounds: bool = True):
    """BLEU on Moses-tokenized text (as multi-bleu.perl), with tensor2tensor's compound splitting or not."""
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=lang)

    def prepare(text):
        tokens = tokenizer.tokenize(text, return_str=True, escape=False)
        return compound_split(tokens) if split_compounds else tokens

    bleu = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    return bleu.corpus_score([prepare(h) for h in hypotheses], [[prepare(r) for r in references]])


def score(
    hypotheses: List[str],
    references: List[str],
    tokenized_bleu_lang: Optional[str] = None,
    split_compounds: bool = True,
) -> Dict:
    """Corpus scores; every value comes with the label and signature that say how it was computed."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    result = {
        "sentences": len(hypotheses),
        "sacrebleu": round(bleu_score.score, 2),
        "sacrebleu_signature": str(bleu.get_signature()),
        "sacrebleu_detail": str(bleu_score),
        "chrf": round(chrf_score.score, 2),
        "chrf_signature": str(chrf.get_signature()),
    }
    if tokenized_bleu_lang:
        tok = tokenized_bleu(hypotheses, references, tokenized_bleu_lang, split_compounds)
        result["tokenized_bleu_compound_split" if split_compounds else "tokenized_bleu"] = round(tok.score, 2)
    return result


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Score fairseq-generate output (sacreBLEU, chrF, tokenized BLEU).")
    parser.add_argument("--generate-output", required=True, help="what fairseq-generate printed")
    parser.add_argument("--reference", required=True, help="detokenized references, one per line, corpus order")
    parser.add_argument("--kind", default="D", choices=["D", "H"], help="D: detokenized hypotheses (default)")
    parser.add_argument("--tokenized-bleu", action="store_true", help="also tokenized BLEU with compound splitting")
    parser.add_argument(
        "--no-compound-split",
        action="store_true",
        help="tokenized BLEU without compound splitting (tensor2tensor splits for German only)",
    )
    parser.add_argument("--lang", default="de", help="target language for the Moses tokenizer")
    parser.add_argument("--hypotheses-out", help="write the hypotheses here, in corpus order")
    parser.add_argument("--json", help="write the scores here as JSON")
    parser.add_argument("--label", default="", help="name printed before the scores")
    parser.add_argument("--paper", help="the paper's figure, printed beside ours (e.g. 'BLEU 27.3')")
    args = parser.parse_args(argv)

    with open(args.reference, encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f]
    try:
        with open(args.generate_output, encoding="utf-8") as f:
            hypotheses = read_hypotheses(f, args.kind, expected=len(references))
    except ValueError as e:
        print(f"evaluate: error: {args.generate_output}: {e}", file=sys.stderr)
        return 1
    result = score(hypotheses, references, args.lang if args.tokenized_bleu else None, not args.no_compound_split)
    result["reference"] = os.path.abspath(args.reference)  # which file was scored against
    if args.hypotheses_out:
        write_lines(args.hypotheses_out, hypotheses)
    if args.json:
        write_json(args.json, result)
    label = f"{args.label}: " if args.label else ""
    line = f"{label}sacreBLEU {result['sacrebleu']:.2f} | chrF {result['chrf']:.2f}"
    if "tokenized_bleu_compound_split" in result:
        line += f" | tokenized BLEU (compound split) {result['tokenized_bleu_compound_split']:.2f}"
    if "tokenized_bleu" in result:
        line += f" | tokenized BLEU {result['tokenized_bleu']:.2f}"
    if args.paper:
        line += f" | paper: {args.paper}"
    print(line)
    print(f"  {result['sacrebleu_signature']}\n  {result['chrf_signature']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
