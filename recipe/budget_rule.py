"""The budget rule: which model, dropout and batch a budget of TIME or MAX_UPDATE gets on a corpus
(docs/parallel-text.md, "Budgets").

Every candidate's validation loss at the end of the updates the budget gives it is predicted, in bits per target piece
of the corpus's vocabulary (one vocabulary for every candidate, tied to the corpus, so the losses compare), and the pick
is the candidate of the lowest predicted loss:

    L_c = L_0 + C * P_c ** -GAMMA + A * (k_c * S_c / 1000) ** -BETA

- capacity, ``C * P ** -GAMMA``, P the model's parameters in millions: the paper's Table 3 (its base model and rows (C),
  dev perplexity after 100K steps against their parameter counts), fitted by benchmarks/budget_fit.py. The paper's own
  evidence that a larger model reaches a lower loss given enough training.
- learning, ``A * (k S) ** -BETA``, the power law in training of the NMT scaling studies (Gordon et al. 2021, Ghorbani
  et al. 2021), fitted to this project's budget runs (benchmarks/records/budgets/*.json). ``S = D_eff / (B + B_NOISE)``:
  D training target tokens in updates of B tokens are worth ``D / (B + B_NOISE)`` updates of a batch much larger than
  the gradient's noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training"): at equal tokens a
  smaller batch learns more, at equal updates a larger one. ``D_eff``: an epoch repeated is worth less than new text,
  the more so the more it is repeated (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models"):
  ``D_eff = U (1 + R* (1 - exp(-R / R*)))`` for R epochs past the first of a corpus of U target tokens, R* growing with
  the dropout (``REPEATS_AT_01``, ``DROPOUT_REPEATS``). ``k_c``: how much an update of the candidate's model learns
  against 2 layers a side at P_drop 0.1 (``LEARNING_N3`` fitted; ``LEARNING_DEPTH6`` and ``LEARNING_DROPOUT`` from
  the ablation at 1,200 updates).

Each term falls, or stays, as the candidate's updates grow, and a budget's updates never fall as the budget grows, so
the pick's predicted loss never rises with the budget: there is no count threshold and no cliff. Where the candidate's
updates would repeat the corpus past what repetition can still teach (``USEFUL_REPEATS`` times R*), they stop there,
and the plan says that more time will not help.

Where it is measured and where it extrapolates: the learning term on 22k and 77k pairs, 150 to 7,000 updates of 2,048
and 4,096 tokens, 2 and 3 layers of d_model 256 (rms error ``FIT_RMS`` bits); the capacity term on WMT14 EN-DE at 28M
to 168M parameters; the 6 layers' and P_drop 0.3's learning at 1,200 updates; R* at P_drop 0.3 is the fitted R* at 0.1
times ``DROPOUT_REPEATS``, not measured. Every pick says which.
"""

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
from recipe.model import Model, shared
from recipe.probe_arithmetic import BudgetError, parse_time, training_time, updates_that_fit

# ---- the fit (benchmarks/budget_fit.py prints these from benchmarks/records/budgets/*.json and the paper's Table 3)
CAPACITY_C = 8.446  # bits
CAPACITY_GAMMA = 0.848
LEARNING_A = 4.707  # bits
LEARNING_BETA = 0.3  # held, not fitted (benchmarks/budget_fit.py says why)
B_NOISE = 3908  # target tokens
REPEATS_AT_01 = 12.34  # R* at P_drop 0.1: epochs of repetition
LEARNING_N3 = 0.8205  # k of 3 layers a side against 2
L_0 = -1.587  # bits: the offset, the mean of the two corpora's (-2.03 and -1.15); the same for every candidate
FIT_RMS = 0.354  # bits, over the 19 runs fitted
# ---- the ablation at 1,200 updates (docs/benchmarks.md, "Learning"): equal loss at these ratios of updates ----------
LEARNING_DEPTH6 = 0.48  # 6 layers of d_model 512 reach at update 400 what 3 of 256 reach at 190 (3 of 512: as 3 of 256)
LEARNING_DROPOUT = {0.1: 1.0, 0.3: 0.69}  # P_drop 0.3 reaches at update 1,200 what P_drop 0.1 reaches at about 830
DROPOUT_REPEATS = {0.1: 1.0, 0.3: 2.0}  # R* against P_drop 0.1's: assumed, not measured (a 10-hour run measures it)
USEFUL_REPEATS = 3  # past 3 R* repeated epochs a candidate's D_eff is within 5% of its limit: more updates, no use

SHORT_FLAGS = "--encoder-layers {n} --decoder-layers {n} --d-model 256 --d-ff 1024 --attention-heads 4"


@dataclass
class Candidate:
    """A model, its dropout and its batch; ``cap``: the most updates it is given (its source's full run), 0: none."""

    name: str
    arch: str
    model_flags: str
    dropout: float
    tokens_per_update: int
    cap: int = 0
    source: str = "measured"  # where its learning comes from

    @property
    def model(self) -> Model:
        return Model.from_flags(self.arch, self.model_flags)


def parameters(candidate: Candidate, vocab_size: int, joint: bool = True) -> float:
    """The model's parameters in millions, counted as the paper counts them (recipe/model.py: embeddings once when
    shared; biases and LayerNorms left out): an encoder layer 4 d^2 + 2 d d_ff, a decoder layer 8 d^2 + 2 d d_ff."""
    model = Model(candidate.arch, (*candidate.model.words, *shared(joint)))
    return model.parameters(vocab_size, biases=False) / 1e6


def learning(candidate: Candidate) -> float:
    """k: what an update of the candidate learns against one of 2 layers a side at P_drop 0.1 (LEARNING_*)."""
    depth = max(candidate.model.encoder_layers, candidate.model.decoder_layers)
    if depth <= 3:
        k = 1.0 if depth <= 2 else LEARNING_N3
    else:  # 6 layers measured; between 3 and 6, geometrically between
        k = LEARNING_N3 * LEARNING_DEPTH6 ** (min(depth - 3, 3) / 3)
    return k * LEARNING_DROPOUT[0.1 if candidate.dropout < 0.2 else 0.3]


def repeats(candidate: Candidate) -> float:
    """R*: the repeated epochs over which repetition's worth decays (Muennighoff et al. 2023), at the candidate's
    dropout."""
    return REPEATS_AT_01 * (DROPOUT_REPEATS[0.1] if candidate.dropout < 0.2 else DROPOUT_REPEATS[0.3])


def effective_tokens(tokens: float, corpus_tokens: float, r_star: float) -> float:
    """D_eff: ``tokens`` of training on a corpus of ``corpus_tokens`` target tokens, repeated epochs worth less."""
    if corpus_tokens <= 0 or tokens <= corpus_tokens:
        return tokens
    return corpus_tokens * (1 + r_star * (1 - math.exp(-(tokens / corpus_tokens - 1) / r_star)))


def useful_updates(candidate: Candidate, corpus_tokens: float) -> int:
    """The updates past which more repeat the corpus to no use (USEFUL_REPEATS R* epochs past the first); 0: no
    limit."""
    if corpus_tokens <= 0:
        return 0
    return int(corpus_tokens * (1 + USEFUL_REPEATS * repeats(candidate)) / candidate.tokens_per_update)


def predicted_loss(
    candidate: Candidate, updates: int, vocab_size: int, corpus_tokens: float, joint: bool = True
) -> float:
    """L_c: the validation loss predicted after ``updates`` updates, in bits per target piece (this module's
    docstring)."""
    if updates <= 0:
        return math.inf
    tokens = effective_tokens(updates * candidate.tokens_per_update, corpus_tokens, repeats(candidate))
    steps = learning(candidate) * tokens / (candidate.tokens_per_update + B_NOISE)
    return (
        L_0
        + CAPACITY_C * parameters(candidate, vocab_size, joint) ** -CAPACITY_GAMMA
        + LEARNING_A * (steps / 1000) ** -LEARNING_BETA
    )


@dataclass
class Option:
    """A candidate at a budget: the updates it gets and its predicted loss."""

    candidate: Candidate
    updates: int
    loss: float
    limited: str = ""  # why it gets fewer updates than the budget gives: 'repeats' (more would not help), 'cap'
    seconds_per_update: float = 0.0  # measured here (TIME)
    training_seconds: float = 0.0  # its updates' time here, validations and start included (TIME)


@dataclass
class Choice:
    """The pick and every candidate beside it."""

    picked: Option
    options: List[Option] = field(default_factory=list)

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
                "limited": o.limited,
                "seconds_per_update": round(o.seconds_per_update, 4),
                "training_seconds": round(o.training_seconds),
                "predicted_valid_loss_bits": None if math.isinf(o.loss) else round(o.loss, 3),
                "parameters_millions": round(parameters(c, vocab_size, joint), 2),
                "source": c.source,
                "picked": o is self.picked,
            }

        return {"unit": "bits per target piece of the corpus's vocabulary", "options": [one(o) for o in self.options]}


def choose(
    candidates: Sequence[Candidate],
    updates_of: Callable[[Candidate], int],
    vocab_size: int,
    corpus_tokens: float,
    joint: bool = True,
) -> Choice:
    """The candidate of the lowest predicted loss at the updates ``updates_of`` gives each (non-decreasing in the
    budget), each at most its cap and its useful updates; ties go to the earlier candidate."""
    options = []
    for c in candidates:
        given = updates_of(c)
        updates, limited = given, ""
        if c.cap and updates > c.cap:
            updates, limited = c.cap, "cap"
        useful = useful_updates(c, corpus_tokens)
        if useful and updates > useful:
            updates, limited = useful, "repeats"
        options.append(Option(c, updates, predicted_loss(c, updates, vocab_size, corpus_tokens, joint), limited))
    picked = min(options, key=lambda o: o.loss)
    return Choice(picked, options)


def candidates(
    class_arch: str,
    class_flags: str,
    class_dropout: float,
    class_tokens: int,
    class_updates: int,
    class_name: str,
    class_source: str,
) -> List[Candidate]:
    """The candidates for a corpus: 2 and 3 layers of d_model 256 at 2,048 and 4,096 tokens an update and P_drop 0.1
    (the budget runs'), 3 layers at P_drop 0.3 (more regularised, for long budgets on small corpora), and the size
    class's model (its source's full run the most it gets)."""
    short = [
        Candidate(
            f"N={n}, {tokens:,} tokens, P_drop {p}",
            "vaswani_base",
            SHORT_FLAGS.format(n=n),
            p,
            tokens,
            source="measured" if p == 0.1 else "extrapolated (P_drop 0.3: the ablation at 1,200 updates)",
        )
        for n, tokens, p in ((2, 2048, 0.1), (2, 4096, 0.1), (3, 2048, 0.1), (3, 4096, 0.1), (3, 4096, 0.3))
    ]
    model = " ".join(filter(None, (class_arch, class_flags)))
    return short + [
        Candidate(
            f"{class_name}: {model}, P_drop {class_dropout}",
            class_arch,
            class_flags,
            class_dropout,
            class_tokens,
            class_updates,
            source=f"extrapolated ({class_source})",
        )
    ]


def model_words(candidate: Candidate) -> str:
    """'N=2, d_model 256' and the like, for people."""
    return candidate.model.described()


# ---- the settings of a corpus for a budget -------------------------------------------------------------------

# The vocabulary, by the corpus alone (every candidate shares it, so their losses compare): 8,000 pieces from 10k to
# 500k pairs, measured here (the learning benchmark's 77k EN-DE pairs: 8,000 beat OPUS-MT's 1,000 by 3.8 BLEU at 1,200
# updates, docs/benchmarks.md), then OPUS-MT-train's sizes (Tiedemann & Thottingal 2020); 500 under 10k (below
# MIN_PAIRS, where one sets it).
VOCABULARY = [(1_000_000, 32000), (500_000, 12000), (10_000, 8000), (0, 500)]
# what fairseq's batches hold of an update's nominal tokens (padding, --max-tokens on the longer side): 0.83, measured
# (recipe/speed_probe.py); an epoch of a corpus in nominal tokens is its tokens over it
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
    plan: Dict = field(default_factory=dict)  # the plan as WORK/plan.json holds it


# the settings measured best at 1,200 updates on 77k EN-DE pairs (docs/benchmarks.md, "Learning"): a candidate of the
# rule, and the budgets benchmark's reference (benchmarks/budgets.py)
SHORT_BUDGET = dict(vocab_size=8000, model_flags=SHORT_FLAGS.format(n=3), dropout=0.1, tokens_per_update=4096)


def class_settings(pairs: int, scripts: Tuple[Optional[str], Optional[str]]) -> "Sized":
    """The settings of a full run by the corpus's size (its class)."""
    return settings_for(pairs, scripts)


def size_class(pairs: int) -> Tuple[str, str, str, float, int, int, str]:
    """(name, arch, flags, P_drop, tokens an update, updates, source) of a full run by the corpus's size (its class)."""
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


def corpus_candidates(pairs: int) -> List[Candidate]:
    name, arch, flags, dropout, tokens, updates, source = size_class(pairs)
    return candidates(arch, flags, dropout, tokens, updates, f"the {name.split(' ')[0]} class's", source)


def picked_line(found: "Sized", option: Option) -> str:
    """The pick, in one line under 120 characters."""
    c = option.candidate
    vocab = f"BPE {found.vocab_size:,} {'joint' if found.joint else 'a side'}"
    return (
        f"{model_words(c)}, P_drop {c.dropout}, {vocab}, {c.tokens_per_update:,} tokens x {option.updates:,} updates"
        f" ({option.loss:.2f} bits)"
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
) -> Sized:
    """The settings for ``pairs`` training pairs of ``corpus_tokens`` target tokens (0: unknown, no repetition counted)
    and a budget: ``max_update`` updates, or ``seconds`` of training here (``speed``: a candidate's seconds an update
    here, with a vocabulary of so many pieces), or neither (the size class's full run). The pick is the candidate of
    the lowest predicted validation loss."""
    vocab = next(v for at_least, v in VOCABULARY if pairs >= at_least)
    joint = scripts[0] == scripts[1] or None in scripts
    name, arch, flags, dropout, tokens, updates, source = size_class(pairs)
    epoch = corpus_tokens / BATCH_FILL if corpus_tokens else 0.0
    found = Sized(pairs, vocab, joint, arch, flags, dropout, tokens, updates, name, source=source)
    if max_update is None and not seconds:
        c = Candidate(name, arch, flags, dropout, tokens, updates)
        found.budget = (
            f"full run ({name.split(' ')[0]}): {model_words(c)}, P_drop {dropout}, BPE {vocab:,} "
            f"{'joint' if joint else 'a side'}, {tokens:,} tokens x {updates:,} updates"
        )
        found.explain = f"no MAX_UPDATE or TIME: a full run of the {name} class, {updates:,} updates (from {source})"
        found.plan = {"budget": "none", "picked": "the size class's full run"}
        return found
    speeds: Dict[str, float] = {}
    if seconds:

        def updates_of(c: Candidate) -> int:
            speeds[c.name] = speed(c, vocab)
            return updates_that_fit(seconds, speeds[c.name], c.tokens_per_update, valid_tokens)

        given = f"TIME={time_text}"
    else:

        def updates_of(c: Candidate) -> int:
            return max_update

        given = f"MAX_UPDATE={max_update:,}"
    plan = choose(corpus_candidates(pairs), updates_of, vocab, epoch, joint)
    for o in plan.options:
        o.seconds_per_update = speeds.get(o.candidate.name, 0.0)
        if o.seconds_per_update:  # what its updates take here, validations and start included
            o.training_seconds = training_time(
                o.updates, o.seconds_per_update, o.candidate.tokens_per_update, valid_tokens
            )
    best = plan.picked
    c = best.candidate
    found.arch, found.model_flags, found.dropout, found.tokens_per_update, found.max_update = (
        c.arch,
        c.model_flags,
        c.dropout,
        c.tokens_per_update,
        best.updates,
    )
    found.budget = picked_line(found, best)
    why = {
        "repeats": f"; more would repeat the corpus to no use ({USEFUL_REPEATS} R* epochs): more time will not help",
        "cap": f"; its source's full run ({c.cap:,})",
    }.get(best.limited, "")
    lines = [
        f"{given}: the candidate of the lowest predicted validation loss (bits a target piece), its curve "
        f"{c.source}{why}"
    ]
    for o in plan.options:
        speed_said = f", {o.seconds_per_update:.2f} s an update here" if o.seconds_per_update else ""
        lines.append(
            f"  {'*' if o is best else ' '} {o.candidate.name}: {o.updates:,} updates{speed_said}, "
            f"{o.loss:.2f} bits{' (' + o.limited + ')' if o.limited else ''}"
        )
    lines.append(
        f"  (recipe/budget_rule.py; fitted to the budget runs within {FIT_RMS:.2f} bits rms, docs/parallel-text.md)"
    )
    found.explain = "\n".join(lines)
    found.plan = {
        "budget": given,
        **plan.as_dict(vocab, joint),
        "corpus_target_tokens": int(corpus_tokens),
        "vocab_size": vocab,
        "joint": joint,
    }
    return found


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
        "or the class's | 0.1 or 0.3 | 2,048, 4,096 or the class's | those given, at most the useful |"
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
) -> Sized:
    """The settings for the corpora ``train`` (and the dev sets ``valid``, if given), and a budget of ``max_update``
    updates or of ``time_text`` (TIME=, turned into updates by ``speed``, a candidate's seconds per update here).
    Fewer than ``min_pairs`` lines are refused before any probe."""
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
        pairs, scripts, max_update, seconds, time_text, speed, valid_tokens, int(pairs * words * PIECES_PER_WORD)
    )
    found.valid_tokens = valid_tokens
    return found
