"""The budget rule's candidates: every model, dropout and batch it predicts for, from the budget runs' smallest model
to the paper's big, and their sizes as the paper counts them. To add a candidate model, add it to MODELS with where
its curve comes from; the speed file (``vaswani-speed-probe file``) times every model listed here."""

import functools
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from recipes.planner.model import Model, shared

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


def candidate_batches(devices: int = 1, max_tokens_per_device: int = 4096, least_share: int = 0) -> Tuple[int, ...]:
    """Tokens an update: BATCHES, and on several devices one and two micro-batches of each where that passes 25,000
    (Ott et al. 2018 trained at 400,000 on 128 GPUs); none that gives a device fewer than ``least_share`` tokens
    (budget/busy_share.py), and where that leaves none of them, the least that does and twice it."""
    more = [devices * max_tokens_per_device * m for m in (1, 2)] if devices > 1 else []
    found = {*BATCHES, *(b for b in more if b > max(BATCHES))}
    least = devices * least_share
    if least > max(found):
        found |= {least, 2 * least}
    return tuple(sorted(b for b in found if b >= least))


def candidates(
    devices: int = 1, max_tokens_per_device: int = 4096, least_share: Optional[Callable[[str, str], int]] = None
) -> List[Candidate]:
    """Every model of MODELS at each of DROPOUTS and each batch: from the cheapest model to the costliest.
    ``least_share``: the fewest tokens an update a device of the training computes a model's update well with (its
    arch and flags; budget/busy_share.py), or None: no least."""
    found = []
    for arch, flags, source in MODELS:
        least = least_share(arch, flags) if least_share else 0
        for dropout in DROPOUTS:
            for tokens in candidate_batches(devices, max_tokens_per_device, least):
                model = Model.from_flags(arch, flags)
                name = f"{model.described()}, P_drop {dropout}, {tokens:,} tokens"
                found.append(Candidate(name, arch, flags, dropout, tokens, source))
    return found


def model_words(candidate: Candidate) -> str:
    """'N=2, d_model 256, d_ff 1024' and the like, for people."""
    return candidate.model.described()
