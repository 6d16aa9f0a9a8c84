"""recipe/plan.py and the settings it prints: budgets refused, a validation's cost, a vocabulary per side."""

import pytest
from helpers import ENGLISH, corpus, many, speeds

from preprocess.corpora import CorpusError, find_corpus, held_out_size
from recipe import budget_rule as rule
from recipe import plan


def test_a_time_for_gpus_where_there_is_none_is_refused(tmp_path, capsys, monkeypatch):
    from recipe import speed_probe

    monkeypatch.setattr(speed_probe, "cuda_here", lambda: False)
    prefix = corpus(tmp_path, many(100))
    assert (
        plan.command_line(["settings", "--train", prefix, "--src", "en", "--tgt", "de", "--time", "8h", "--gpus", "8"])
        == 2
    )
    assert "error: TIME=8h: this machine has no CUDA device to measure the GPUs' speed on" in capsys.readouterr().err


def test_time_and_max_update_together_are_refused(tmp_path):
    prefix = corpus(tmp_path, many(100))
    with pytest.raises(CorpusError, match="TIME=8h and MAX_UPDATE=1200: give one budget"):
        rule.settings([prefix], "en", "de", 1200, "8h", speeds(4.0, 1.5))
    with pytest.raises(CorpusError, match="TIME=8 hours: a duration such as 90m"):
        rule.settings([prefix], "en", "de", None, "8 hours", speeds(4.0, 1.5))


def test_a_validations_cost_is_counted_from_the_dev_sets_size(tmp_path):
    """The dev set's target tokens (what each validation costs a TIME) are estimated before any work: a given dev
    set's target words, or the pairs held out times a training target line's words; in pieces, PIECES_PER_WORD a
    word (a character in scripts without spaces)."""
    (tmp_path / "given").mkdir()
    prefix = corpus(tmp_path, many(3000))  # German lines of 4 to 9 words
    dev = corpus(tmp_path / "given", [("One two three.", "eins zwei drei vier")] * 50, name="dev")
    assert rule.PIECES_PER_WORD == 2.0
    assert rule.settings([prefix], "en", "de", valid=[dev]).valid_tokens == 50 * 4 * 2
    words = sum(len(g.split()) for _, g in many(3000)) / 3000
    held = rule.settings([prefix], "en", "de")
    assert held_out_size(3000, None) == 200 and held.valid_tokens == int(200 * words * 2)
    cjk = corpus(tmp_path / "given", [("Open the file.", "打开文件")] * 50, name="zh")
    assert rule.dev_tokens([], [find_corpus(cjk, "en", "de")], 3000, "CJK") == 50 * 4 * 2
    assert rule.settings([prefix], "en", "de", 1200).valid_tokens == held.valid_tokens  # MAX_UPDATE's time, too


def test_a_vocabulary_per_side_where_the_scripts_differ(tmp_path):
    prefix = corpus(tmp_path, [(e, "Документ номер %d." % i) for i, e in enumerate(ENGLISH * 30)])
    tsv = tmp_path / "p.tsv"
    tsv.write_text("".join(f"{e}\tDatei {i}\n" for i, e in enumerate(ENGLISH * 30)))
    assert rule.settings([prefix], "en", "de").joint is False and rule.settings([str(tsv)], "en", "de").joint is True
    assert rule.settings([prefix, str(tsv)], "en", "de").pairs == 600
