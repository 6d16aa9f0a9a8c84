"""``INIT=DIR`` in recipes/parallel_text.sh: the parent model a corpus fine-tunes, read and checked before any work.

    vaswani-parent settings --init DIR --src en --tgt de --work WORK     # or python -m recipes.planner.parent

prints what the recipe's plan (recipes/planner/decide.py) holds of the parent, as JSON: where its checkpoint,
dictionaries and sentencepiece models are, and its model's flags, from one of three kinds of DIR:

- a MarianMT directory: an OPUS-MT model as the Hugging Face hub has it (``config.json`` with model_type marian,
  ``model.safetensors`` or ``pytorch_model.bin``, ``vocab.json``, ``source.spm``, ``target.spm``), or a model this
  project exported (``EXPORT=hf``). The recipe imports it into WORK/parent with ``vaswani-import-marian``, a stage;
- an NLLB-200 or M2M100 directory (model_type m2m_100, its weights, ``sentencepiece.bpe.model`` and the tokenizer's
  files): imported with ``vaswani-import-m2m100``; its codes for SRC and TGT (``eng_Latn``, ``__en__``: SRC_CODE and
  TGT_CODE, or found by ISO 639) lead each source and each target sentence;
- a directory either import wrote: ``checkpoint.pt``, ``dict.SRC.txt``, ``dict.TGT.txt``, ``source.spm`` and
  ``target.spm`` (and ``languages.json``, NLLB's and M2M100's codes).

The parent's pair is tokenizer_config.json's source_lang and target_lang (or the checkpoint's task), its codes ISO
639-1 or 639-3 (``en`` and ``eng`` are one language: transformer_plugin_cli/languages.py). A multilingual parent,
whose target is a group (``mul``, ``gem``, ``ROMANCE``), translates into the TGT of the ``>>xx<<`` token its vocabulary
has for it, or the one TGT_TOKEN names; the recipe puts that token before each source sentence as one id.

Refused, naming the file: a directory of neither kind, a missing sentencepiece model or dictionary, a parent that
translates another pair than SRC-TGT, a group without one token for TGT (or a TGT_TOKEN not in its vocabulary), a
checkpoint whose embeddings do not have the rows of the dictionaries beside it or that was imported with other
dictionaries (their digests, which the import keeps), a model this model cannot hold (import_marian).
"""

import argparse
import os
import json
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional

from transformer_plugin_cli import languages
from recipes.planner.model import Model, split_flags
from transformer_plugin_cli.console import console_script

from transformer_plugin_cli.serving.bart_family import ImportRefused, file_digest, read_json
from transformer_plugin_cli.serving.import_marian import (
    SOURCE_SPM,
    TARGET_SPM,
    check_config,
    marian_flags,
    tokenizer_config,
    vocabulary,
)

WEIGHTS = ("model.safetensors", "pytorch_model.bin")
# training-time settings of the dataclass, not the model's: fine-tuning sets its own
NOT_THE_MODEL = ("checkpoint_activations", "offload_activations")


class ParentError(ValueError):
    """INIT names no model this recipe can fine-tune on SRC-TGT; the message names the file."""


@dataclass
class Parent:
    kind: str  # "marian" or "m2m100" (imported by the recipe), or "fairseq" (an import's output)
    directory: str  # where checkpoint.pt and the dictionaries are, or will be once imported
    src_spm: str
    tgt_spm: str
    flags: List[str]  # the model's flags, --dropout and the sharing of embeddings among them
    vocab_size: int  # the target side's embedding rows
    target_token: str = ""  # a multilingual parent's >>xx<< for TGT, put before each source sentence as one id
    source_code: str = ""  # an NLLB or M2M100 parent's code for SRC, before each source sentence
    target_code: str = ""  # and for TGT, before each target sentence (fairseq-generate forces it: --prefix-size 1)

    def assignments(self, src: str, tgt: str) -> Dict[str, str]:
        model, dropout, share = split_flags(self.flags)
        shape = Model.from_flags("vaswani_base", self.flags)
        return {
            "PARENT_KIND": self.kind,
            "PARENT_DIR": self.directory,
            "PARENT_CHECKPOINT": os.path.join(self.directory, "checkpoint.pt"),
            "PARENT_SRC_DICT": os.path.join(self.directory, f"dict.{src}.txt"),
            "PARENT_TGT_DICT": os.path.join(self.directory, f"dict.{tgt}.txt"),
            "PARENT_SRC_SPM": self.src_spm,
            "PARENT_TGT_SPM": self.tgt_spm,
            "PARENT_MODEL_FLAGS": " ".join(model),
            "PARENT_DROPOUT": dropout or "0.1",
            "PARENT_SHARE": " ".join(share),
            "PARENT_VOCAB_SIZE": str(self.vocab_size),
            # its positions: longer lines are counted and named when the corpus is encoded, and left out of training
            # and validation (fairseq would drop training lines silently, and stop at a dev line)
            "PARENT_SOURCE_POSITIONS": str(shape.max_source_positions),
            "PARENT_TARGET_POSITIONS": str(shape.max_target_positions),
            "PARENT_SUMMARY": summary(self.flags, self.vocab_size),
            "PARENT_TGT_TOKEN": self.target_token,
            "PARENT_SRC_CODE": self.source_code,
            "PARENT_TGT_CODE": self.target_code,
        }


def summary(flags: List[str], vocab_size: int) -> str:
    """One line: the parent's shape, as the recipe prints its models'."""
    model = Model.from_flags("vaswani_base", flags)
    parts = [
        f"N={model.given('--encoder-layers')}+{model.given('--decoder-layers')}",
        f"d_model {model.given('--d-model')}",
        f"d_ff {model.given('--d-ff')}",
        f"h {model.given('--attention-heads')}",
        f"P_drop {model.given('--dropout')}",
        model.given("--activation-fn") or "relu",
    ]
    parts += [
        name
        for flag, name in (("--output-bias", "output bias"), ("--share-all-embeddings", "shared embeddings"))
        if model.has(flag)
    ]
    if model.given("--decoder-start") == "pad":
        parts.append("decoding from <pad>")
    return ", ".join(parts) + f", {vocab_size:,} target pieces"


def spm_models(init: str) -> List[str]:
    paths = [os.path.join(init, name) for name in (SOURCE_SPM, TARGET_SPM)]
    for path in paths:
        if not os.path.isfile(path):
            raise ParentError(
                f"{path}: no such file (the parent's sentencepiece model: the corpus is split into its pieces)"
            )
    return paths


def marian_parent(init: str, src: str, tgt: str, work: str, tgt_token: str = "") -> Parent:
    config_path = os.path.join(init, "config.json")
    try:
        config = read_json(config_path)
        check_config(config, config_path)
    except ImportRefused as e:
        raise ParentError(str(e)) from None
    if not any(os.path.isfile(os.path.join(init, name)) for name in WEIGHTS):
        raise ParentError(
            f"{init}: no {' or '.join(WEIGHTS)}: a MarianMT directory holds its weights beside config.json"
        )
    src_spm, tgt_spm = spm_models(init)
    path, tokenizer = tokenizer_config(init)
    specials = {"</s>": config.get("eos_token_id", 0), "<pad>": config.get("pad_token_id")}
    target_rows = config.get("decoder_vocab_size") or config["vocab_size"]
    source_vocab = os.path.join(init, "vocab.json")
    try:
        pieces = vocabulary(source_vocab, config["vocab_size"], specials)
        if tokenizer.get("separate_vocabs"):
            vocabulary(os.path.join(init, "target_vocab.json"), target_rows, specials)
    except ImportRefused as e:
        raise ParentError(str(e)) from None
    theirs = (tokenizer.get("source_lang"), tokenizer.get("target_lang"))
    token = pair_token(theirs, src, tgt, tgt_token, pieces, path, source_vocab)
    return Parent("marian", os.path.join(work, "parent"), src_spm, tgt_spm, marian_flags(config), target_rows, token)


def m2m100_parent(init: str, src: str, tgt: str, work: str, src_code: str = "", tgt_code: str = "") -> Parent:
    """An NLLB-200 or M2M100 directory: its configuration, weights, sentencepiece model and tokenizer checked, and
    its codes for SRC and TGT (SRC_CODE and TGT_CODE, or found by ISO 639: import_m2m100.code_for)."""
    from transformer_plugin_cli.serving import import_m2m100 as m2m100

    config_path = os.path.join(init, "config.json")
    try:
        config = read_json(config_path)
        m2m100.check_config(config, config_path)
        if not any(os.path.isfile(os.path.join(init, name)) for name in WEIGHTS):
            raise ParentError(f"{init}: no {' or '.join(WEIGHTS)}: the model's weights beside config.json")
        spm = os.path.join(init, m2m100.SENTENCEPIECE)
        if not os.path.isfile(spm):
            raise ParentError(
                f"{spm}: no such file (the model's sentencepiece model: the corpus is split into its pieces)"
            )
        tokens = m2m100.tokens_by_id(m2m100.load_tokenizer(init), config["vocab_size"], init)
        codes = m2m100.language_codes(tokens)
        pair = m2m100.code_for(src, src_code, codes, init), m2m100.code_for(tgt, tgt_code, codes, init)
    except ImportRefused as e:
        raise ParentError(str(e)) from None
    flags = m2m100.m2m100_flags(config)
    return Parent("m2m100", os.path.join(work, "parent"), spm, spm, flags, config["vocab_size"], "", *pair)


def imported_codes(init: str, src: str, tgt: str, src_code: str, tgt_code: str, languages_file: str):
    """(SRC's code, TGT's code) of a directory vaswani-import-m2m100 wrote, from its languages.json."""
    from transformer_plugin_cli.serving import import_m2m100 as m2m100

    try:
        codes = read_json(languages_file)["codes"]
        return m2m100.code_for(src, src_code, codes, languages_file), m2m100.code_for(
            tgt, tgt_code, codes, languages_file
        )
    except (KeyError, TypeError, ImportRefused) as e:
        raise ParentError(f"{languages_file}: {e}") from None


def pair_token(theirs, src: str, tgt: str, tgt_token: str, pieces: List[str], where: str, vocabulary_file: str) -> str:
    """The >>xx<< token the parent needs before each source sentence to translate SRC into TGT ('' for none), once
    its pair is checked against SRC and TGT (transformer_plugin_cli/languages.py): ISO 639-1 and 639-3 codes are one
    language; a parent into a group of languages takes a TGT its vocabulary has a token for; TGT_TOKEN names one."""
    if tgt_token and tgt_token not in pieces:
        raise ParentError(
            f"{vocabulary_file}: no piece {tgt_token} (TGT_TOKEN); its language tokens: {listed(tokens_of(pieces))}"
        )
    if not all(theirs):
        return tgt_token
    if not languages.same_language(theirs[0], src):
        raise ParentError(f"{where}: the parent translates {theirs[0]}-{theirs[1]}, not {src}-{tgt} (SRC, TGT)")
    if languages.same_language(theirs[1], tgt):
        return tgt_token
    if not languages.is_group(theirs[1]):
        raise ParentError(f"{where}: the parent translates {theirs[0]}-{theirs[1]}, not {src}-{tgt} (SRC, TGT)")
    if tgt_token:
        return tgt_token
    found = languages.target_tokens(tgt, pieces)
    if len(found) != 1:
        what = "none names" if not found else f"{listed(found)} all name"
        raise ParentError(
            f"{where}: the parent translates {theirs[0]} into {theirs[1]}, and of the language tokens of "
            f"{vocabulary_file} ({listed(tokens_of(pieces))}) {what} {tgt} (TGT): set TGT_TOKEN to the one to use"
        )
    return found[0]


def tokens_of(pieces: List[str]) -> List[str]:
    return [p for p in pieces if p.startswith(">>") and p.endswith("<<")]


def listed(items: List[str], most: int = 8) -> str:
    return (", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")) or "none"


def fairseq_flags(model_cfg: dict) -> List[str]:
    """fairseq-train's flags (less --arch) that build the model of a checkpoint's cfg['model']: every field of the
    model's dataclass, so that the architecture's defaults play no part."""
    import logging
    from dataclasses import fields

    patches = logging.getLogger(
        "transformer_plugin.patches"
    )  # its list of patches at import: not for a recipe's settings
    level = patches.level
    patches.setLevel(logging.WARNING)
    try:
        from transformer_plugin.config import VaswaniTransformerConfig
    finally:
        patches.setLevel(level)  # its modules' own messages (the CPU launchers') as before

    flags = []
    for f in fields(VaswaniTransformerConfig):
        if f.name.startswith("_") or f.name in NOT_THE_MODEL or model_cfg.get(f.name) is None:
            continue
        value, flag = model_cfg[f.name], "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            flags += [flag] if value else []
        else:
            flags += [flag, str(value)]
    return flags


def fairseq_parent(
    init: str, src: str, tgt: str, tgt_token: str = "", src_code: str = "", tgt_code: str = ""
) -> Parent:
    import torch

    checkpoint = os.path.join(init, "checkpoint.pt")
    dicts = {lang: os.path.join(init, f"dict.{lang}.txt") for lang in (src, tgt)}
    for lang, path in dicts.items():
        if not os.path.isfile(path):
            others = sorted(n for n in os.listdir(init) if n.startswith("dict.") and n.endswith(".txt"))
            raise ParentError(
                f"{path}: no such file (the parent's dictionary for {lang}; {init} has {', '.join(others) or 'none'})"
            )
    src_spm, tgt_spm = spm_models(init)
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        cfg = state["cfg"]
        model_cfg, task_cfg = dict(cfg["model"]), dict(cfg.get("task") or {})
        weights = state["model"]
    except Exception as e:
        raise ParentError(
            f"{checkpoint}: not a fairseq checkpoint this project wrote ({type(e).__name__}: {e})"
        ) from None
    if "encoder.embed.embed_tokens.weight" not in weights:
        raise ParentError(f"{checkpoint}: not a vaswani_transformer checkpoint (arch {model_cfg.get('_name')!r})")
    # the MarianMT model's own pair where the import kept it (a multilingual parent imported as en-de is eng-mul),
    # else the pair it was trained or imported as
    extra = state.get("extra_state") or {}
    marian_pair = extra.get("marian_pair") or [None, None]
    theirs = tuple(m or t for m, t in zip(marian_pair, (task_cfg.get("source_lang"), task_cfg.get("target_lang"))))
    with open(dicts[src], encoding="utf-8") as f:
        source_pieces = [line.rsplit(" ", 1)[0] for line in f if line.strip()]
    languages_file = os.path.join(init, "languages.json")
    codes = ("", "")
    if os.path.isfile(languages_file):  # an NLLB or M2M100 model: its codes, not a pair of its own
        codes, token = imported_codes(init, src, tgt, src_code, tgt_code, languages_file), ""
    else:
        token = pair_token(theirs, src, tgt, tgt_token, source_pieces, checkpoint, dicts[src])
    rows = {
        src: weights["encoder.embed.embed_tokens.weight"].size(0),
        tgt: weights["decoder.embed.embed_tokens.weight"].size(0),
    }
    kept = extra.get("dictionaries") or {}
    for lang, path in dicts.items():
        with open(path, encoding="utf-8") as f:
            entries = 4 + sum(1 for line in f if line.strip())  # fairseq's <s> <pad> </s> <unk>, then a symbol a line
        if entries != rows[lang]:
            raise ParentError(
                f"{path}: {entries} entries, but {checkpoint} has {rows[lang]} embedding rows for {lang}: "
                "not the dictionary this checkpoint was trained with"
            )
        if lang in kept and kept[lang] != file_digest(path):
            raise ParentError(
                f"{path}: not the dictionary {checkpoint} was imported with (another file of the same size)"
            )
    return Parent("fairseq", init, src_spm, tgt_spm, fairseq_flags(model_cfg), rows[tgt], token, *codes)


def parent_model(init: str):
    """(the model's flags as the plan gives them to fairseq-train, less dropout and sharing; its target rows) of a
    parent directory of any kind, without a pair: what a speed file times for it (vaswani-speed-probe file
    --parent)."""
    config = os.path.join(init, "config.json")
    if os.path.isfile(config):
        from transformer_plugin_cli.serving import import_m2m100

        found = read_json(config)
        flags = import_m2m100.m2m100_flags(found) if found.get("model_type") == "m2m_100" else marian_flags(found)
        rows = found.get("decoder_vocab_size") or found["vocab_size"]
    else:
        import torch

        state = torch.load(os.path.join(init, "checkpoint.pt"), map_location="cpu", weights_only=False)
        flags, rows = (
            fairseq_flags(dict(state["cfg"]["model"])),
            state["model"]["decoder.embed.embed_tokens.weight"].size(0),
        )
    return " ".join(split_flags(flags)[0]), int(rows)


def read_parent(
    init: str, src: str, tgt: str, work: str, tgt_token: str = "", src_code: str = "", tgt_code: str = ""
) -> Parent:
    """The parent INIT names, checked (module docstring); ``tgt_token``: TGT_TOKEN, a multilingual parent's
    >>xx<< to put before each source sentence (empty: found in its vocabulary where its target is a group);
    ``src_code``, ``tgt_code``: SRC_CODE and TGT_CODE, an NLLB or M2M100 parent's codes (empty: by ISO 639)."""
    if not os.path.isdir(init):
        raise ParentError(f"INIT={init}: no such directory")
    config = os.path.join(init, "config.json")
    if os.path.isfile(config):
        try:
            kind = read_json(config).get("model_type")
        except ImportRefused as e:
            raise ParentError(str(e)) from None
        if kind in ("m2m_100", "nllb_moe"):
            return m2m100_parent(init, src, tgt, work, src_code, tgt_code)
        return marian_parent(init, src, tgt, work, tgt_token)
    if os.path.isfile(os.path.join(init, "checkpoint.pt")):
        return fairseq_parent(init, src, tgt, tgt_token, src_code, tgt_code)
    raise ParentError(
        f"INIT={init}: neither a MarianMT, NLLB-200 or M2M100 model (config.json, its weights, its tokenizer's files) "
        "nor a directory vaswani-import-marian or vaswani-import-m2m100 wrote (checkpoint.pt, dict.SRC.txt, "
        "dict.TGT.txt)"
    )


@console_script
def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="vaswani-parent", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "settings", help="what the recipe's plan holds of the parent (JSON), or an error naming the file"
    )
    s.add_argument("--init", required=True)
    s.add_argument("--src", required=True)
    s.add_argument("--tgt", required=True)
    s.add_argument("--work", required=True, help="the recipe's WORK: a MarianMT parent is imported into WORK/parent")
    s.add_argument("--tgt-token", default="", help="a multilingual parent's >>xx<< for TGT (default: found)")
    s.add_argument("--src-code", default="", help="an NLLB or M2M100 parent's code for SRC (default: by ISO 639)")
    s.add_argument("--tgt-code", default="", help="an NLLB or M2M100 parent's code for TGT (default: by ISO 639)")
    a = p.parse_args(argv)
    try:
        parent = read_parent(a.init, a.src, a.tgt, a.work, a.tgt_token, a.src_code, a.tgt_code)
    except ParentError as e:
        print(f"INIT: {e}", file=sys.stderr)
        return 2
    print(json.dumps(parent.assignments(a.src, a.tgt), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
