"""The recipes: the scripts (``*.sh``, with ``lib.sh`` the stages they share) and the Python they run, above
``preprocess`` (which it reads corpora with) and below ``benchmarks``. Nothing here is loaded by fairseq's
``--user-dir``.

    planner/            what a run trains, decided before any work (python -m recipes.planner)
        plan.py             the plan of a run of parallel_text.sh: its variables, checked, into one Plan
        budget/             the budget rule: how the model, batch and updates are picked (budget/__init__.py)
        speed/              vaswani-speed-probe  seconds an update of a model here, speed files; TIME= into updates
        probe_arithmetic.py the probe's arithmetic: durations, validations' cost, updates that fit
        parent.py           vaswani-parent       whether a published model fits INIT=, or the file at fault
        languages.py        a parent's language codes (ISO 639-1, 639-3, groups) against SRC and TGT
        finetuning.py       INIT='s batch, rate and length, from the practice of fine-tuning OPUS-MT models
        layout.py           machines, processes and batch of a training
        model.py            a model's flags: its sizes and parameters, as the paper counts them
    engine/             the stages: stamps, the decision for every stage before any work, their processes
    records.py          what lib.sh hands to Python (stages, variables, files), read as data
"""
