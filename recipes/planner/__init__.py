"""What a recipe's run trains, decided once before any work: the corpus's facts, the budget rule's pick, the
machine's speed, the parent to fine-tune, the batch's layout and the schedule (recipes/__init__.py lists the
modules). ``python -m recipes.planner`` is what lib.sh's ``plan_run`` runs."""
