"""transformer_plugin_cli/fairseq_output.py on text as fairseq 0.12 prints it."""

import pytest

from transformer_plugin_cli.fairseq_output import hypotheses, log_records, numbers, sentence_lines, translation_speed

TRAIN_LOG = """\
2026-11-25 10:00:01 | INFO | fairseq_cli.train | task: TranslationTask
2026-11-25 10:00:02 | INFO | train_inner | {"epoch": 1, "update": 0.5, "loss": "9.1", "wps": "3000.5", "num_updates": "10"}
2026-11-25 10:00:03 | INFO | valid | {"epoch": 1, "valid_loss": "8.2", "valid_nll_loss": "8.0", "valid_num_updates": "20"}
2026-11-25 10:00:04 | INFO | train_inner | {"epoch": 1, "update": 1.0, "loss": "8.5", "wps": "3100", "num_updates": "20"}
2026-11-25 10:00:05 | INFO | train | {"epoch": 1, "train_loss": "8.8", "train_num_updates": "20"}
"""

GENERATE = """\
S-1\tb c
T-1\tc b
H-1\t-0.25\tc b
D-1\t-0.25\tc b
P-1\t-0.1 -0.2 -0.3
S-0\ta
H-0\t-0.5\ta a
H-0\t-0.9\ta
D-0\t-0.5\ta a
2026-11-25 10:00:06 | INFO | fairseq_cli.generate | Translated 1,002 sentences (3,004 tokens) in 2.5s (400.80 sentences/s, 1201.60 tokens/s)
"""


def test_log_records_by_tag_in_order():
    assert [r["num_updates"] for r in log_records(TRAIN_LOG, "train_inner")] == ["10", "20"]
    assert log_records(TRAIN_LOG, "valid")[0]["valid_nll_loss"] == "8.0"
    assert log_records(TRAIN_LOG, "train")[0]["train_loss"] == "8.8"
    assert numbers(log_records(TRAIN_LOG, "train_inner")[0]) == {
        "epoch": 1.0,
        "update": 0.5,
        "loss": 9.1,
        "wps": 3000.5,
        "num_updates": 10.0,
    }


def test_sentence_lines_keep_the_first_line_per_id():
    assert sentence_lines(GENERATE, "S") == {1: ["b c"], 0: ["a"]}
    assert sentence_lines(GENERATE, "H") == {1: ["-0.25", "c b"], 0: ["-0.5", "a a"]}  # the best of an n-best list


def test_hypotheses_in_corpus_order_and_missing_ids_refused():
    assert hypotheses(GENERATE.splitlines(), "D") == ["a a", "c b"]
    with pytest.raises(ValueError, match="1 D- hypotheses for 2 sentences; missing ids \\[0\\]"):
        hypotheses(GENERATE.replace("D-0", "X-0").splitlines(), "D", expected=2)


def test_translation_speed():
    speed = translation_speed(GENERATE)
    assert (speed.sentences, speed.seconds, speed.sentences_per_second) == (1002, 2.5, 400.8)
    with pytest.raises(ValueError, match="no 'Translated N sentences"):
        translation_speed(TRAIN_LOG)
