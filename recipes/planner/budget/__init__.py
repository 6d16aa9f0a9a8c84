"""The budget rule: which model, dropout and batch a budget of TIME or MAX_UPDATE gets on a corpus, the candidate of
the lowest predicted validation loss (docs/budget-rule.md). One module a job:

    law.py            the prediction, L(N, D, batch, epochs), and its fitted constants (benchmarks/budget_fit.py)
    candidates.py     the candidate models, dropouts and batches, and their sizes: add a candidate model here
    busy_share.py     a device's least share of the batch: the tokens that keep it busy
    predictions.py    the law along one candidate's training: its loss, its lowest, the updates that still help
    evidence.py       what a prediction rests on (measured, the paper, extrapolated); an unseen corpus's floor
    choosing.py       the pick among the candidates at a budget: ties on evidence, the model and batch never falling
    size_classes.py   the vocabulary and the full run by the corpus's size alone
    corpus_tokens.py  a corpus's target tokens, counted before any work
    explanation.py    the pick in words, for people
    rule.py           from a corpus and a budget to the settings: the entry point (rule.settings)
"""
