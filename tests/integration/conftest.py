"""Fixtures shared by several integration modules."""

import random

import pytest
from helpers import PLUGIN, TRAIN_FLAGS, made_once, run_in_process

from preprocess.sentencepiece_vocab import encode, train

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su"]


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """A model that copies a sentence, trained (300 updates) on text encoded with a joint sentencepiece
    BPE model, with a joined dictionary and --share-all-embeddings: (directory, spm model, test lines).
    The directory holds the raw text ({train,valid,test}.{src,tgt}), the pieces (sp.*), bin/ and
    ckpt/checkpoint_last.pt. For the serving tests and the Transformers export, made once a run (helpers.made_once)."""

    def make(root):
        rng = random.Random(1)
        words = [a + b for a in SYLLABLES for b in SYLLABLES[:4]]
        for split, n in [("train", 1500), ("valid", 30), ("test", 64)]:
            with open(root / f"{split}.src", "w") as src, open(root / f"{split}.tgt", "w") as tgt:
                for _ in range(n):
                    sentence = [rng.choice(words) for _ in range(rng.randint(2, 6))]
                    src.write(" ".join(sentence) + "\n")
                    tgt.write(" ".join(sentence) + "\n")
        spm = train([str(root / "train.src"), str(root / "train.tgt")], str(root / "spm"), 60)
        splits = [str(root / f"{s}.{side}") for s in ("train", "valid", "test") for side in ("src", "tgt")]
        encode(spm, splits, [p.replace(f"{root}/", f"{root}/sp.") for p in splits])
        run_in_process(
            "fairseq-preprocess",
            "--source-lang",
            "src",
            "--target-lang",
            "tgt",
            "--joined-dictionary",
            "--trainpref",
            str(root / "sp.train"),
            "--validpref",
            str(root / "sp.valid"),
            "--testpref",
            str(root / "sp.test"),
            "--destdir",
            str(root / "bin"),
            "--workers",
            "1",
        )
        run_in_process(
            "fairseq-train",
            str(root / "bin"),
            "--user-dir",
            PLUGIN,
            *TRAIN_FLAGS,
            "--max-update",
            "300",
            "--warmup-updates",
            "100",
            "--lr-multiplier",
            "0.3",
            "--dropout",
            "0",
            "--save-dir",
            str(root / "ckpt"),
            "--no-epoch-checkpoints",
            "--disable-validation",
        )

    root = made_once(tmp_path_factory, "serving", make)
    return root, str(root / "spm.model"), (root / "test.src").read_text().splitlines()
