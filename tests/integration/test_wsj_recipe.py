"""recipes/wsj_parsing.sh: the paper's settings in --dry-run, and the whole recipe at toy size on CPU
on a small treebank in the LDC layout that the project writes itself."""

import json
import os

import pytest

from helpers import PYTHON, commands, flag, run_recipe
from transformer_plugin_cli.parsing.trees import parse_tree


@pytest.mark.parametrize(
    "extra, vocab, paper",
    [("", "16000", "91.3 (WSJ only)"), ("/data/a.trees /data/b.trees", "32000", "92.7 (semi-supervised)")],
)
def test_dry_run_shows_the_papers_settings(tmp_path, extra, vocab, paper):
    proc = run_recipe(
        "wsj_parsing.sh",
        tmp_path / "w",
        "--dry-run",
        TREEBANK="/ldc/treebank_3/parsed/mrg",
        GPUS="8",
        EXTRA_TREES=extra,
    )
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "w").exists()
    [prepare] = [c for c in commands(proc.stdout, PYTHON) if "preprocess.ptb" in c]
    assert flag(prepare, "--treebank") == "/ldc/treebank_3/parsed/mrg"
    assert ("--extra-trees" in prepare) == bool(extra)
    [binarize] = commands(proc.stdout, "fairseq-preprocess")
    assert flag(binarize, "--nwordssrc") == vocab
    [train] = commands(proc.stdout, "fairseq-train")
    assert flag(train, "--arch") == "vaswani_parsing" and flag(train, "--max-tokens") == "3125"
    assert "--share-decoder-input-output-embed" in train and "--attention-dropout" in train
    [generate] = commands(proc.stdout, "fairseq-generate")
    assert [flag(generate, f) for f in ("--beam", "--lenpen", "--max-len-a", "--max-len-b")] == [
        "21",
        "0.3",
        "1",
        "300",
    ]
    [score] = [c for c in commands(proc.stdout, PYTHON) if "transformer_plugin_cli.parsing.evalb" in c]
    assert flag(score, "--paper") == paper


def test_extra_trees_as_docs_recipes_md_shows_them_a_pattern_expanded(tmp_path):
    """EXTRA_TREES="/data/silver/*.trees": `read -a` did not expand it, and preprocess/ptb.py refused the literal."""
    (tmp_path / "silver").mkdir()
    for name in ("b.trees", "a.trees", "notes.txt"):
        (tmp_path / "silver" / name).write_text("(S (NP x))\n")
    proc = run_recipe(
        "wsj_parsing.sh",
        tmp_path / "w",
        "--dry-run",
        TREEBANK="/ldc/treebank_3/parsed/mrg",
        EXTRA_TREES=f"{tmp_path}/silver/*.trees /data/one.trees",
    )
    assert proc.returncode == 0, proc.stderr
    [prepare] = [c for c in commands(proc.stdout, PYTHON) if "preprocess.ptb" in c]
    extra = prepare[prepare.index("--extra-trees") + 1 :]
    assert extra == [f"{tmp_path}/silver/a.trees", f"{tmp_path}/silver/b.trees", "/data/one.trees"]
    assert "note: EXTRA_TREES: no file matches /data/one.trees here" in proc.stdout
    real = run_recipe("wsj_parsing.sh", tmp_path / "w", TREEBANK=str(tmp_path), EXTRA_TREES=f"{tmp_path}/silver/*.tree")
    assert real.returncode == 2 and f"EXTRA_TREES: no file matches {tmp_path}/silver/*.tree" in real.stderr


def test_a_treebank_is_required(tmp_path):
    proc = run_recipe("wsj_parsing.sh", tmp_path / "w")
    assert proc.returncode == 2 and "TREEBANK is not set" in proc.stderr


@pytest.mark.e2e
def test_toy_run_end_to_end(tmp_path):
    work = tmp_path / "wsj toy"
    proc = run_recipe(
        "wsj_parsing.sh",
        work,
        TOY="1",
        TOY_MAX_UPDATE="30",
        TOY_SAVE_INTERVAL_UPDATES="10",
        TOY_WARMUP="15",
        TOY_BEAM="4",
        CPU_WORKERS="1",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for header in ("0:", "1:", "2:", "3:", "4:", "5:", "6:"):
        assert f"==== stage {header}" in proc.stdout
    assert os.path.isfile(work / "toy-treebank" / "wsj" / "23" / "wsj_2300.mrg")
    scores = json.loads((work / "results" / "scores.test.json").read_text())
    assert scores["all"]["sentences"] == 40 and scores["all"]["skipped"] == 0
    assert 0 <= scores["all"]["f1"] <= 100 and scores["all"]["gold_brackets"] > 40
    assert "sentences_repaired" in scores["repairs"]
    parsed = (work / "results" / "test.parsed").read_text().splitlines()
    words = (work / "data" / "test.words").read_text().splitlines()
    assert [" ".join(parse_tree(t).words()) for t in parsed] == words  # every output became a tree over its input
    assert "paper (Table 4, WSJ 23 F1): 91.3 (WSJ only); ours" in proc.stdout
