"""The budget rule's law: the validation loss a model reaches after a training, in bits per target piece
(docs/budget-rule.md). The rest of the rule: this package's ``__init__``.

Every candidate's validation loss at the end of the training the budget gives it is predicted, in bits per target
piece, and the pick is the candidate of the lowest predicted loss. One prediction serves every scale, from minutes of a
CPU core on 20k pairs to days of 64 GPUs on 36M; its form is the data-constrained scaling law of the NMT and language
model scaling studies (Ghorbani et al. 2021; Gordon et al. 2021; Hoffmann et al. 2022; Muennighoff et al. 2023):

    L = E + A * N ** -ALPHA + B * (D_min / 1e6) ** -BETA + O(R)

- ``E``, the floor: what no model or data removes (the corpus's own entropy at its vocabulary), fitted per corpus and
  never negative; a corpus the fit never saw gets the floor of the fitted corpora of its size
  (:func:`.evidence.floor_for`).
  No prediction goes below it.
- capacity, ``A N^-ALPHA``: N the model's parameters in millions, embeddings left out (Kaplan et al. 2020: so that
  models of different vocabularies line up), counted from its flags as the paper counts
  (:func:`.candidates.parameters`).
- data, ``B (D_min / 1e6)^-BETA``: the target tokens of training, worth less as they repeat the corpus and as the batch
  passes the gradient's noise scale.
  - ``D_eff = U (1 + R* (1 - exp(-R / R*)))`` for R epochs past the first of a corpus of U target tokens
    (Muennighoff et al. 2023): an epoch repeated is worth less than new text, the more so the more it is repeated.
    Without dropout R* is Muennighoff et al.'s fitted R_D* (15.39 epochs; their models had no dropout), and it
    grows with dropout's regularisation, ``p / (1 - p)`` (Wager et al. 2013, "Dropout training as adaptive
    regularization"), to ``repeats_at_01`` at the paper's P_drop 0.1.
  - ``D_min = k D_eff / (1 + b / B_noise(L))``: updates of b tokens are worth ``1 / (1 + b / B_noise)`` of their
    tokens (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training"), and the gradient's noise scale
    grows as the loss falls, ``B_noise ∝ L ** -1/0.21`` (Kaplan et al. 2020, Section 5.1), so that a large batch
    pays late in training and not early. ``k``: dropout slows what a token teaches, ``exp(-KAPPA (p - 0.1))``, and
    deeper models start slower (:func:`depth_learning`), a cost gone long before the paper's 100K updates.

- the turn, ``O(R)``: past its :func:`onset`, about 6 epochs, a model learns its training set by heart and its dev
  loss gains :func:`rise_rate` bits an epoch, less the stronger its dropout (:func:`overfitting`). The runs taken
  past their lowest dev loss measure it (benchmarks/records/budget_curves/): without dropout the dev loss of 2+2
  layers of 256 turns up after 6.5 to 7 epochs on 22k and on 77k pairs, of 2+2 x 512 after 5.6 on 22k, and Table 3's
  P_drop 0 row is that turn after 9 epochs of base.

Every other term falls, or stays, as a candidate's training grows, so each candidate's L falls to one lowest
(:func:`.predictions.lowest_updates`) and rises past it. A candidate is ranked by the lowest dev loss it reaches within
its updates (:func:`.predictions.predicted_loss`), and a budget's training never falls as the budget grows, so the
pick's predicted loss never rises with the budget. A TIME's updates stop at the pick's lowest, or where they would
repeat the corpus past what repetition can still teach (``USEFUL_REPEATS`` R*), and the plan says that more time will
not help. A MAX_UPDATE given is trained as given, and the plan says where it passes those: past the turn the dev loss
rises while BLEU may still grow (measured: docs/budget-rule.md, "The turn").

Where each constant comes from (benchmarks/budget_fit.py fits and prints them, in three least-squares fits in turn):
A, ALPHA, B, BETA and the floors from this project's budget runs (benchmarks/records/budgets/*.json, 2 and 3 layers
of d_model 256 on 22k and 77k pairs, 150 to 7,000 updates) together with the paper's Table 3 (the base model, rows
(C) and big, on WMT14 EN-DE after 100K and 300K updates of 25,000 tokens); KAPPA and depth's early rate from the
learning benchmark's ablation (docs/benchmarks.md: P_drop 0.3, 3 and 6 layers of 512, up to 1,200 updates); the
turn's rate, onset and dropout factor from the runs taken past their lowest dev loss (benchmarks/records/
budget_curves/: 2+2 and 3+3 layers of 256 and 2+2 of 512 without dropout and 2+2 x 256 at P_drop 0.1 and 0.3 on 22k
pairs, 2+2 x 256 without dropout on 77k pairs) together with Table 3's fitted rows. Rows (B) and (D)'s P_drop rows
are left out of the fit and held as its test (tests/unit/recipes/test_budget_rule.py): they rank as the paper's, and
P_drop 0 lies 0.16 bits above it (the curves span 1.5 to 20 parameters a corpus token, Table 3's base 0.16; a fit of
1.4% more cost puts that row 0.18 under). Held, not fitted: R* at P_drop 0.1 at the fit's 17.81 epochs from before
the turn was in it (fitted with it, R* and the turn trade against each other and R* runs to any bound); the noise
scale's exponent (Kaplan et al.); its size at 5 bits (``noise_batch_at_5_bits``: the budget runs learn about as much
an update at 2,048 tokens as at 4,096, so it is of that size there; at WMT14's loss it is then 80,000 tokens, of the
order of the batches that Ott et al. 2018, "Scaling Neural Machine Translation", found still pay); R* without dropout
(Muennighoff et al.'s R_D*); and the 4,000 updates over which depth's cost fades (the paper's warm-up, Section 5.3).
P_drop 0 is no candidate: the paper's rows and the curves say it turns early and learns no faster before.
Every pick says whether it rests on measurements, on the paper, or on an extrapolation (:func:`.evidence.evidence`).
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Constants:
    """The prediction's constants (this module's docstring): the fitted ones first, then the held."""

    capacity_a: float  # bits
    capacity_alpha: float
    data_b: float  # bits
    data_beta: float
    repeats_at_01: float  # R* at P_drop 0.1: epochs of repetition
    dropout_kappa: float  # k = exp(-kappa (p - 0.1))
    depth_rate_6: float  # early in training, what a token teaches 6 layers a side against 2 (depth_learning)
    turn_rate: float = 0.0  # the rise past the turn, bits an epoch, at P_drop 0 and one parameter a corpus token
    turn_exponent: float = 0.0  # ... grows as (parameters per corpus token) ** this
    turn_onset: float = 0.0  # epochs: where the rise starts, at one parameter a corpus token
    turn_onset_exponent: float = 0.0  # ... later as (parameters per corpus token) ** this
    turn_dropout: float = 0.0  # the rise at P_drop p is the rate over 1 + this * p / (1 - p)
    depth_updates: float = 4000.0  # the updates over which that fades: held, the paper's warm-up (Section 5.3)
    noise_batch_at_5_bits: float = 2000.0  # target tokens: B_noise where the loss is 5 bits
    noise_exponent: float = 1 / 0.21  # Kaplan et al. 2020's 1 / alpha_B
    repeats_without_dropout: float = 15.39  # R* at P_drop 0: Muennighoff et al. 2023's R_D*, fitted without dropout


# ---- generated by python -m benchmarks.doc_tables (fit): do not edit
FIT = Constants(
    capacity_a=1.652,
    capacity_alpha=0.5781,
    data_b=5.36,
    data_beta=0.1953,
    repeats_at_01=17.81,
    dropout_kappa=1.322,
    depth_rate_6=0.3496,
    turn_rate=0.1553,
    turn_exponent=0.06798,
    turn_onset=5.874,
    turn_onset_exponent=-0.01758,
    turn_dropout=66.52,
)


FLOORS = {"de_77k": 0.000, "ru_22k": 0.475, "wmt14_en_de": 0.835}  # bits: each corpus's floor, fitted


FIT_RMS = {"budget runs": 0.474, "ablation": 0.521, "Table 3": 0.044, "curves": 0.264}  # bits, over the points fitted


# bits: the rule's own error in ranking two candidates (budget_fit.ranking_error): the largest predicted gap
# of two budget runs ranked the wrong way round, and the rms of the rows held out of Table 3
RANKING_ERROR = {"budget runs": 0.246, "Table 3": 0.084}
# ---- end of generated (fit)


FLOOR = round((FLOORS["de_77k"] + FLOORS["ru_22k"]) / 2, 3)  # an unseen corpus under 1M pairs: the small ones'


FLOOR_LARGE = FLOORS["wmt14_en_de"]  # an unseen corpus of 1M pairs or more: WMT14's


USEFUL_REPEATS = 3  # past 3 R* repeated epochs a candidate's D_eff is within 5% of its limit: more updates, no use


def repeats(constants: Constants, dropout: float) -> float:
    """R*: the repeated epochs over which repetition's worth decays, at P_drop ``dropout``: Muennighoff et al.'s R_D*
    of models trained without dropout, and above it what dropout adds, growing with its strength as a regulariser,
    p / (1 - p) (Wager et al. 2013), to ``repeats_at_01`` at the paper's P_drop 0.1."""
    added = max(constants.repeats_at_01 - constants.repeats_without_dropout, 0.0)
    return constants.repeats_without_dropout + added * (dropout / (1 - dropout)) / (0.1 / 0.9)


def effective_tokens(tokens: float, corpus_tokens: float, r_star: float) -> float:
    """D_eff: ``tokens`` of training on a corpus of ``corpus_tokens`` target tokens, repeated epochs worth less."""
    if corpus_tokens <= 0 or tokens <= corpus_tokens:
        return tokens
    if r_star <= 0:
        return corpus_tokens
    return corpus_tokens * (1 + r_star * (1 - math.exp(-(tokens / corpus_tokens - 1) / r_star)))


def noise_batch(constants: Constants, loss: float) -> float:
    """B_noise at a loss of ``loss`` bits: the batch past which more tokens an update teach less each (Kaplan et al.
    2020's critical batch, growing as the loss falls)."""
    return constants.noise_batch_at_5_bits * (max(loss, 0.5) / 5.0) ** -constants.noise_exponent


def depth_learning(constants: Constants, layers: int, updates: float) -> float:
    """What a token teaches a model of ``layers`` layers a side against 2, ``updates`` into training: deeper models
    start slower (the ablation: 6 layers of 512 at update 400 were where 3 of 512 were at 200) and the difference
    fades over ``depth_updates``, so that after the paper's 100K updates depth costs nothing."""
    rate = constants.depth_rate_6 ** ((max(layers, 2) - 2) / 4)
    return 1 - (1 - rate) * math.exp(-updates / constants.depth_updates)


def rise_rate(constants: Constants, n: float, dropout: float, corpus_tokens: float) -> float:
    """Bits an epoch that the dev loss of a model of ``n`` million parameters (embeddings left out) at P_drop
    ``dropout`` gains past its :func:`onset` on a corpus of ``corpus_tokens`` target tokens (0: unknown, none): a power
    of the parameters a corpus token (never falling with them: the curves, at 1.5 to 7.5, fit it flat), divided as
    dropout's strength as a regulariser grows, ``p / (1 - p)`` (Wager et al. 2013). Fitted to the runs taken past their
    lowest dev loss (benchmarks/records/budget_curves/*.json) and Table 3."""
    if corpus_tokens <= 0 or constants.turn_rate <= 0:
        return 0.0
    per_token = n / (corpus_tokens / 1e6)
    regularised = 1 + constants.turn_dropout * dropout / (1 - dropout)
    return constants.turn_rate * per_token**constants.turn_exponent / regularised


def onset(constants: Constants, n: float, corpus_tokens: float) -> float:
    """The epochs after which a model of ``n`` million parameters (embeddings left out) starts to learn a corpus of
    ``corpus_tokens`` target tokens by heart: a power of the parameters a corpus token, fitted nearly flat (the dev
    loss without dropout was lowest after 6.5 epochs for 2+2 x 256 on 77k pairs, 6.9 on 22k, 8.0 for 3+3 on 22k)."""
    return constants.turn_onset * (n / (corpus_tokens / 1e6)) ** constants.turn_onset_exponent


def overfitting(constants: Constants, n: float, dropout: float, tokens: float, corpus_tokens: float) -> float:
    """The bits a model's dev loss has gained by learning its training set by heart after ``tokens`` of training:
    :func:`rise_rate` an epoch past its :func:`onset`."""
    rate = rise_rate(constants, n, dropout, corpus_tokens)
    if rate <= 0:
        return 0.0
    return rate * max(tokens / corpus_tokens - onset(constants, n, corpus_tokens), 0.0)


def loss(
    constants: Constants,
    n: float,
    layers: int,
    dropout: float,
    tokens_per_update: float,
    updates: float,
    corpus_tokens: float,
    floor: float,
) -> float:
    """L: the validation loss in bits per target piece of a model of ``n`` million parameters (embeddings left out)
    and ``layers`` layers a side at P_drop ``dropout`` after ``updates`` updates of ``tokens_per_update`` target
    tokens, on a corpus of ``corpus_tokens`` (0: unknown, no repetition counted) whose floor is ``floor`` (this
    module's docstring)."""
    tokens = updates * tokens_per_update
    if tokens <= 0:
        return math.inf
    k = math.exp(-constants.dropout_kappa * (dropout - 0.1)) * depth_learning(constants, layers, updates)
    taught = k * effective_tokens(tokens, corpus_tokens, repeats(constants, dropout))
    capacity = constants.capacity_a * n**-constants.capacity_alpha
    without_noise = floor + capacity + constants.data_b * (taught / 1e6) ** -constants.data_beta
    d_min = taught / (1 + tokens_per_update / noise_batch(constants, without_noise))
    learnt = floor + capacity + constants.data_b * (d_min / 1e6) ** -constants.data_beta
    return learnt + overfitting(constants, n, dropout, tokens, corpus_tokens)
