"""Trees (reading, cleaning, linearisation, repair) and the EVALB-style scorer, on hand-checked cases,
on the project's own small treebank, and against PYEVALB where the conventions coincide."""

import random

import pytest

from transformer_plugin_cli.parsing import evalb
from transformer_plugin_cli.parsing.trees import (
    REPAIR_KINDS,
    TreeError,
    clean,
    delinearise,
    linearise,
    parse_tree,
    read_trees,
)

MRG = """(
  (S
    (NP-SBJ-1 (DT The) (NN price) )
    (VP (VBD was)
      (VP (VBN cut)
        (NP (-NONE- *-1) )))
    (. .) ))
( (S (NP-SBJ=2 (PRP It)) (VP (VBD rose) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) (. .)) )
"""


def test_read_and_clean_mrg():
    first, second = list(read_trees(MRG, "wsj_0001.mrg"))
    assert str(clean(first)) == "(S (NP (DT The) (NN price)) (VP (VBD was) (VP (VBN cut))) (. .))"
    # the SBAR holds only empty elements: it goes, and its VP keeps the verb
    assert str(clean(second)) == "(S (NP (PRP It)) (VP (VBD rose)) (. .))"
    assert (
        str(clean(parse_tree("(TOP (S (NP (-LRB- -LRB-) (NN x)) (ADVP|PRT (RB up))))")))
        == "(S (NP (-LRB- -LRB-) (NN x)) (ADVP (RB up)))"
    )
    assert clean(parse_tree("( (S (-NONE- *)) )")) is None


def test_unbalanced_input_is_named():
    with pytest.raises(TreeError, match=r"wsj_0002.mrg:2: '\)' without an open bracket"):
        list(read_trees("(S (NN a))\n)", "wsj_0002.mrg"))
    with pytest.raises(TreeError, match="not closed"):
        list(read_trees("(S (NN a)", "x"))


def test_linearisation_as_vinyals_et_al():
    tree = parse_tree("(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))")
    assert " ".join(linearise(tree)) == "(S (NP XX XX )NP (VP XX )VP XX )S"


def test_well_formed_output_needs_no_repair(toy_gold):
    _, _, gold = toy_gold
    for tree in gold:
        rebuilt, repairs = delinearise(linearise(tree), tree.words())
        assert repairs.sentences == 0 and sum(repairs.counts.values()) == 0
        assert evalb.score_sentence(tree, rebuilt).f1 == 100.0


@pytest.mark.parametrize(
    "tokens, kind",
    [
        ("(S (NP XX XX )NP )NP )S", "unmatched_close"),
        ("(S (NP XX XX )VP )S", "mismatched_close"),
        ("(S (NP XX XX", "unclosed"),
        ("(S (NP XX <unk> XX )NP )S", "unknown_token"),
        ("(S (NP XX )NP )S", "missing_words"),
        ("(S (NP XX XX XX XX )NP )S", "extra_words"),
        ("(S (NP XX XX )NP (VP )VP )S", "empty_constituent"),
        ("(NP XX )NP (VP XX )VP", "added_root"),
        ("", "added_root"),
    ],
)
def test_every_kind_of_malformed_output_is_repaired(tokens, kind):
    words = ["The", "cat"]
    tree, repairs = delinearise(tokens.split(), words)
    assert repairs.counts[kind] >= 1 and repairs.sentences == 1
    assert tree.words() == words  # the input words, in order, always
    assert evalb.score_sentence(parse_tree("(S (NP (DT The) (NN cat)))"), tree).error is None


def test_random_output_never_breaks_the_scorer():
    rng = random.Random(0)
    vocabulary = ["(S", "(NP", "(VP", "(PP", ")S", ")NP", ")VP", ")PP", ")", "XX", "XX", "XX", "<unk>", "(XX"]
    gold = parse_tree("(S (NP (DT a) (NN b)) (VP (VBD c) (PP (IN d) (NP (NN e)))) (. .))")
    for _ in range(500):
        tokens = [rng.choice(vocabulary) for _ in range(rng.randint(0, 30))]
        tree, repairs = delinearise(tokens, gold.words())
        assert tree.words() == gold.words()
        assert delinearise(tokens, gold.words())[0] == tree  # deterministic
        assert 0.0 <= evalb.score_sentence(gold, tree).f1 <= 100.0
        assert set(repairs.counts) == set(REPAIR_KINDS)


@pytest.mark.parametrize("depth", [250, 330, 5000])
def test_output_nested_thousands_deep_is_repaired_and_scored(tmp_path, depth):
    """An undertrained model can open the same bracket over and over; nothing here recurses."""
    gold = parse_tree("(S (NP (DT a) (NN b)) (VP (VBD c)))")
    tokens = ["(NP"] * depth + ["XX", "XX", "XX"]  # never closed
    tree, repairs = delinearise(tokens, gold.words())
    assert repairs.counts["unclosed"] == depth and tree.words() == gold.words()
    assert str(tree).count("(NP") == depth and parse_tree(str(tree)) == tree
    assert len(linearise(tree)) == 2 * depth + 3 and clean(tree) == tree
    s = evalb.score_sentence(gold, tree)
    assert s.error is None and (s.matched, s.gold, s.test) == (
        0,
        3,
        depth,
    )  # S(0,3) NP(0,2) VP(2,3) against NP(0,3) x depth
    generate = tmp_path / "generate.out"
    generate.write_text(f"H-0\t-0.5\t{' '.join(tokens)}\n")
    (tmp_path / "words").write_text("a b c\n")
    trees, total = evalb.trees_from_generate_output(str(generate), str(tmp_path / "words"))
    assert trees == [tree] and total.counts["unclosed"] == depth


# ---- the scorer --------------------------------------------------------------------------------

GOLD = "(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"


def score(gold, test):
    return evalb.score_sentence(parse_tree(gold), parse_tree(test))


def test_identical_trees_score_100():
    s = score(GOLD, GOLD)
    assert (s.matched, s.gold, s.test, s.f1) == (5, 5, 5, 100.0)


def test_known_partial_match():
    # the PP attached to S instead of the VP: VP(2,3) instead of VP(2,6); S, NP, PP, NP match
    s = score(GOLD, "(S (NP (XX the) (XX cat)) (VP (XX sat)) (PP (XX on) (NP (XX the) (XX mat))) (XX .))")
    assert (s.matched, s.gold, s.test) == (4, 5, 5) and s.recall == s.precision == 80.0


def test_punctuation_and_root_rules():
    # where the final period hangs does not matter: punctuation is removed before spans are counted
    assert (
        score(GOLD, "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat) (. .))))))").f1
        == 100.0
    )
    s = score("(TOP " + GOLD + ")", GOLD)  # the TOP wrapper is not a bracket; S is
    assert (s.gold, s.test, s.matched) == (5, 5, 5)


def test_advp_equals_prt_and_function_tags_are_ignored():
    gold = "(S (NP-SBJ (NNS prices)) (VP (VBD went) (PRT (RP up))))"
    assert score(gold, "(S (NP (XX prices)) (VP (XX went) (ADVP (XX up))))").f1 == 100.0
    assert score(gold, "(S (NP (XX prices)) (VP (XX went) (NP (XX up))))").matched == 3


def test_spans_match_as_multisets():
    s = score("(S (NP (NP (DT the) (NN cat))) (VP (VBD sat)))", "(S (NP (XX the) (XX cat)) (VP (XX sat)))")
    assert (s.gold, s.test, s.matched) == (4, 3, 3)  # NP(0,2) twice in gold, once in test: one match
    s = score("(S (NP (NP (DT the) (NN cat))) (VP (VBD sat)))", "(S (NP (NP (XX the) (XX cat))) (VP (XX sat)))")
    assert (s.gold, s.test, s.matched) == (4, 4, 4)  # twice in both: two matches


def test_words_that_differ_are_skipped_and_reported(tmp_path, capsys):
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(GOLD + "\n" + GOLD + "\n")
    test.write_text(GOLD + "\n" + GOLD.replace("mat", "hat") + "\n")
    assert evalb.main(["--gold", str(gold), "--test", str(test), "--json", str(tmp_path / "s.json")]) == 0
    captured = capsys.readouterr()
    assert "sentences 1 (skipped 1)" in captured.out and "sentence 1 skipped: words differ" in captured.err


def test_a_tree_without_words_is_skipped_not_a_crash():
    assert score("( (S (-NONE- *)) )", GOLD).error == "a tree with no words (only -NONE- elements)"


def test_length_cutoff():
    long_gold = "(S (NP " + " ".join(f"(NN w{i})" for i in range(41)) + "))"
    result, _ = evalb.score_corpus([parse_tree(GOLD), parse_tree(long_gold)], [parse_tree(GOLD), parse_tree(long_gold)])
    assert result["all"]["sentences"] == 2 and result["len<=40"]["sentences"] == 1


def _without(tree, labels):
    """A copy of ``tree`` without the preterminals labelled ``labels`` (for PYEVALB, which deletes nothing)."""
    from transformer_plugin_cli.parsing.trees import Tree

    children = []
    for c in tree.children:
        if isinstance(c, str):
            children.append(c)
        elif not (c.is_preterminal() and c.label in labels):
            pruned = _without(c, labels)
            if pruned.children:
                children.append(pruned)
    return Tree(tree.label, children)


def test_agrees_with_pyevalb_where_the_conventions_coincide(toy_gold):
    """PYEVALB (installed for the tests) matches spans as sets, deletes no punctuation and has no
    ADVP=PRT rule: on trees without punctuation, PRT/ADVP or repeated spans, both must count the same."""
    from PYEVALB import parser as pyevalb_parser
    from PYEVALB import scorer as pyevalb_scorer

    _, _, gold_trees = toy_gold
    rng = random.Random(1)
    compared = 0
    for gold in gold_trees * 5:
        gold = _without(gold, {".", ","})
        if any(t in str(gold) for t in ("PRT", "ADVP")):
            continue
        tokens = linearise(gold)
        for _ in range(2):  # corrupt the linearisation: drop or move a bracket
            i = rng.randrange(len(tokens))
            tokens = tokens[:i] + tokens[i + 1 :] if rng.random() < 0.5 else tokens[:i] + [tokens[i]] + tokens[i:]
        test, _ = delinearise(tokens, gold.words())
        test_str = str(test).replace("(XX ", "(NN ")
        ours = evalb.score_sentence(gold, parse_tree(test_str))
        theirs = pyevalb_scorer.Scorer().score_trees(
            pyevalb_parser.create_from_bracket_string(str(gold)), pyevalb_parser.create_from_bracket_string(test_str)
        )
        assert (ours.matched, ours.gold, ours.test) == (
            theirs.matched_brackets,
            theirs.gold_brackets,
            theirs.test_brackets,
        ), (str(gold), test_str)
        compared += 1
    assert compared >= 30
