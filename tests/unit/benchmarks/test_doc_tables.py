"""benchmarks/doc_tables.py: the budget rule's constants (recipes/planner/budget/law.py) and docs/budget-rule.md's
tables are what ``python -m benchmarks.doc_tables`` writes from benchmarks/records: a refit is that one command."""

import pytest

pytest.importorskip("scipy")

from benchmarks import budget_fit, doc_tables


@pytest.fixture(scope="module")
def found():
    return budget_fit.fit(doc_tables.RECORDS)


def test_every_block_is_what_the_records_give(found):
    differ = [path for path, (now, new) in doc_tables.written(found).items() if now != new]
    assert not differ, f"{differ}: run python -m benchmarks.doc_tables"


def test_a_figure_edited_by_hand_is_found(found, capsys, monkeypatch):
    """A constant changed in the page, or the records giving another fit, fails the check, naming the file."""
    (path, name), block = next((k, v) for k, v in doc_tables.BLOCKS.items() if k[1] == "held-out rows")
    lines = block(found)
    assert lines[2].startswith("| (B) d_k 16 | 5.16 | 2.367 |")
    edited = {**found, "test": {**found["test"], "B-dk16": found["test"]["B-dk16"] + 0.01}}
    now, new = doc_tables.written(edited)[path]
    assert now != new
    monkeypatch.setattr(budget_fit, "fit", lambda records: edited)
    assert doc_tables.main(["--check"]) == 1
    assert (
        "docs/budget-rule.md: not what the records give; run python -m benchmarks.doc_tables" in capsys.readouterr().err
    )


def test_a_block_without_its_markers_is_named():
    with pytest.raises(SystemExit, match=r"docs/budget-rule.md: no block 'turn'"):
        doc_tables.replaced("no markers here\n", "docs/budget-rule.md", "turn", [])
