"""benchmarks.time_table: TIME's plan beside the run it gave, idle and loaded, over the documented cases."""

from benchmarks import time_table


def test_a_row_says_what_was_planned_what_ran_and_how_far_apart():
    row = {
        "case": "from nothing",
        "load": "busy",
        "time": "5m",
        "planned_updates": 1200,
        "trained_updates": 640,
        "planned_seconds": 285.0,
        "clock": 279.0,
        "replans": 2,
        "trained_seconds": 236.0,
        "deadline": 300,
        "whole_planned": 420.0,
        "wall": 455.0,
    }
    lines = time_table.table([row]).splitlines()
    assert lines[0].startswith("| case | core | TIME | updates planned | trained |")
    assert lines[2] == "| from nothing | busy | 5m | 1,200 | 640 | 225 s | 236 s | 1.05 | yes | 2 | 7 min | 8 min |"
    assert "| no | 2 |" in time_table.table([{**row, "trained_seconds": 300.0}])
    assert "| no |" in time_table.table([{**row, "replans": 0}])


def test_a_small_corpus_is_the_first_pairs_of_the_training_text(tmp_path):
    for side in ("en", "de"):
        (tmp_path / f"train.{side}").write_text("".join(f"{side} {i}\n" for i in range(10)))
    assert time_table.corpus(str(tmp_path), str(tmp_path / "w"), None)["VALID"] == f"{tmp_path}/valid"
    found = time_table.corpus(str(tmp_path), str(tmp_path / "w"), 3)
    assert found == {"TRAIN": f"{tmp_path}/w/small"}
    assert (tmp_path / "w" / "small.de").read_text() == "de 0\nde 1\nde 2\n"
