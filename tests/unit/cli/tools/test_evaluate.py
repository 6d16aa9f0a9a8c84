"""Scoring: hypotheses back in corpus order, labelled scores, the paper's compound splitting."""

import json

import pytest
import sacrebleu

from transformer_plugin_cli.tools.evaluate import compound_split, main, read_hypotheses, score

GENERATE_OUTPUT = """S-2\tc d
T-2\tC D.
H-2\t-0.5\t▁C ▁D .
D-2\t-0.5\tC D e f g h.
P-2\t-0.1 -0.2
S-0\ta b
H-0\t-0.1\t▁A ▁b .
D-0\t-0.1\tA b c d e f.
H-1\t-0.3\t▁E
D-1\t-0.3\tE g h i j k.
H-1\t-0.9\t▁F
D-1\t-0.9\tF
"""


def test_hypotheses_in_corpus_order_best_first():
    lines = GENERATE_OUTPUT.splitlines()
    assert read_hypotheses(lines, "D") == ["A b c d e f.", "E g h i j k.", "C D e f g h."]
    assert read_hypotheses(lines, "H") == ["▁A ▁b .", "▁E", "▁C ▁D ."]


def test_missing_sentences_are_an_error():
    with pytest.raises(ValueError, match=r"missing ids \[3\]"):
        read_hypotheses(GENERATE_OUTPUT.splitlines(), "D", expected=4)


def test_compound_splitting_as_tensor2tensor():
    assert compound_split("a well-known long-term plan") == "a well ##AT##-##AT## known long ##AT##-##AT## term plan"
    assert compound_split("x-y-z - a") == "x ##AT##-##AT## y-z - a"  # one pass, as perl s///g


def test_scores_match_sacrebleu_and_carry_signatures():
    hyps = ["the cat sat on the mat.", "a dog-friendly park"]
    refs = ["the cat sat on a mat.", "a dog-friendly park"]
    result = score(hyps, refs, tokenized_bleu_lang="en")
    assert result["sacrebleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert result["chrf"] == round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)
    assert "tok:13a" in result["sacrebleu_signature"]
    assert 0 < result["tokenized_bleu_compound_split"] < 100


def test_cli(tmp_path, capsys):
    (tmp_path / "gen.out").write_text(GENERATE_OUTPUT, encoding="utf-8")
    (tmp_path / "ref").write_text("A b c d e f.\nE g h i j k.\nC D e f g h.\n", encoding="utf-8")
    args = ["--generate-output", str(tmp_path / "gen.out"), "--reference", str(tmp_path / "ref")]
    assert main(args + ["--json", str(tmp_path / "s.json"), "--paper", "BLEU 27.3"]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["sacrebleu"] == 100.0
    assert "paper: BLEU 27.3" in capsys.readouterr().out
    (tmp_path / "ref").write_text("A b c d e f.\nE g h i j k.\nC D e f g h.\nmissing\n", encoding="utf-8")
    assert main(args) == 1
    assert "missing ids [3]" in capsys.readouterr().err


def test_the_paired_bootstrap_is_sacrebleus_resampling_of_both_systems_and_says_when_it_is_not_significant():
    """paired_bootstrap: on the whole set, the corpus scores' difference; each resampling's difference is sacreBLEU's
    own bootstrap scores of the two systems (its seed and draw), subtracted; an interval spanning 0 is "not
    significant", and a system against itself differs by nothing."""
    import random

    import numpy as np
    import sacrebleu
    from sacrebleu.significance import _bootstrap_resample

    from transformer_plugin_cli.tools.evaluate import bootstrap_said, paired_bootstrap

    rng = random.Random(3)
    words = "the cat sat on a mat with its hat in the sun".split()
    references = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(60)]
    good = [r if i % 3 else " ".join(reversed(r.split())) for i, r in enumerate(references)]
    bad = [" ".join(rng.choice(words) for _ in range(8)) for _ in references]
    found = paired_bootstrap(good, bad, references, samples=200)
    bleu = sacrebleu.metrics.BLEU()
    whole = bleu.corpus_score(good, [references]).score - bleu.corpus_score(bad, [references]).score
    assert found["sacrebleu"]["difference"] == round(whole, 2)
    stats = {name: bleu._extract_corpus_statistics(h, [references]) for name, h in (("good", good), ("bad", bad))}
    theirs = {name: [s.score for s in _bootstrap_resample(st, bleu, 200)[1]] for name, st in stats.items()}
    deltas = np.array(theirs["good"]) - np.array(theirs["bad"])
    assert found["sacrebleu"]["low"] == pytest.approx(np.percentile(deltas, 2.5), abs=0.01)
    assert found["sacrebleu"]["high"] == pytest.approx(np.percentile(deltas, 97.5), abs=0.01)
    assert found["sacrebleu"]["significant"] and found["chrf"]["significant"]
    same = paired_bootstrap(good, good, references, samples=50)
    assert same["sacrebleu"] == {"difference": 0.0, "low": 0.0, "high": 0.0, "significant": False}
    assert "sacreBLEU +0.00 (95% interval +0.00 to +0.00, not significant)" in bootstrap_said(same, "the parent")
