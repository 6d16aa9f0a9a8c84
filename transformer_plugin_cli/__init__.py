"""The plugin's tools, beside the plugin (as ``fairseq_cli`` sits beside ``fairseq``).

``transformer_plugin`` is what fairseq's ``--user-dir`` loads; this package is everything a user runs
around fairseq's own commands. Each tool is a console script and runs with ``python -m`` too:

    tools/    vaswani-user-dir             the directory to give fairseq as --user-dir
              vaswani-average-checkpoints  Section 6.1: average the last checkpoints
              vaswani-evaluate             sacreBLEU and tokenized BLEU of fairseq-generate's output
              vaswani-report               loss and Eq. (3) curves, attention maps, scores
              vaswani-table3               Table 3's rows: plan and collect
              vaswani-convert              a fairseq `transformer` checkpoint into a vaswani_transformer one
    serving/  vaswani-export-ct2           a checkpoint into a CTranslate2 model
              vaswani-translate            translate text with that model
              vaswani-export-hf            a checkpoint into a Hugging Face Transformers MarianMT model
    parsing/  vaswani-evalb                EVALB-conformant bracket scores (Section 6.3)
              vaswani-prepare-ptb          the Penn Treebank's WSJ trees, cleaned and linearised
    data/     vaswani-prepare-wmt14        WMT14 En-De / En-Fr: fetch, verify, extract, clean
              vaswani-sentencepiece        train and apply a joint sentencepiece vocabulary
              vaswani-synthetic-pair       the demo's synthetic language pair
              vaswani-prepare-debian-l10n  the learning benchmark's corpus (Debian's translation catalogues)
    paper.py  vaswani-paper-flags          the paper's fairseq-train / fairseq-generate flags

Shared: ``fairseq_output.py`` reads fairseq's logs and generate output; ``files.py`` writes files
atomically. Tools that need no model (evalb, the trees, Table 3's plan, evaluate, the data
preparations, the decoding flags) do not import fairseq.
"""

__version__ = "0.1.0"
