"""Score fairseq-generate output against references, with labels that say how each score was computed.

- ``sacreBLEU`` on detokenized text, with its signature (the comparable modern number);
- ``chrF`` (sacreBLEU's implementation), with its signature;
- ``tokenized BLEU with compound splitting``, as the paper reported WMT14 En-De (tensor2tensor's
  get_ende_bleu.sh): both sides tokenized with the Moses tokenizer (sacremoses), every hyphen
  ``a-b`` rewritten ``a ##AT##-##AT## b``, then BLEU on the tokens (sacreBLEU with tokenize=none).

fairseq-generate prints hypotheses in batch order; ``fairseq_output.hypotheses`` puts them back in corpus
order and refuses output that misses a sentence.

    vaswani-evaluate --generate-output gen.out --reference test.de [--tokenized-bleu --lang de]

``--baseline FILE`` (another system's hypotheses, corpus order; the recipe's parent before fine-tuning) adds the
paired bootstrap of the difference (Koehn 2004; sacreBLEU's ``--paired-bs``, its resampling and its seed): the
difference in sacreBLEU and chrF, its 95% interval over 1,000 resamplings of the test set, and whether the interval
spans 0 ("not significant").
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


BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED = 1000, 12345  # sacreBLEU's own for --paired-bs


def paired_bootstrap(
    hypotheses: List[str], baseline: List[str], references: List[str], samples: int = BOOTSTRAP_SAMPLES
) -> Dict:
    """The difference hypotheses minus baseline in sacreBLEU and chrF on the whole test set, and its 95% interval
    over ``samples`` resamplings of the test set's sentences with replacement, the same sentences for both systems
    (paired): the resamplings sacreBLEU's ``--paired-bs`` draws (its seed, its draw), scored from its per-sentence
    statistics."""
    import numpy as np

    if not len(hypotheses) == len(baseline) == len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses, {len(baseline)} of the baseline, {len(references)} references")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    drawn = rng.choice(len(references), size=(samples, len(references)), replace=True)  # as sacreBLEU draws them
    found = {}
    for name, metric in (("sacrebleu", sacrebleu.metrics.BLEU()), ("chrf", sacrebleu.metrics.CHRF())):
        ours = np.array(metric._extract_corpus_statistics(hypotheses, [references]), dtype="float32")
        theirs = np.array(metric._extract_corpus_statistics(baseline, [references]), dtype="float32")

        def difference(rows):
            score = metric._compute_score_from_stats
            return score(ours[rows].sum(0).tolist()).score - score(theirs[rows].sum(0).tolist()).score

        deltas = np.array([difference(rows) for rows in drawn])
        low, high = np.percentile(deltas, [2.5, 97.5])
        found[name] = {
            "difference": round(difference(slice(None)), 2),
            "low": round(float(low), 2),
            "high": round(float(high), 2),
            "significant": bool(low > 0 or high < 0),
        }
    return {"samples": samples, "seed": BOOTSTRAP_SEED, **found}


def bootstrap_said(found: Dict, baseline: str) -> str:
    """One line: the difference against the baseline, its interval, and whether it is significant."""
    parts = []
    for name, label in (("sacrebleu", "sacreBLEU"), ("chrf", "chrF")):
        d = found[name]
        verdict = "" if d["significant"] else ", not significant"
        parts.append(f"{label} {d['difference']:+.2f} (95% interval {d['low']:+.2f} to {d['high']:+.2f}{verdict})")
    return f"against {baseline}: " + "; ".join(parts) + f" (paired bootstrap, {found['samples']} resamplings)"


def strip_prefix(hypothesis: str, prefix: str) -> str:
    """A hypothesis without the token forced first: fairseq's sentencepiece post-processing joins it to the next word
    where that word's piece has no leading space ("deu_LatnHallo"), and leaves it apart where it has ("deu_Latn
    Hallo")."""
    return hypothesis[len(prefix) :].lstrip() if hypothesis.startswith(prefix) else hypothesis


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
    parser.add_argument(
        "--strip-prefix",
        help="a token fairseq-generate forced first (--prefix-size 1: an NLLB or M2M100 target code), left out of "
        "every hypothesis",
    )
    parser.add_argument("--hypotheses-out", help="write the hypotheses here, in corpus order")
    parser.add_argument("--json", help="write the scores here as JSON")
    parser.add_argument("--label", default="", help="name printed before the scores")
    parser.add_argument("--paper", help="the paper's figure, printed beside ours (e.g. 'BLEU 27.3')")
    parser.add_argument(
        "--baseline", help="another system's hypotheses (corpus order): the paired bootstrap against it"
    )
    parser.add_argument("--baseline-label", default="the baseline", help="its name in what is printed")
    args = parser.parse_args(argv)

    with open(args.reference, encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f]
    try:
        with open(args.generate_output, encoding="utf-8") as f:
            hypotheses = read_hypotheses(f, args.kind, expected=len(references))
    except ValueError as e:
        print(f"evaluate: error: {args.generate_output}: {e}", file=sys.stderr)
        return 1
    if args.strip_prefix:
        hypotheses = [strip_prefix(h, args.strip_prefix) for h in hypotheses]
    result = score(hypotheses, references, args.lang if args.tokenized_bleu else None, not args.no_compound_split)
    result["reference"] = os.path.abspath(args.reference)  # which file was scored against
    if args.baseline:
        with open(args.baseline, encoding="utf-8") as f:
            baseline = [line.rstrip("\n") for line in f]
        try:
            result["against"] = {"label": args.baseline_label, **paired_bootstrap(hypotheses, baseline, references)}
        except ValueError as e:
            print(f"evaluate: error: {args.baseline}: {e}", file=sys.stderr)
            return 1
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
    if "against" in result:
        print(bootstrap_said(result["against"], args.baseline_label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
