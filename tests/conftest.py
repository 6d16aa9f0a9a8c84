"""Fixtures shared by every tier; the helpers they use are in helpers.py."""

import random

import pytest
from helpers import WORDS, make_dictionary, run_tool


@pytest.fixture
def dictionary():
    return make_dictionary(40)


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    """A reversal task (target = source reversed), binarized with a joined dictionary."""
    root = tmp_path_factory.mktemp("cli")
    rng = random.Random(0)
    for split, n in [("train", 300), ("valid", 30), ("test", 12)]:
        with open(root / f"{split}.src", "w") as src, open(root / f"{split}.tgt", "w") as tgt:
            for _ in range(n):
                words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
                src.write(" ".join(words) + "\n")
                tgt.write(" ".join(reversed(words)) + "\n")
    run_tool(
        "fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
        "--trainpref", str(root / "train"), "--validpref", str(root / "valid"), "--testpref", str(root / "test"),
        "--joined-dictionary", "--destdir", str(root / "bin"), "--workers", "1",
    )  # fmt: skip
    return root
