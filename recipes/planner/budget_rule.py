"""The budget rule: which model, dropout and batch a budget of TIME or MAX_UPDATE gets on a corpus
(docs/parallel-text.md, "Budgets").

Every candidate's validation loss at the end of the training the budget gives it is predicted, in bits per target
piece, and the pick is the candidate of the lowest predicted loss. One prediction serves every scale, from minutes of a
CPU core on 20k pairs to days of 64 GPUs on 36M; its form is the data-constrained scaling law of the NMT and language
model scaling studies (Ghorbani et al. 2021; Gordon et al. 2021; Hoffmann et al. 2022; Muennighoff et al. 2023):

    L = E + A * N ** -ALPHA + B * (D_min / 1e6) ** -BETA + O(R)

- ``E``, the floor: what no model or data removes (the corpus's own entropy at its vocabulary), fitted per corpus and
  never negative; a corpus the fit never saw gets the floor of the fitted corpora of its size (:func:`floor_for`).
  No prediction goes below it.
- capacity, ``A N^-ALPHA``: N the model's parameters in millions, embeddings left out (Kaplan et al. 2020: so that
  models of different vocabularies line up), counted from its flags as the paper counts (recipes/planner/model.py).
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
(:func:`lowest_updates`) and rises past it. A candidate is ranked by the lowest dev loss it reaches within its
updates (:func:`predicted_loss`), and a budget's training never falls as the budget grows, so the pick's predicted
loss never rises with the budget. A TIME's updates stop at the pick's lowest, or where they would repeat the corpus
past what repetition can still teach (``USEFUL_REPEATS`` R*), and the plan says that more time will not help. A
MAX_UPDATE given is trained as given, and the plan says where it passes those: past the turn the dev loss rises while
BLEU may still grow (measured: docs/parallel-text.md, "The turn").

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
Every pick says whether it rests on measurements, on the paper, or on an extrapolation (:func:`evidence`).
"""

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from preprocess.corpora import (
    Corpus,
    CorpusError,
    count_lines,
    find_corpus,
    held_out_size,
    raw_pairs_unchecked,
    sides_scripts,
    units,
)
from recipes.planner.model import Model, shared
from recipes.planner.probe_arithmetic import BudgetError, parse_time, training_time, updates_that_fit


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


# ---- the fit (python -m benchmarks.budget_fit prints these; tests/unit/recipes/test_budget_rule.py holds them equal)
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
FLOOR = round((FLOORS["de_77k"] + FLOORS["ru_22k"]) / 2, 3)  # an unseen corpus under 1M pairs: the small ones'
FLOOR_LARGE = FLOORS["wmt14_en_de"]  # an unseen corpus of 1M pairs or more: WMT14's
FIT_RMS = {"budget runs": 0.474, "ablation": 0.521, "Table 3": 0.044, "curves": 0.264}  # bits, over the points fitted
USEFUL_REPEATS = 3  # past 3 R* repeated epochs a candidate's D_eff is within 5% of its limit: more updates, no use

SHORT_FLAGS = "--encoder-layers {n} --decoder-layers {n} --d-model 256 --d-ff 1024 --attention-heads 4"

# The candidates' models, from the budget runs' smallest to the paper's big (its P_drop 0.1 is big_en_fr's), each with
# where its curve comes from: the budget runs measured 2 and 3 layers of 256; Table 3 measured base and big.
MODELS: Tuple[Tuple[str, str, str], ...] = (
    ("vaswani_base", SHORT_FLAGS.format(n=2), "measured"),
    ("vaswani_base", SHORT_FLAGS.format(n=3), "measured"),
    ("vaswani_base", "--d-ff 1024 --attention-heads 4", "extrapolated"),  # fairseq's transformer_iwslt_de_en
    ("vaswani_base", "", "the paper"),  # Table 3's base
    ("vaswani_big", "", "the paper"),  # Table 3's big
)
DROPOUTS = (0.1, 0.3)  # the paper's two: base and big_en_fr's, big's
# tokens an update, up to the paper's 25,000 (Section 5.1); on several devices also one and two micro-batches of each
BATCHES = (2048, 4096, 8192, 12500, 25000)


@dataclass
class Candidate:
    """A model, its dropout and its batch; ``source``: where its model's curve comes from (MODELS)."""

    name: str
    arch: str
    model_flags: str
    dropout: float
    tokens_per_update: int
    source: str = "measured"

    @functools.cached_property
    def model(self) -> Model:
        return Model.from_flags(self.arch, self.model_flags)


def parameters(candidate: Candidate, vocab_size: int = 0, joint: bool = True) -> float:
    """The model's parameters in millions as the paper counts them (recipes/planner/model.py: embeddings once when
    shared, biases and LayerNorms left out); ``vocab_size`` 0: without the embeddings, the N of the prediction."""
    return _parameters(candidate.arch, candidate.model_flags, vocab_size, joint)


@functools.lru_cache(maxsize=None)
def _parameters(arch: str, model_flags: str, vocab_size: int, joint: bool) -> float:
    model = Model.from_flags(arch, model_flags)
    return Model(arch, (*model.words, *shared(joint))).parameters(vocab_size, biases=False) / 1e6


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


def lowest_updates(candidate: "Candidate", corpus_tokens: float, floor: float, constants: Constants = FIT) -> int:
    """The updates at which a candidate's predicted dev loss is lowest, past which it rises (:func:`overfitting`
    outgrowing what more repeats still teach); 0: it never rises (no corpus size, or no rise at all)."""
    return _lowest_updates(
        constants,
        candidate.arch,
        candidate.model_flags,
        candidate.dropout,
        candidate.tokens_per_update,
        corpus_tokens,
        floor,
    )


@functools.lru_cache(maxsize=10_000)
def _lowest_updates(
    k: Constants, arch: str, flags: str, dropout: float, tokens_per_update: int, corpus_tokens: float, floor: float
) -> int:
    n = _parameters(arch, flags, 0, True)
    if rise_rate(k, n, dropout, corpus_tokens) <= 0:
        return 0
    model = Model.from_flags(arch, flags)
    layers = max(model.encoder_layers, model.decoder_layers)

    def at(updates: float) -> float:
        return loss(k, n, layers, dropout, tokens_per_update, updates, corpus_tokens, floor)

    def rising(updates: float) -> bool:
        return at(updates * 1.001) > at(updates)

    # past the onset the rise is linear in the epochs and what repeats teach falls ever more slowly: one turn
    low = max(1.0, onset(k, n, corpus_tokens) * corpus_tokens / tokens_per_update)
    high = low * 2
    while not rising(high):
        high *= 2
        if high > 1e12:
            return 0
    for _ in range(60):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if rising(middle) else (middle, high)
    return max(1, int(high))


def useful_updates(candidate: Candidate, corpus_tokens: float, floor: float = FLOOR) -> int:
    """The updates past which more do the dev loss no good: its lowest (:func:`lowest_updates`), or earlier, where
    more repeat the corpus to no use (USEFUL_REPEATS R* epochs past the first); 0: no limit."""
    if corpus_tokens <= 0:
        return 0
    epochs = 1 + USEFUL_REPEATS * repeats(FIT, candidate.dropout)
    repeated = max(1, int(corpus_tokens * epochs / candidate.tokens_per_update))
    lowest = lowest_updates(candidate, corpus_tokens, floor)
    return min(repeated, lowest) if lowest else repeated


def predicted_loss(candidate: Candidate, updates: int, corpus_tokens: float, floor: float = FLOOR) -> float:
    """The lowest dev loss a candidate is predicted to reach in ``updates`` updates on a corpus of ``corpus_tokens``
    target tokens (an epoch, in the updates' nominal tokens), in bits per target piece: L at those updates, or at its
    lowest (:func:`lowest_updates`) where they pass it. So more updates never predict worse, and a candidate past its
    turn gains nothing from them while others still learn."""
    if updates <= 0:
        return math.inf
    lowest = lowest_updates(candidate, corpus_tokens, floor)
    return loss_at(candidate, min(updates, lowest) if lowest else updates, corpus_tokens, floor)


def loss_at(
    candidate: Candidate, updates: int, corpus_tokens: float, floor: float = FLOOR, constants: Constants = FIT
) -> float:
    """L for a candidate after ``updates`` updates, past its lowest too (this module's docstring)."""
    layers = max(candidate.model.encoder_layers, candidate.model.decoder_layers)
    return loss(
        constants,
        parameters(candidate),
        layers,
        candidate.dropout,
        candidate.tokens_per_update,
        updates,
        corpus_tokens,
        floor,
    )


# ---- where a prediction rests --------------------------------------------------------------------------------

# what the budget runs span (benchmarks/records/budgets/*.json) and what Table 3 spans (100K and 300K updates of
# 25,000 tokens on WMT14 EN-DE's 4.5M pairs): a prediction inside them is "measured" or "from the paper"
MEASURED_TOKENS = 2 * 7080 * 2048  # twice the longest budget run's
MEASURED_PAIRS = 2 * 76_798
PAPER_TOKENS = (0.3 * 100_000 * 25_000, 3 * 300_000 * 25_000)
PAPER_PAIRS = 1_000_000


def floor_for(pairs: int) -> float:
    """The floor of a corpus the fit never saw: WMT14's at 1M pairs or more, else the small corpora's mean."""
    return FLOOR_LARGE if pairs >= PAPER_PAIRS else FLOOR


def evidence(candidate: Candidate, updates: int, pairs: int) -> str:
    """Whether a candidate's prediction rests on measurements (the budget runs), on the paper (Table 3), or is
    extrapolated, and from what."""
    tokens = updates * candidate.tokens_per_update
    if (
        candidate.source == "measured"
        and candidate.dropout == 0.1
        and candidate.tokens_per_update <= 4096
        and tokens <= MEASURED_TOKENS
        and pairs <= MEASURED_PAIRS
    ):
        return "measured"
    if (
        candidate.source == "the paper"
        and pairs >= PAPER_PAIRS
        and PAPER_TOKENS[0] <= tokens <= PAPER_TOKENS[1]
        and candidate.tokens_per_update >= 12500
    ):
        return "from the paper"
    return "extrapolated"


@dataclass
class Option:
    """A candidate at a budget: the updates it gets and its predicted loss."""

    candidate: Candidate
    updates: int
    loss: float
    limited: str = ""  # 'repeats': fewer than the budget gives, more would not help; 'not probed': see explain
    seconds_per_update: float = 0.0  # measured here, or from a speed file (TIME)
    training_seconds: float = 0.0  # its updates' time, validations and start included (TIME)
    useful: int = 0  # the updates past which more repeat the corpus to no use (0: no limit)
    evidence: str = ""


@dataclass
class Choice:
    """The pick and every candidate beside it."""

    picked: Option
    options: List[Option] = field(default_factory=list)
    size: float = 0.0  # the parameters (millions, embeddings left out) of the model the pick is of (settled)

    def as_dict(self, vocab_size: int, joint: bool) -> Dict:
        def one(o: Option) -> Dict:
            c = o.candidate
            return {
                "name": c.name,
                "arch": c.arch,
                "model_flags": c.model_flags,
                "dropout": c.dropout,
                "tokens_per_update": c.tokens_per_update,
                "updates": o.updates,
                "useful_updates": o.useful,
                "limited": o.limited,
                "seconds_per_update": round(o.seconds_per_update, 4),
                "training_seconds": round(o.training_seconds),
                "predicted_valid_loss_bits": None if math.isinf(o.loss) else round(o.loss, 3),
                "parameters_millions": round(parameters(c, vocab_size, joint), 2),
                "evidence": o.evidence,
                "picked": o is self.picked,
            }

        return {"unit": "bits per target piece", "options": [one(o) for o in self.options]}


def candidate_batches(devices: int = 1, max_tokens_per_device: int = 4096) -> Tuple[int, ...]:
    """Tokens an update: BATCHES, and on several devices one and two micro-batches of each where that passes 25,000
    (Ott et al. 2018 trained at 400,000 on 128 GPUs)."""
    more = [devices * max_tokens_per_device * m for m in (1, 2)] if devices > 1 else []
    return tuple(sorted({*BATCHES, *(b for b in more if b > max(BATCHES))}))


def candidates(devices: int = 1, max_tokens_per_device: int = 4096) -> List[Candidate]:
    """Every model of MODELS at each of DROPOUTS and each batch: from the cheapest model to the costliest."""
    found = []
    for arch, flags, source in MODELS:
        for dropout in DROPOUTS:
            for tokens in candidate_batches(devices, max_tokens_per_device):
                model = Model.from_flags(arch, flags)
                name = f"{model.described()}, P_drop {dropout}, {tokens:,} tokens"
                found.append(Candidate(name, arch, flags, dropout, tokens, source))
    return found


def choose(
    options: Sequence[Candidate],
    updates_of: Callable[[Candidate], int],
    corpus_tokens: float,
    pairs: int,
    given: bool = False,
    floor: float = FLOOR,
    lower_bound: Optional[Callable[[Candidate], Optional[int]]] = None,
    smaller: Sequence[Callable[[Candidate], int]] = (),
) -> Choice:
    """The candidate of the lowest predicted loss at the updates ``updates_of`` gives each (non-decreasing in the
    budget), among those of the model the smaller budgets settled on (:func:`settled`). ``given``: a MAX_UPDATE the
    user gave, trained as given; else (TIME) at most a candidate's useful updates. ``lower_bound``: the most updates a
    candidate could get, had without measuring it (None: measure it); one whose prediction at that many cannot beat
    the best so far is left unmeasured ('not probed'). ``smaller``: the updates each candidate gets at the budgets of
    the grid below this one. Ties go to the earlier candidate."""
    found: List[Option] = []
    best = math.inf
    for c in options:
        useful = useful_updates(c, corpus_tokens, floor)
        bound = lower_bound(c) if lower_bound else None
        if bound is not None:
            at_most = min(bound, useful) if useful else bound
            at_best = predicted_loss(c, at_most, corpus_tokens, floor)
            if at_best >= best:
                found.append(Option(c, at_most, at_best, "not probed"))
                continue
        updates, limited = updates_of(c), ""
        if not given and useful and updates > useful:
            turns = useful == lowest_updates(c, corpus_tokens, floor)
            updates, limited = useful, "turns" if turns else "repeats"
        option = Option(c, updates, predicted_loss(c, updates, corpus_tokens, floor), limited, useful=useful)
        option.evidence = evidence(c, updates, pairs)
        best = min(best, option.loss)
        found.append(option)
    measured = [o for o in found if o.limited != "not probed"]
    size = settled(measured, smaller, corpus_tokens, given, floor)
    return Choice(min((o for o in measured if parameters(o.candidate) == size), key=lambda o: o.loss), found, size)


def settled(
    measured: Sequence[Option],
    smaller: Sequence[Callable[[Candidate], int]],
    corpus_tokens: float,
    given: bool,
    floor: float,
) -> float:
    """The size of the model the pick is of: the largest of those best at a budget of the grid below this one (the
    lowest predicted loss there), or this budget's best where the grid has none below. So a larger budget never picks
    a smaller model than a smaller budget did, and its pick's predicted loss still never rises: at each budget of the
    grid the set it picks from holds that budget's best, and between them each candidate only improves. The cost:
    between two budgets of the grid (12% apart) a larger model that has just become the best waits for the next."""
    if not smaller:
        return parameters(min(measured, key=lambda o: o.loss).candidate)

    def best_at(updates_of: Callable[[Candidate], int]) -> Candidate:
        def predicted(o: Option) -> float:
            updates = updates_of(o.candidate)
            if not given and o.useful:
                updates = min(updates, o.useful)
            return predicted_loss(o.candidate, updates, corpus_tokens, floor)

        return min(measured, key=predicted).candidate

    return max(parameters(best_at(u)) for u in smaller)


# the budgets below a budget that decide the size of its pick's model (settled): 20 a decade, from 2 minutes (the
# shortest TIME) and from 100 updates
GRID_A_DECADE = 20


def grid(start: float, budget: float) -> List[float]:
    """The budgets of the grid from ``start`` up to ``budget`` (``budget`` itself if it is one of them)."""
    found, i = [], 0
    while start * 10 ** (i / GRID_A_DECADE) <= budget * (1 + 1e-12):
        found.append(start * 10 ** (i / GRID_A_DECADE))
        i += 1
    return found


def model_words(candidate: Candidate) -> str:
    """'N=2, d_model 256, d_ff 1024' and the like, for people."""
    return candidate.model.described()


# ---- the settings of a corpus for a budget -------------------------------------------------------------------

# The vocabulary, by the corpus alone (every candidate shares it): 8,000 pieces from 10k to 500k pairs, measured here
# (the learning benchmark's 77k EN-DE pairs: 8,000 beat OPUS-MT's 1,000 by 3.8 BLEU at 1,200 updates,
# docs/benchmarks.md), then OPUS-MT-train's sizes (Tiedemann & Thottingal 2020); 500 under 10k (below MIN_PAIRS,
# where one sets it).
VOCABULARY = [(1_000_000, 32000), (500_000, 12000), (10_000, 8000), (0, 500)]
# what fairseq's batches hold of an update's nominal tokens (padding, --max-tokens on the longer side): 0.83, measured
# (recipes/planner/speed_probe.py); an epoch of a corpus in nominal tokens is its tokens over it
BATCH_FILL = 0.83


@dataclass
class Sized:
    """The settings for a corpus of ``pairs`` pairs and a budget (docs/parallel-text.md)."""

    pairs: int
    vocab_size: int
    joint: bool
    arch: str
    model_flags: str
    dropout: float
    tokens_per_update: int
    max_update: int
    size_class: str
    budget: str = ""  # the pick in one line, for people
    explain: str = ""  # why: the candidates beside it, their predicted losses, and the sources
    source: str = ""  # where a size class's settings come from
    valid_tokens: int = 0  # the dev set's target tokens, estimated: what a validation costs
    plan: Dict = field(default_factory=dict)  # the rule's choice as WORK/plan.json holds it
    useful_updates: int = 0  # the pick's: past these, more updates repeat the corpus to no use (0: no limit)
    notes: List[str] = field(default_factory=list)  # what the plan must say beside the pick, one a line
    target_tokens: int = 0  # the training set's target pieces, estimated as the dev set's


# the settings measured best at 1,200 updates on 77k EN-DE pairs (docs/benchmarks.md, "Learning"): the budgets
# benchmark's reference (benchmarks/budgets.py)
SHORT_BUDGET = dict(vocab_size=8000, model_flags=SHORT_FLAGS.format(n=3), dropout=0.1, tokens_per_update=4096)


def class_settings(pairs: int, scripts: Tuple[Optional[str], Optional[str]]) -> "Sized":
    """The settings of a full run by the corpus's size (its class)."""
    return settings_for(pairs, scripts)


def size_class(pairs: int) -> Tuple[str, str, str, float, int, int, str]:
    """(name, arch, flags, P_drop, tokens an update, updates, source) of a full run by the corpus's size (its class):
    what a run without a budget gets."""
    if pairs >= 1_000_000:  # the paper's base model and batch (Sections 5.1, 6.1)
        return (
            "large (1M pairs or more)",
            "vaswani_base",
            "",
            0.1,
            25000,
            100000,
            "the paper's base model and batch, Sections 5.1 and 6.1",
        )
    if pairs >= 100_000:  # the base model, more regularised (the big model's 0.3 of Table 3; Araabi & Monz 2020)
        return (
            "medium (100k to 1M pairs)",
            "vaswani_base",
            "",
            0.3,
            12500,
            50000,
            "the paper's base model with Table 3's P_drop 0.3 as Araabi & Monz 2020",
        )
    # fairseq's transformer_iwslt_de_en (IWSLT'14 De-En, 160k pairs): d_ff 1024, 4 heads; dropout 0.3
    return (
        "small (under 100k pairs)",
        "vaswani_base",
        "--d-ff 1024 --attention-heads 4",
        0.3,
        4096,
        30000,
        "fairseq's transformer_iwslt_de_en, examples/translation",
    )


def picked_line(found: "Sized", option: Option) -> str:
    """The pick, in one line under 120 characters, with what its prediction rests on (the vocabulary: the plan's line
    before it)."""
    c, m = option.candidate, option.candidate.model
    return (
        f"N={m.encoder_layers} x d_model {m.d_model}, d_ff {m.d_ff}, P_drop {c.dropout}, "
        f"{c.tokens_per_update:,} tokens x {option.updates:,} updates ({option.loss:.2f} bits, {option.evidence})"
    )


def settings_for(
    pairs: int,
    scripts: Tuple[Optional[str], Optional[str]],
    max_update: Optional[int] = None,
    seconds: int = 0,
    time_text: str = "",
    speed: Optional[Callable[[Candidate, int], float]] = None,
    valid_tokens: int = 0,
    corpus_tokens: float = 0.0,
    devices: int = 1,
    max_tokens_per_device: int = 4096,
    lower_bound: Optional[Callable[[Candidate, int], Optional[float]]] = None,
    remeasure: Optional[Callable[[Sequence[Candidate], int], List[str]]] = None,
) -> Sized:
    """The settings for ``pairs`` training pairs of ``corpus_tokens`` target tokens (0: unknown, no repetition counted)
    and a budget: ``max_update`` updates, or ``seconds`` of training (``speed``: a candidate's seconds an update on the
    machines that train, with a vocabulary of so many pieces; ``lower_bound``: the fewest seconds it could take, had
    without measuring it, or None), or neither (the size class's full run). The candidates' batches are laid out over
    ``devices`` devices of micro-batches of ``max_tokens_per_device``. The pick is the candidate of the lowest
    predicted validation loss. With TIME, where other models are predicted within TIE_BITS of the pick,
    ``remeasure`` measures those models' speed and the pick's again (the models it measured again, for people), and
    the pick is made again from its figures."""
    vocab = next(v for at_least, v in VOCABULARY if pairs >= at_least)
    joint = scripts[0] == scripts[1] or None in scripts
    name, arch, flags, dropout, tokens, updates, source = size_class(pairs)
    epoch = corpus_tokens / BATCH_FILL if corpus_tokens else 0.0
    found = Sized(pairs, vocab, joint, arch, flags, dropout, tokens, updates, name, source=source)
    if max_update is None and not seconds:
        c = Candidate(name, arch, flags, dropout, tokens)
        found.budget = (
            f"full run ({name.split(' ')[0]}): {model_words(c)}, P_drop {dropout}, BPE {vocab:,} "
            f"{'joint' if joint else 'a side'}, {tokens:,} tokens x {updates:,} updates"
        )
        found.explain = f"no MAX_UPDATE or TIME: a full run of the {name} class, {updates:,} updates (from {source})"
        found.plan = {"budget": "none", "picked": "the size class's full run"}
        return found
    speeds: Dict[str, float] = {}
    bound = None
    if seconds:

        def updates_of(c: Candidate) -> int:
            speeds[c.name] = speed(c, vocab)
            return updates_that_fit(seconds, speeds[c.name], c.tokens_per_update, valid_tokens)

        if lower_bound:

            def bound(c: Candidate) -> Optional[int]:
                fastest = lower_bound(c, vocab)
                return (
                    None if fastest is None else updates_that_fit(seconds, fastest, c.tokens_per_update, valid_tokens)
                )

        given = f"TIME={time_text}"
        smaller = [functools.partial(updates_at, g, speeds, valid_tokens) for g in grid(120, seconds)]
    else:

        def updates_of(c: Candidate) -> int:
            return max_update

        given = f"MAX_UPDATE={max_update:,}"
        smaller = [functools.partial(lambda n, c: n, int(g)) for g in grid(100, max_update)]
    floor = floor_for(pairs)

    def chosen() -> Choice:
        return choose(
            candidates(devices, max_tokens_per_device),
            updates_of,
            epoch,
            pairs,
            given=not seconds,
            floor=floor,
            lower_bound=bound,
            smaller=smaller,
        )

    choice = chosen()
    rivals = close_rivals(choice) if seconds and remeasure else []
    again = remeasure([choice.picked.candidate, *rivals], vocab) if rivals else []
    if again:
        speeds.clear()
        choice = chosen()
    for o in choice.options:
        o.seconds_per_update = speeds.get(o.candidate.name, 0.0)
        if o.seconds_per_update:  # what its updates take, validations and start included
            o.training_seconds = training_time(
                o.updates, o.seconds_per_update, o.candidate.tokens_per_update, valid_tokens
            )
    best = choice.picked
    c = best.candidate
    if again:
        named = "; ".join(again) if len(again) <= 2 else f"{len(again)} models"
        found.notes.append(f"speed measured again: {named} (predictions within {TIE_BITS} bits)")
    found.arch, found.model_flags, found.dropout, found.tokens_per_update, found.max_update = (
        c.arch,
        c.model_flags,
        c.dropout,
        c.tokens_per_update,
        best.updates,
    )
    found.useful_updates = best.useful
    found.budget = picked_line(found, best)
    if best.limited == "repeats":  # each note under 120 characters with "note: " before it
        found.notes.append(
            f"past {best.updates:,} updates the pick repeats the corpus to no use ({USEFUL_REPEATS} R* epochs): "
            "more time will not help"
        )
    if best.limited == "turns":
        found.notes.append(
            f"past {best.updates:,} updates the pick's dev loss is predicted to rise: more time will not help"
        )
    lowest = lowest_updates(c, epoch, floor)
    if not seconds and best.useful and max_update > best.useful and best.useful != lowest:
        gain = predicted_loss(c, best.useful, epoch, floor) - best.loss
        found.notes.append(
            f"MAX_UPDATE={max_update:,} passes the {best.useful:,} updates this corpus can teach: all trained, as "
            f"asked (+{gain:.3f} bits)"
        )
    rise = loss_at(c, best.updates, epoch, floor) - best.loss if lowest else 0.0
    if not seconds and lowest and best.updates > lowest and rise >= 0.01:
        found.notes.append(
            f"MAX_UPDATE={max_update:,}, as asked: the dev loss is predicted to rise past update {lowest:,} "
            f"(+{rise:.2f} bits by the last)"
        )
    found.explain = explain(given, choice, pairs)
    found.plan = {
        "budget": given,
        **choice.as_dict(vocab, joint),
        "corpus_target_tokens": int(corpus_tokens),
        "vocab_size": vocab,
        "joint": joint,
        "floor_bits": floor,
        "devices": devices,
    }
    return found


# Predictions this close (bits) rank by the speed figures more than by the fit: the EN-RU budget corpus at 200 minutes,
# where 2 and 3 layers of 256 at 2,048 tokens were predicted 0.04 bits apart and measured within 0.01 (5.37 bits
# each), picked the slower on one probe's figure (docs/benchmarks.md). Their speed is measured again before the pick.
TIE_BITS = 0.1


def close_rivals(choice: Choice) -> List[Candidate]:
    """The best candidate of each other model predicted within TIE_BITS of the pick."""
    picked = choice.picked
    rivals: Dict[float, Option] = {}  # by the model's size
    for o in choice.options:
        if o.limited == "not probed" or math.isinf(o.loss) or abs(o.loss - picked.loss) > TIE_BITS:
            continue
        size = parameters(o.candidate)
        if size != parameters(picked.candidate) and (size not in rivals or o.loss < rivals[size].loss):
            rivals[size] = o
    return [o.candidate for o in rivals.values()]


def updates_at(seconds: float, speeds: Dict[str, float], valid_tokens: int, c: Candidate) -> int:
    """The updates of a candidate measured (``speeds``: seconds an update, by name) that fit in ``seconds``."""
    return _updates_that_fit(int(seconds), speeds[c.name], c.tokens_per_update, valid_tokens)


_updates_that_fit = functools.lru_cache(maxsize=100_000)(updates_that_fit)


def explain(given: str, choice: Choice, pairs: int) -> str:
    """Why: the pick, each model's best option beside it, and what was left unmeasured."""
    best = choice.picked
    lines = [
        f"{given}: the candidate of the lowest predicted validation loss (bits a target piece); the pick's prediction: "
        f"{best.evidence}"
    ]
    shown = {}
    for o in choice.options:  # each model at its best dropout and batch
        key = (o.candidate.arch, o.candidate.model_flags)
        if o.limited != "not probed" and (key not in shown or o.loss < shown[key].loss):
            shown[key] = o
    for o in sorted(shown.values(), key=lambda o: o.loss):
        speed_said = f", {o.seconds_per_update:.3g} s an update" if o.seconds_per_update else ""
        limited = f", {o.limited}" if o.limited else ""
        lines.append(
            f"  {'*' if o is best else ' '} {o.candidate.name}: {o.updates:,} updates{speed_said}, {o.loss:.2f} bits"
            f" ({o.evidence}{limited})"
        )
    lowest = min(shown.values(), key=lambda o: o.loss)
    if lowest is not best:
        lines += [
            f"  {model_words(lowest.candidate)} predicts {best.loss - lowest.loss:.3f} bits lower, but was the best at "
            "no smaller budget:",
            f"  it is picked from the next budget of the grid ({GRID_A_DECADE} a decade), so that a larger budget "
            "never picks a smaller model",
        ]
    probed = {model_words(o.candidate) for o in choice.options if o.limited != "not probed"}
    skipped = sorted({model_words(o.candidate) for o in choice.options} - probed)
    if skipped:
        lines.append(f"  not probed, since even at their fastest they predict worse: {'; '.join(skipped)}")
    lines.append(
        f"  (recipes/planner/budget_rule.py; fitted within {FIT_RMS['budget runs']:.2f} bits rms of the budget runs "
        f"and {FIT_RMS['Table 3']:.2f} of Table 3; docs/parallel-text.md)"
    )
    return "\n".join(lines)


def sizes_table() -> str:
    """The settings of each size class for a full run (one script on both sides), and what a budget does."""
    lines = [
        "| lines of TRAIN | VOCAB_SIZE | ARCH MODEL_FLAGS | DROPOUT | TOKENS_PER_UPDATE | MAX_UPDATE |",
        "|---|---|---|---|---|---|",
    ]
    spans = (
        (1_000_000, "1,000,000 or more"),
        (500_000, "500,000 to 1,000,000"),
        (100_000, "100,000 to 500,000"),
        (10_000, "10,000 to 100,000"),
    )
    for pairs, span in spans:
        found = settings_for(pairs, ("LATIN", "LATIN"))
        model = " ".join(filter(None, (found.arch, found.model_flags)))
        lines.append(
            f"| {span} | {found.vocab_size:,} | {model} | {found.dropout} | {found.tokens_per_update:,} | "
            f"{found.max_update:,} |"
        )
    lines.append("| under 10,000 | refused (MIN_PAIRS) | | | | |")
    lines.append(
        "| with TIME or MAX_UPDATE | the class's | the lowest predicted validation loss: N=2 or 3 of d_model 256, "
        "fairseq's IWSLT model, base or big | 0.1 or 0.3 | 2,048 to 25,000, more on several devices | "
        "TIME's, at most the useful; or MAX_UPDATE |"
    )
    return "\n".join(lines)


# ---- a corpus's settings: its size, scripts and tokens, read before any work ----------------------------------------

# sentencepiece pieces a word (or a character, in scripts written without spaces), to count a dev set's target
# tokens before its vocabulary exists: 1.94 measured on the German side of the 77k EN-DE pairs with 8,000 pieces
# (19,306 pieces, 9,956 words); more pieces with a smaller vocabulary, fewer with a larger one.
PIECES_PER_WORD = 2.0
DEV_SAMPLE_LINES = 10_000


def target_words(corpora: Sequence[Corpus], script: Optional[str], lines: Optional[int] = None) -> List[int]:
    """The words (or characters, in scripts without spaces) of each target line, the first ``lines`` of each corpus."""
    return [
        units(t.decode("utf-8", errors="replace"), script)
        for c in corpora
        for _, _, t in itertools.islice(raw_pairs_unchecked(c), lines)
    ]


def words_a_line(corpora: Sequence[Corpus], script: Optional[str]) -> float:
    """The mean words of a training target line, in the first DEV_SAMPLE_LINES of each corpus."""
    sample = target_words(corpora, script, DEV_SAMPLE_LINES)
    return sum(sample) / max(1, len(sample))


def dev_tokens(
    corpora: Sequence[Corpus], valid: Sequence[Corpus], pairs: int, script: Optional[str], words: Optional[float] = None
) -> int:
    """The dev set's target tokens, estimated before any work (a validation's cost): the words of the given dev
    sets' target side, or the pairs held out for it times the mean words of a training target line (``words``, else
    words_a_line), times PIECES_PER_WORD."""
    if valid:
        total = sum(target_words(valid, script))
    else:
        total = held_out_size(pairs, None) * (words_a_line(corpora, script) if words is None else words)
    return int(total * PIECES_PER_WORD)


def settings(
    train: Sequence[str],
    src: str,
    tgt: str,
    max_update: Optional[int] = None,
    time_text: str = "",
    speed: Optional[Callable] = None,
    valid: Sequence[str] = (),
    min_pairs: int = 0,
    devices: int = 1,
    max_tokens_per_device: int = 4096,
    lower_bound: Optional[Callable] = None,
    remeasure: Optional[Callable] = None,
) -> Sized:
    """The settings for the corpora ``train`` (and the dev sets ``valid``, if given), and a budget of ``max_update``
    updates or of ``time_text`` (TIME=, turned into updates by ``speed``, a candidate's seconds per update here).
    Fewer than ``min_pairs`` lines are refused before any probe; ``devices``, ``max_tokens_per_device``,
    ``lower_bound`` and ``remeasure`` as settings_for takes them."""
    corpora = [find_corpus(spec, src, tgt) for spec in train]
    pairs = sum(count_lines(c.tsv or c.source) for c in corpora)
    if pairs < min_pairs:
        raise CorpusError(
            f"TRAIN has {pairs} lines: too few to train a translation model from scratch (MIN_PAIRS={min_pairs}; "
            "OPUS-MT does not train below 10,000). Add text, or set MIN_PAIRS if you mean it"
        )
    scripts = sides_scripts(corpora)
    words = words_a_line(corpora, scripts[1])
    valid_tokens = dev_tokens(corpora, [find_corpus(spec, src, tgt) for spec in valid], pairs, scripts[1], words)
    seconds = 0
    if time_text:
        if max_update is not None:
            raise CorpusError(
                f"TIME={time_text} and MAX_UPDATE={max_update}: give one budget (TIME is turned into updates here)"
            )
        try:
            seconds = parse_time(time_text)
        except BudgetError as e:
            raise CorpusError(str(e)) from None
    # the training set's target tokens, estimated as the dev set's: how many epochs a budget is
    found = settings_for(
        pairs,
        scripts,
        max_update,
        seconds,
        time_text,
        speed,
        valid_tokens,
        int(pairs * words * PIECES_PER_WORD),
        devices,
        max_tokens_per_device,
        lower_bound,
        remeasure,
    )
    found.valid_tokens = valid_tokens
    found.target_tokens = int(pairs * words * PIECES_PER_WORD)
    return found
