"""Fixtures shared by every tier; the helpers they use are in helpers.py."""

import os
import random
import subprocess

import pytest
from helpers import WORDS, made_once, make_dictionary, run_tool


@pytest.fixture
def dictionary():
    return make_dictionary(40)


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory):
    """A reversal task (target = source reversed), binarized with a joined dictionary; made once a run
    (helpers.made_once). Tests write only into subdirectories of their own."""

    def make(root):
        rng = random.Random(0)
        for split, n in [("train", 300), ("valid", 30), ("test", 12)]:
            with open(root / f"{split}.src", "w") as src, open(root / f"{split}.tgt", "w") as tgt:
                for _ in range(n):
                    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
                    src.write(" ".join(words) + "\n")
                    tgt.write(" ".join(reversed(words)) + "\n")
        run_tool(
            "fairseq-preprocess",
            "--source-lang",
            "src",
            "--target-lang",
            "tgt",
            "--trainpref",
            str(root / "train"),
            "--validpref",
            str(root / "valid"),
            "--testpref",
            str(root / "test"),
            "--joined-dictionary",
            "--destdir",
            str(root / "bin"),
            "--workers",
            "1",
        )

    return made_once(tmp_path_factory, "reversal", make)


@pytest.fixture(scope="module")
def toy_gold(tmp_path_factory):
    """The project's small treebank (LDC layout) prepared by preprocess.ptb: (directory, report, the
    test split's gold trees). For the treebank's preparation and for EVALB scoring."""
    from preprocess import ptb
    from transformer_plugin_cli.parsing.trees import parse_tree

    root = tmp_path_factory.mktemp("ptb")
    ptb.write_toy_treebank(str(root / "tb"), sentences_per_file=10, files_per_section=1)
    report = ptb.prepare(str(root / "tb"), str(root / "out"), log=lambda *_: None)
    return root, report, [parse_tree(line) for line in (root / "out" / "test.gold").read_text().splitlines()]


@pytest.fixture
def small_disk():
    """mount(directory, size): a tmpfs of ``size`` bytes at ``directory``, or, mounted already, the same one
    resized (its files kept); unmounted when the test ends. Root only: skipped elsewhere, saying why."""
    if os.geteuid() != 0:
        pytest.skip("a small disk is a tmpfs, which only root mounts here")
    mounted = []

    def mount(directory, size):
        directory.mkdir(parents=True, exist_ok=True)
        option = f"size={size}" if not mounted or directory not in mounted else f"remount,size={size}"
        subprocess.run(["mount", "-t", "tmpfs", "-o", option, "tmpfs", str(directory)], check=True)
        if directory not in mounted:
            mounted.append(directory)

    yield mount
    for directory in mounted:
        subprocess.run(["umount", str(directory)], check=False)
