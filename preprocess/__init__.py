"""The data preparation of the recipes and benchmarks: what turns corpora into the text fairseq-preprocess
binarises. One of the project's four packages, each importing only those below it:

    recipes/                  the recipes' Python: the plan of a run (settings by corpus and budget, the
                             speed probe, the parent's check, the batch layout) and the engine of stages
    preprocess/              this package: corpora in, clean text and vocabularies out (stages 1-2 of
                             the recipes), before any model exists
    transformer_plugin_cli/  the tools that work on models and their outputs (averaging, evaluation,
                             EVALB, reports, Table 3, exports, translation)
    transformer_plugin/      what fairseq's --user-dir loads: the paper's model, criterion, schedule

Each module but corpora.py and cleaning.py is a console script and runs with ``python -m preprocess.<module>``:

    wmt14.py                vaswani-prepare-wmt14        WMT14 En-De / En-Fr: fetch, verify, extract, clean
    sentencepiece_vocab.py  vaswani-sentencepiece        train and apply a joint sentencepiece vocabulary
    synthetic_pair.py       vaswani-synthetic-pair       the demo's synthetic language pair
    debian_l10n.py          vaswani-prepare-debian-l10n  the learning benchmark's corpus (Debian's catalogues)
    parallel_text.py        vaswani-prepare-parallel-text  one's own parallel text: checked, cleaned, split
    corpora.py              (read by it and recipes/)       corpora as given: files, line counts, pairs, scripts
    cleaning.py             (read by the three preparations)  the one cleaner: a rule set for each kind of text
    ptb.py                  vaswani-prepare-ptb          the WSJ trees, cleaned and linearised (Section 6.3)
    shards.py               vaswani-shard-text           the training text in N round-robin shards (SHARDS=N)

None imports fairseq or torch. They share the tools' atomic writes (transformer_plugin_cli/files.py), and
ptb.py the tree model that EVALB scoring reads back (transformer_plugin_cli/parsing/trees.py); the tools
never import this package, and recipes/ reads its corpora (corpora.py) to plan a run.
"""
