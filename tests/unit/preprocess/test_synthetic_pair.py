"""The synthetic language pair: deterministic, held-out sets disjoint from train, real reordering."""

import hashlib
import random

from preprocess.synthetic_pair import TARGET_DETERMINERS, Grammar, generate, make_lexicon


def digest(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_same_seed_same_files_and_disjoint_splits(tmp_path):
    counts = generate(str(tmp_path / "a"), train=300, valid=20, test=30, seed=5)
    generate(str(tmp_path / "b"), train=300, valid=20, test=30, seed=5)
    generate(str(tmp_path / "c"), train=300, valid=20, test=30, seed=6)
    assert counts == {"train": 300, "valid": 20, "test": 30}
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")
    read = lambda name: (tmp_path / "a" / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    assert len(read("train.src")) == len(read("train.tgt")) == 300
    assert not set(read("test.src")) & set(read("train.src"))
    assert not set(read("valid.src")) & set(read("train.src"))
    assert not set(read("valid.src")) & set(read("test.src"))


def test_target_is_verb_final_and_agrees():
    rng = random.Random(0)
    lexicon = make_lexicon(rng)
    grammar = Grammar(lexicon, rng)
    verb_endings = ("t", "n", "te", "ten")
    target_verbs = {t for _, t in lexicon.verbs}
    source_verbs = {s for s, _ in lexicon.verbs}
    for _ in range(200):
        src, tgt, plural = grammar.noun_phrase()
        noun = next(n for n in lexicon.nouns if src[-1] in (n[0], n[0] + "s"))
        assert src[-1] == noun[0] + ("s" if plural else "")
        assert tgt[0] == TARGET_DETERMINERS[(src[0] == "the", noun[2], plural)]  # gender and number
        src_clause, tgt_clause = grammar.clause(depth=1)  # no sub-clause: the verb ends the clause
        last = tgt_clause[-1]
        assert any(last.endswith(e) and last[: -len(e)] in target_verbs for e in verb_endings)
        # the source is SVO: its verb (lemma + "", "s" or "ed") is followed by the object
        verb_at = [
            i for i, w in enumerate(src_clause) if any(w == v + e for v in source_verbs for e in ("", "s", "ed"))
        ]
        assert verb_at and verb_at[0] < len(src_clause) - 2


def test_held_out_sources_never_enter_train_even_when_the_grammar_repeats(tmp_path, monkeypatch):
    """With a grammar of only 40 distinct sentences, repeats are certain: train must skip held-out ones."""
    pool = [(f"Source {i}.", f"Target {i}.") for i in range(40)]
    rng = random.Random(3)
    monkeypatch.setattr(Grammar, "sentence_pair", lambda self: rng.choice(pool))
    generate(str(tmp_path), train=200, valid=5, test=5, seed=1)
    train = set((tmp_path / "train.src").read_text().splitlines())
    held_out = set((tmp_path / "valid.src").read_text().splitlines()) | set(
        (tmp_path / "test.src").read_text().splitlines()
    )
    assert len(held_out) == 10 and not train & held_out
    assert len((tmp_path / "train.src").read_text().splitlines()) == 200
