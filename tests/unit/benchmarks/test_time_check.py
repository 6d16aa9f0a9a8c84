"""benchmarks/time_check.py: fairseq-train's seconds an update read from its log, and the table beside the probe's."""

import pytest

from benchmarks import time_check


def _record(updates, wall, wpb):
    return (
        f'2026-11-28 19:40:36 | INFO | train_inner | {{"epoch": 1, "wpb": "{wpb}", "num_updates": "{updates}", '
        f'"train_wall": "5", "wall": "{wall}"}}\n'
    )


def test_fairseq_seconds_an_update_leave_out_the_first_logged_interval(tmp_path):
    """Start-up and warm-up land in the first interval (here 40 s for 100 updates); the rest, 2 intervals of 100
    updates in 10 and 20 s, give 0.15 s an update and their own tokens an update."""
    log = tmp_path / "train.log"
    log.write_text(
        "fairseq starts\n" + _record(100, 40, 9000) + "a validation\n" + _record(200, 50, 3000) + _record(300, 70, 3500)
    )
    found = time_check.fairseq_speed(str(log))
    assert found == {"seconds": pytest.approx(0.15), "wpb": 3250, "clock": 70.0, "updates": 300}


def test_too_few_logged_intervals_are_refused_by_name(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(_record(100, 40, 9000) + _record(200, 50, 3000))
    with pytest.raises(RuntimeError, match=r"train\.log: 2 logged intervals, at least 3 needed"):
        time_check.fairseq_speed(str(log))


def test_the_table_puts_fairseqs_time_over_the_probes():
    row = {
        "candidate": "short",
        "settings": {
            "ARCH": "vaswani_base",
            "MODEL_FLAGS": "--encoder-layers 3",
            "DROPOUT": "0.1",
            "VOCAB_SIZE": "8000",
        },
        "probe_seconds": 0.033,
        "probe_tokens": 4096,
        "recipe_said": "time: training about 71 s here (300 updates)",
        "fairseq": {"seconds": 0.3667, "wpb": 3319.4, "clock": 120.5, "updates": 300},
        "bleu": 1.5,
        "chrf": 20.25,
    }
    lines = time_check.table([row]).splitlines()
    assert lines[0].startswith("| candidate | model | probe s/update | fairseq s/update | fairseq / probe |")
    assert lines[1] == "|" + "---|" * 10
    assert lines[2] == (
        "| short | vaswani_base --encoder-layers 3 P_drop 0.1, BPE 8000 | 0.0330 | 0.3667 | 11.11 | 3,319 of 4,096 "
        "| 120.5 s (300 updates) | about 71 s here (300 updates) | 1.50 | 20.25 |"
    )


def test_unknown_candidates_and_two_vocabularies_are_refused(tmp_path):
    corpus = tmp_path / "train"
    for side in ("en", "de"):
        (tmp_path / f"train.{side}").write_text("a line\n" * 20)
    c = time_check.parse_corpus(f"toy={corpus}:en:de")
    with pytest.raises(SystemExit, match="--candidates: N=9 unknown; known: short, class"):
        time_check.check(c, ["short", "N=9"], 300, 1, 2, "bf16", str(tmp_path / "w"))
    with pytest.raises(SystemExit, match=r"one vocabulary, not \['2000', '500'\]"):
        time_check.check(c, ["short", "BPE2k"], 300, 1, 2, "bf16", str(tmp_path / "w"))
