"""A model as fairseq-train is given it, in the paper's symbols: read from fairseq-train's flags and written back as
them in one place (:class:`Model`), and its parameters counted in one place (:meth:`Model.parameters`).

The architectures' sizes are transformer_plugin/architectures.py's, read as a file: the plugin itself cannot be
imported without fairseq, and the recipes ask for this at every start.
"""

import functools
import importlib.util
import os
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

# the model's options, as fairseq-train spells them, and the architecture's setting each one sets
SIZES = {
    "--encoder-layers": "encoder_layers",  # N (encoder)
    "--decoder-layers": "decoder_layers",  # N (decoder)
    "--d-model": "d_model",
    "--d-ff": "d_ff",
    "--attention-heads": "attention_heads",  # h
    "--d-k": "d_k",
    "--d-v": "d_v",
    "--dropout": "dropout",  # P_drop
    "--positional-encoding": "positional_encoding",
    "--max-source-positions": "max_source_positions",
    "--max-target-positions": "max_target_positions",
}
SHARING = ("--share-all-embeddings", "--share-decoder-input-output-embed")  # Section 3.4; neither: none shared


@functools.lru_cache(maxsize=None)
def architectures() -> Dict[str, Dict[str, object]]:
    """{arch: its sizes}: the base model's sizes with each architecture's overrides, from
    transformer_plugin/architectures.py, the description config.py builds the model from."""
    spec = importlib.util.find_spec("transformer_plugin")
    path = os.path.join(list(spec.submodule_search_locations)[0], "architectures.py")
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("_vaswani_architectures", path))
    module.__spec__.loader.exec_module(module)
    return {arch: {**module.BASE, **overrides} for arch, overrides in module.ARCHITECTURES.items()}


def flag(words: Sequence[str], name: str, default=None):
    """The value of the last ``name VALUE`` in words (fairseq takes the last), or default."""
    found = default
    for i, word in enumerate(words[:-1]):
        if word == name:
            found = words[i + 1]
    return found


@dataclass(frozen=True)
class Model:
    """``arch`` and the flags that change it, kept as given (``words``: their order is fairseq-train's command, and
    the recipes' stamps compare commands word by word); every size is read through :meth:`get`, the flag's value
    where one is given (the last, as fairseq takes it), else the architecture's."""

    arch: str
    words: Tuple[str, ...] = ()

    @classmethod
    def from_flags(cls, arch: str, flags: Union[str, Sequence[str]]) -> "Model":
        return cls(arch, tuple(shlex.split(flags) if isinstance(flags, str) else flags))

    def given(self, option: str) -> Optional[str]:
        """The value of ``option`` (``--d-model``) among the words, or None."""
        return flag(self.words, option)

    def get(self, name: str):
        """A size by the architecture's name for it (``d_model``, ``encoder_layers``): given, else the arch's."""
        option = next(o for o, n in SIZES.items() if n == name)
        value = self.given(option)
        if value is None:
            return (architectures().get(self.arch) or {}).get(name)
        return value if name == "positional_encoding" else float(value) if name == "dropout" else int(value)

    def __getattr__(self, name: str):
        if name in SIZES.values():
            return self.get(name)
        raise AttributeError(name)

    def has(self, flag: str) -> bool:
        return flag in self.words

    def with_sizes(self, **sizes) -> "Model":
        """The model with these sizes (``encoder_layers=2``): a flag given is changed where it stands, one not given
        is added at the end."""
        words = list(self.words)
        for name, value in sizes.items():
            option = next(o for o, n in SIZES.items() if n == name)
            if option in words:
                words[len(words) - 1 - words[::-1].index(option) + 1] = str(value)
            else:
                words += [option, str(value)]
        return Model(self.arch, tuple(words))

    def flags(self) -> List[str]:
        """fairseq-train's words for the model, after ``--arch``."""
        return list(self.words)

    def flag_text(self) -> str:
        return " ".join(self.words)

    def described(self) -> str:
        """'N=2, d_model 256, d_ff 1024' and the like, for people."""
        return f"N={self.encoder_layers}, d_model {self.d_model}, d_ff {self.d_ff}"

    def parameters(self, source_vocab: int, target_vocab: Optional[int] = None, biases: bool = True) -> int:
        """The model's parameters with vocabularies of these sizes (``target_vocab``: the source's), its embeddings
        shared as its flags say: an encoder layer's attention (W^Q, W^K, W^V of h x d_k, W^O) and feed-forward, a
        decoder layer's two attentions and feed-forward, and the embeddings (Section 3.4). ``biases=False`` counts
        as the paper counts (Table 3): the matrices alone, the biases and LayerNorms left out."""
        target_vocab = source_vocab if target_vocab is None else target_vocab
        d, ff, h = self.d_model, self.d_ff, self.attention_heads
        dk, dv = self.d_k or d // h, self.d_v or d // h
        b = 1 if biases else 0
        attention = d * h * dk * 2 + d * h * dv + h * dv * d + b * (h * dk * 2 + h * dv + d)
        feed_forward = d * ff + ff * d + b * (ff + d)
        norm = 2 * d * b
        encoder = self.encoder_layers * (attention + feed_forward + 2 * norm)
        decoder = self.decoder_layers * (2 * attention + feed_forward + 3 * norm)
        if self.has("--share-all-embeddings"):
            embeddings = max(source_vocab, target_vocab) * d
        elif self.has("--share-decoder-input-output-embed"):
            embeddings = (source_vocab + target_vocab) * d
        else:
            embeddings = (source_vocab + 2 * target_vocab) * d
        if self.positional_encoding == "learned":
            embeddings += (self.max_source_positions + self.max_target_positions) * d
        return encoder + decoder + embeddings


def shared(joint: bool) -> Tuple[str, ...]:
    """The embeddings shared (Section 3.4) with a joint vocabulary, or one a side."""
    return (SHARING[0],) if joint else (SHARING[1],)


def split_flags(words: Sequence[str]) -> Tuple[List[str], Optional[str], List[str]]:
    """(the model's flags, P_drop if given, the sharing of embeddings) of fairseq-train's words for a model."""
    model, dropout, share, i = [], None, [], 0
    while i < len(words):
        if words[i] in SHARING:
            share.append(words[i])
        elif words[i] == "--dropout" and i + 1 < len(words):
            dropout, i = words[i + 1], i + 1
        else:
            model.append(words[i])
        i += 1
    return model, dropout, share
