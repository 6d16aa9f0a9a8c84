"""``INIT=``: how a parent is fine-tuned on a corpus (docs/finetune.md), decided once
from the corpus and the budget, as the from-scratch settings are by the budget rule (recipes/planner/budget/) but
from the practice of fine-tuning published translation models, each setting with its source:

- **the rate**: Adam (the paper's, Section 5.3) at a peak of 3e-4 reached by a linear ramp and then decaying as the
  inverse square root of the update (fairseq's ``inverse_sqrt``; Marian's ``--learn-rate 0.0003 --lr-warmup N
  --lr-decay-inv-sqrt N``, as OPUS-MT-train's ``finetune/`` and mozilla/firefox-translations-training's fine-tuning
  stage fine-tune OPUS-MT models). Their ramp of 16,000 updates is for millions of pairs: a fine-tuning of a few
  hundred updates would never leave it (at update 400 it gives a fortieth of the peak), so the ramp is a tenth of the
  updates, at most their 16,000. Eq. (3) is the paper's schedule for training from nothing, and its warm-up of 4,000
  keeps a short fine-tuning far below its peak (docs/parallel-text.md measures both).
- **the batch**: 64 sentences an update (the Tatoeba-Challenge OPUS-MT models' fine-tuning batch: 8 sentences x 4
  accumulated; the Hugging Face course fine-tunes opus-mt-en-fr with 32), in target tokens at the corpus's pieces a
  line, so that a corpus of a few hundred pairs still gives several updates an epoch.
- **the length**, with no budget: ``EPOCHS`` epochs of the corpus, the dev set translated at each of 20 validations
  and training stopped after ``PATIENCE`` without a better dev BLEU (firefox-translations-training stops after 20
  validations without gain; the Hugging Face course trains 3 epochs of 189k pairs). ``MAX_UPDATE`` is trained as
  given; ``TIME`` trains the updates that fit, at most those epochs (a corpus of a few hundred pairs repeated for
  hours learns nothing more of its domain).
- **dropout, model, vocabulary**: the parent's (Zoph et al. 2016: the child keeps the parent's vocabulary and model).
- **small corpora** (under ``SMALL`` pairs, where training from nothing is refused): as few as ``MIN_PAIRS`` training
  pairs, the scale of the adaptation sets of Farajian et al. 2017 and Li et al. 2018 (a model adapted per test sentence
  on the few pairs most like it). Without VALID and TEST, ``HELD_OUT`` lines each are held out: the dev set picks the
  model and the test set must tell a gain from noise (the report's paired bootstrap). The model handed over is the
  checkpoint of the best dev BLEU (``EVAL_BLEU=1``), not the average of the last five, which may all have overfitted
  a corpus this small.
"""

import math
from dataclasses import dataclass
from typing import Dict, List, Optional

from transformer_plugin_cli.files import duration
from transformer_plugin_cli.paper import training_flags

MIN_PAIRS = 100  # training pairs: fewer are refused (FINETUNE_MIN_PAIRS sets it)
HELD_OUT = 200  # dev and test lines each held out of a corpus given without VALID and TEST
SMALL = 10_000  # pairs: below, the dev-BLEU best is handed over (the from-scratch rule's MIN_PAIRS)
PEAK_RATE = 3e-4  # OPUS-MT-train finetune/, firefox-translations-training: --learn-rate 0.0003
MAX_WARMUP = 16_000  # theirs: --lr-warmup 16000
WARMUP_SHARE = 0.1  # the ramp: a tenth of the updates, at most MAX_WARMUP
SENTENCES = 64  # an update's sentences (Tatoeba-Challenge's fine-tuning batch: 8 x 4 accumulated)
MIN_TOKENS, MAX_TOKENS = 256, 4096  # an update's target tokens, at least and at most
EPOCHS = 10  # with no budget
PATIENCE = 10  # validations without a better dev BLEU, with no budget or on a small corpus


class FineTuningError(ValueError):
    """A corpus that cannot be fine-tuned on; the message names it and the setting to change."""


@dataclass(frozen=True)
class FineTuning:
    """How the parent is fine-tuned (the module docstring): every number the plan and fairseq-train read."""

    pairs: int  # the corpus's lines (before cleaning and holding out)
    tokens_per_update: int
    max_update: int
    warmup: int  # the linear ramp's updates, then the inverse square root's decay
    peak_rate: float
    epochs: float  # the updates in epochs of the corpus
    by_bleu: bool  # the model handed over is the dev-BLEU best (EVAL_BLEU=1), not the average of the last
    patience: int  # validations without a better dev BLEU (0: none)
    length_from: str  # what set the length: "epochs", "MAX_UPDATE", "TIME"

    def training_flags(self, label_smoothing: Optional[float] = None) -> List[str]:
        """fairseq-train's optimizer, schedule and criterion: the paper's Adam and label smoothing (Sections 5.3,
        5.4), fine-tuning's rate."""
        schedule = ["--lr-scheduler", "inverse_sqrt", "--lr", f"{self.peak_rate:g}"]
        schedule += ["--warmup-updates", str(self.warmup), "--warmup-init-lr", "0"]
        return training_flags(label_smoothing=label_smoothing, schedule=schedule)

    def picked_line(self) -> str:
        """The plan's "picked:" line for the fine-tuning: one line, under 120 characters with its prefix."""
        chosen = "the dev-BLEU best" if self.by_bleu else "averaged"
        return (
            f"the parent's model, {self.tokens_per_update:,} tokens x {self.max_update:,} updates "
            f"({self.epochs:.3g} epochs), rate {self.peak_rate:g} after {self.warmup:,}, {chosen}"
        )


def check_an_epoch(tuning: FineTuning, target_tokens: int, seconds_an_update: float, time_text: str) -> None:
    """On CPU workers, refuse a TIME that fits less than one epoch of the corpus (a large parent, NLLB's 600M or
    1.3B, on a CPU): what it would need, and that a GPU is the way."""
    epoch = max(1, math.ceil(target_tokens / max(1, tuning.tokens_per_update)))
    if tuning.max_update >= epoch:
        return
    raise FineTuningError(
        f"TIME={time_text}: {tuning.max_update:,} updates of {seconds_an_update:.1f} s fit on these CPU workers, less "
        f"than one epoch of the corpus ({epoch:,} updates of {tuning.tokens_per_update:,} tokens, about "
        f"{duration(epoch * seconds_an_update)} here): the parent is too large for this machine in that time. "
        "A GPU (GPUS=1), or a longer TIME"
    )


def check_pairs(pairs: int, held_out: int, min_pairs: int = MIN_PAIRS) -> None:
    """Refuse a corpus of fewer than ``min_pairs`` training pairs once ``held_out`` lines are held out of it."""
    if pairs - held_out < min_pairs:
        held = f", less the {held_out} held out for dev and test (give VALID and TEST to hold none)" if held_out else ""
        raise FineTuningError(
            f"TRAIN has {pairs} lines{held}: under {min_pairs} to fine-tune on (FINETUNE_MIN_PAIRS={min_pairs}). "
            "Add text, or set FINETUNE_MIN_PAIRS if you mean it"
        )


def held_out(pairs: int, given_valid: bool, given_test: bool) -> Dict[str, Optional[int]]:
    """The dev and test lines to hold out of TRAIN: HELD_OUT each where not given, or the from-scratch share where
    larger (preprocess.corpora.held_out_size); None where given."""
    from preprocess.corpora import held_out_size

    size = max(HELD_OUT, held_out_size(pairs, None))
    return {"valid": None if given_valid else size, "test": None if given_test else size}


def decide(
    pairs: int,
    target_tokens: int,
    max_update: Optional[int] = None,
    updates_that_fit: Optional[int] = None,
    eval_bleu: Optional[bool] = None,
) -> FineTuning:
    """The fine-tuning of a corpus of ``pairs`` training pairs and about ``target_tokens`` target pieces: for
    ``max_update`` updates (MAX_UPDATE), or ``updates_that_fit`` (TIME, at the batch this returns with either None:
    call again with them), or EPOCHS epochs. ``eval_bleu``: EVAL_BLEU as given (None: by the corpus's size)."""
    pieces_a_line = target_tokens / max(pairs, 1)
    tokens = int(min(MAX_TOKENS, max(MIN_TOKENS, round(SENTENCES * pieces_a_line / 64) * 64)))
    an_epoch = max(1, math.ceil(target_tokens / tokens))
    if max_update is not None:
        updates, length_from = max_update, "MAX_UPDATE"
    elif updates_that_fit is not None:
        updates, length_from = updates_that_fit, "TIME"
    else:
        updates, length_from = EPOCHS * an_epoch, "epochs"
    by_bleu = pairs < SMALL if eval_bleu is None else eval_bleu
    return FineTuning(
        pairs=pairs,
        tokens_per_update=tokens,
        max_update=max(1, updates),
        warmup=max(1, min(MAX_WARMUP, int(WARMUP_SHARE * updates))),
        peak_rate=PEAK_RATE,
        epochs=round(updates / an_epoch, 2),
        by_bleu=by_bleu,
        patience=PATIENCE if by_bleu else 0,
        length_from=length_from,
    )
