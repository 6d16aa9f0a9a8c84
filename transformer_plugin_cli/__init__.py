"""The plugin's tools, beside the plugin (as ``fairseq_cli`` sits beside ``fairseq``): what works on models
and their outputs.

``transformer_plugin`` is what fairseq's ``--user-dir`` loads; ``preprocess`` prepares the corpora before
any model exists; this package is everything a user runs on a model or its output around fairseq's own
commands. Each tool is a console script and runs with ``python -m`` too:

    tools/    vaswani-user-dir             the directory to give fairseq as --user-dir
              vaswani-average-checkpoints  Section 6.1: average the last checkpoints
              vaswani-evaluate             sacreBLEU and tokenized BLEU of fairseq-generate's output
              vaswani-report               loss and Eq. (3) curves, attention maps, scores
              vaswani-table3               Table 3's rows: plan and collect
              vaswani-convert              a fairseq `transformer` checkpoint into a vaswani_transformer one
    serving/  vaswani-export-ct2           a checkpoint into a CTranslate2 model
              vaswani-translate            translate text with that model
              vaswani-export-hf            a checkpoint into a Hugging Face Transformers MarianMT model
              vaswani-import-marian        a MarianMT model (OPUS-MT's) into a checkpoint, dictionaries, sentencepiece
              vaswani-import-m2m100        an NLLB-200 or M2M100 model into the same, with its language codes
    parsing/  vaswani-evalb                EVALB-conformant bracket scores of parses (Section 6.3)
    paper.py  vaswani-paper-flags          the paper's fairseq-train / fairseq-generate flags

The recipes' own Python (the plan of a run, the speed probe, the parent's check, the engine of stages) is the
package ``recipe``, above this one.

Shared, with ``preprocess`` too: ``files.py`` writes files atomically; ``parsing/trees.py`` is the tree
model (the treebank's preparation linearises trees, EVALB scoring reads them back).
``fairseq_output.py`` reads fairseq's logs and generate output. ``languages.py``: language codes against
SRC and TGT (ISO 639), for INIT's parents and their imports. Tools that need no model (evalb, the
trees, Table 3's plan, evaluate, the decoding flags) do not import fairseq.
"""

__version__ = "0.1.0"
