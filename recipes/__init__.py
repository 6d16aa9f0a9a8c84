"""The recipes: the scripts (``*.sh``; ``lib.sh``, ``wmt14.sh`` and ``parallel_text_common.sh`` the parts they share)
and the Python they run, above ``preprocess`` (which it reads corpora with) and below ``benchmarks``. Nothing here is
loaded by fairseq's ``--user-dir``.

    planner/                what a run trains, decided before any work (python -m recipes.planner)
        settings.py             every variable of parallel_text.sh and finetune.sh, declared once
        paper_settings.py       ... and of the paper's recipes (wmt14_*.sh, wsj_parsing.sh), once per default
        declarations.py         both, by recipe: its --help, its checks (PRECISION), its stamps' settings
        decide.py               the plan of a run of parallel_text.sh or finetune.sh, from its variables
        after_training.py       fairseq-generate's flags and the exports a parent allows
        variables.py            the recipe's variables as handed over, and their checks
        plan.py                 the plan itself; saved.py: held in WORK; fields.py: read back by the recipe (PLAN_*)
        summary.py              the lines a recipe prints of its plan
        speeds.py               the training machines' speed as the plan reads it
        budget/                 the budget rule: the model, dropout, batch and updates a budget gets (its __init__)
        speed/                  vaswani-speed-probe  seconds an update of a model here, speed files, TIME's updates
        probe_arithmetic.py     durations, validations' cost, updates that fit
        finetuning.py           finetune.sh's batch, rate and length, from the practice of fine-tuning OPUS-MT models
        parent.py               vaswani-parent       whether a published model fits INIT=, or the file at fault
        layout.py               machines, processes and batch of a training
        model.py                a model's flags: its sizes and parameters, as the paper counts them
    engine/                 the stages: stamps, the decision for every stage before any work, their processes

A recipe for another dataset: a script here on lib.sh's stages (wsj_parsing.sh is the shortest), its variables
declared in planner/paper_settings.py, and its data's preparation in preprocess/ with a rule set of
preprocess/cleaning.py.
    records.py              what lib.sh hands to Python (stages, variables, files), read as data
"""
