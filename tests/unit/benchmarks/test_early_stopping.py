"""benchmarks/early_stopping.py: where fairseq's --patience would stop a finished run, and what it hands over."""

import pytest

from benchmarks import early_stopping as es

# valid loss best at update 300 and rising after; BLEU still rising until 600
RUN = [
    {"update": 100 * (i + 1), "loss": loss, "bleu": bleu}
    for i, (loss, bleu) in enumerate(
        [(6.0, 5.0), (5.5, 8.0), (5.2, 10.0), (5.3, 11.0), (5.4, 11.5), (5.6, 12.0), (5.9, 11.0), (6.1, 12.0)]
    )
]


def test_patience_counts_validations_without_a_strict_improvement_as_fairseq_does():
    assert es.stop_index(RUN, "loss", 3) == 5  # 5.3, 5.4, 5.6 after the best 5.2: stop at the third
    assert es.stop_index(RUN, "loss", 2) == 4
    assert es.stop_index(RUN, "bleu", 2) == 7  # 11.0 and 12.0 (equal, not better) after 12.0
    assert es.stop_index(RUN, "bleu", 3) == 7 and es.stop_index(RUN, "loss", 0) == 7  # no stop: the last


def test_the_best_is_the_latest_of_equals_as_checkpoint_best_is_kept():
    assert es.best_index(RUN, "loss", 7) == 2
    assert es.best_index(RUN, "bleu", 7) == 7  # 12.0 at 600 and at 800
    assert es.best_index(RUN, "bleu", 6) == 5


def test_what_a_stopped_run_hands_over():
    assert es.handed_over(RUN, "loss", 3, 5) == {
        "last": (200, 300, 400, 500, 600),
        "best": (300,),
        "around best": (100, 200, 300),
    }
    assert es.handed_over(RUN, "bleu", 0, 3)["last"] == (600, 700, 800)


def test_validations_are_read_from_fairseqs_log_and_a_log_without_bleu_is_refused(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        'x | INFO | valid | {"epoch": 1, "valid_loss": "6.2", "valid_bleu": "3.41", "valid_num_updates": "100"}\n'
        'x | INFO | train_inner | {"num_updates": "110"}\n'
    )
    assert es.validations(str(log)) == [{"update": 100, "loss": 6.2, "bleu": 3.41}]
    work = tmp_path / "w"
    work.mkdir()
    (work / "train.log").write_text('x | INFO | valid | {"valid_loss": "6.2", "valid_num_updates": "100"}\n')
    with pytest.raises(SystemExit, match="no validations with BLEU"):
        es.measure(str(work), "ru", [3], 5, str(tmp_path / "out"))
