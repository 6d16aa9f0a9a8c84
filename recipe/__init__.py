"""The recipes' Python: what recipes/*.sh ask before and while they run, above ``preprocess`` (which it reads
corpora with) and below ``benchmarks``. Nothing here is loaded by fairseq's ``--user-dir``.

    plan.py             the settings that fit a corpus and a budget, decided before any work
    budget_rule.py      how the model, batch and updates are picked: the lowest predicted validation loss
    speed_probe.py      vaswani-speed-probe  seconds an update of a model here; TIME= into updates
    probe_arithmetic.py the probe's arithmetic: durations, validations' cost, updates that fit
    parent.py           vaswani-parent       whether a published model fits INIT=, or the file at fault
    languages.py        a parent's language codes (ISO 639-1, 639-3, groups) against SRC and TGT
    finetuning.py       INIT='s batch, rate and length, from the practice of fine-tuning OPUS-MT models
    layout.py           machines, processes and batch of a training
    engine/             the stages: stamps, the decision for every stage before any work, their processes
"""
