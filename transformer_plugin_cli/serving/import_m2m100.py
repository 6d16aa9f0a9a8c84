"""``vaswani-import-m2m100 HF_DIR OUT_DIR --source-lang en --target-lang de``: an NLLB-200 or M2M100 model (their dense
checkpoints as Hugging Face publishes them, ``M2M100ForConditionalGeneration``) as a ``vaswani_transformer``
checkpoint that fairseq decodes, fine-tunes, averages and exports again.

    vaswani-import-m2m100 nllb-200-distilled-600M nllb.fairseq --source-lang en --target-lang de

writes, in OUT_DIR, ``checkpoint.pt``, ``dict.SRC.txt`` and ``dict.TGT.txt`` (one dictionary: the model's, whose
language codes are symbols of it), ``source.spm`` and ``target.spm`` (the tokenizer's own sentencepiece model,
``sentencepiece.bpe.model``), ``languages.json`` (the family, its codes, and the pair's), and ``tokenizer/`` (the
tokenizer's files, for the export back).

NLLB and M2M100 were trained with fairseq, and are this paper's Transformer with the flags it already has:
``--normalize-before`` (pre-norm, a LayerNorm after each stack), ``--sinusoid-variant fairseq`` (fairseq's sinusoids,
numbered from the padding index + 1), ``--activation-fn relu``, ``--share-all-embeddings`` (one matrix for the
source, the target and the output), embeddings scaled by sqrt(d_model). No coordinate is renamed: their weights are
fairseq's, and so are their ids (<s> 0, <pad> 1, </s> 2, <unk> 3: fairseq's dictionary).

Languages. Each sentence is ``[code] pieces </s>`` on both sides, as the tokenizer writes it (NLLB's ``eng_Latn``,
M2M100's ``__en__``): the decoder starts from </s>, as fairseq's does, and its first token is forced to the target's
code (``forced_bos_token_id``: fairseq-generate's ``--prefix-size 1`` with the code leading each reference). A pair
given as the recipes take it (``en``, ``de``: ISO 639-1 or 639-3) is mapped to the model's codes by ISO 639
(transformer_plugin_cli/languages.py); ``--source-code`` / ``--target-code`` name one where the language has several
(``zho_Hans``, ``zho_Hant``) or its code is another (``arb_Arab`` for ``ar``).

Before writing, the imported model is compared with transformers' on a probe batch (log-probabilities within 1e-4).
Refused, naming the file: another ``model_type`` (NLLB's mixture of experts, ``nllb_moe``, included), an activation
other than ReLU, embeddings not scaled or not shared, encoder and decoder of different widths or heads, ids other
than fairseq's four first, a vocabulary that does not match the embeddings, a missing sentencepiece model, a
language the model has no code for.
"""

import argparse
import json
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

from transformer_plugin_cli.console import console_script

from .bart_family import (
    ImportRefused,
    build_model,
    copy_layers,
    copy_norm,
    read_json,
    said_imported,
    shape_flags,
    write_import,
)
from .import_marian import SOURCE_SPM, TARGET_SPM

SENTENCEPIECE = "sentencepiece.bpe.model"
LANGUAGES = "languages.json"
TOKENIZER_FILES = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "vocab.json",
    "sentencepiece.bpe.model",
    "added_tokens.json",
)
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
NLLB_CODE = re.compile(r"[a-z]{2,3}_[A-Z][a-z]{3}")  # eng_Latn
M2M100_CODE = re.compile(r"__([A-Za-z]{2,3}(?:[_-][A-Za-z]+)?)__")  # __en__


class M2M100ImportError(ImportRefused):
    """HF_DIR is not a model of the family this model can hold exactly, or a file is missing; the message names it."""


def family(config: dict, tokenizer) -> str:
    """ "nllb" or "m2m100", by the tokenizer's class (both configs are model_type m2m_100)."""
    return "nllb" if "nllb" in type(tokenizer).__name__.lower() else "m2m100"


def check_config(config: dict, where: str) -> None:
    """Refuse, naming the setting, a configuration the paper's model with its flags cannot compute."""
    if config.get("model_type") != "m2m_100":
        kind = config.get("model_type")
        dense = (
            " (NLLB's mixture of experts: the dense checkpoints, 600M, 1.3B and 3.3B, import)"
            if kind == "nllb_moe"
            else ""
        )
        raise M2M100ImportError(f"{where}: model_type {kind!r}, not 'm2m_100'{dense}")
    if config.get("activation_function", "relu") != "relu":
        raise M2M100ImportError(f"{where}: activation_function {config['activation_function']!r}: relu only")
    if not config.get("scale_embedding", False):
        raise M2M100ImportError(f"{where}: scale_embedding false: this model scales embeddings by sqrt(d_model)")
    if not config.get("tie_word_embeddings", True):
        raise M2M100ImportError(f"{where}: tie_word_embeddings false: one matrix for both sides and the output only")
    for a, b in (("encoder_ffn_dim", "decoder_ffn_dim"), ("encoder_attention_heads", "decoder_attention_heads")):
        if config.get(a) != config.get(b):
            raise M2M100ImportError(f"{where}: {a} {config.get(a)} and {b} {config.get(b)}: one value for both sides")
    if config["d_model"] % config["encoder_attention_heads"] != 0:
        raise M2M100ImportError(
            f"{where}: d_model {config['d_model']} is not divisible by {config['encoder_attention_heads']} heads"
        )
    for name, want in (("pad_token_id", 1), ("eos_token_id", 2), ("decoder_start_token_id", 2)):
        if config.get(name, want) != want:
            raise M2M100ImportError(f"{where}: {name} {config.get(name)}: fairseq's is {want}")


def m2m100_flags(config: dict) -> List[str]:
    """The ``vaswani_transformer`` flags (less ``--arch``) of the model of an M2M100 / NLLB config.json."""
    flags = shape_flags(config) + [
        "--activation-fn",
        "relu",
        "--normalize-before",
        "--sinusoid-variant",
        "fairseq",
        "--share-all-embeddings",
        "--max-source-positions",
        config.get("max_position_embeddings", 1024),
        "--max-target-positions",
        config.get("max_position_embeddings", 1024),
    ]
    return [str(f) for f in flags]


def load_tokenizer(hf_dir: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(hf_dir)
    except Exception as e:  # transformers says what it lacks in its own words
        raise M2M100ImportError(f"{hf_dir}: no tokenizer transformers can load ({type(e).__name__}: {e})") from None


def tokens_by_id(tokenizer, size: int, where: str) -> List[str]:
    """The symbol of each of the model's ``size`` embedding rows, as the tokenizer numbers them: its vocabulary, its
    language codes (M2M100's tokenizer keeps them apart), and fairseq's ``madeupwordNNNN`` for rows it names none
    (fairseq padded the dictionary to a multiple of 8)."""
    found: Dict[int, str] = {}
    for token, i in {**tokenizer.get_vocab(), **getattr(tokenizer, "lang_token_to_id", {})}.items():
        if not isinstance(i, int) or i < 0 or (i in found and found[i] != token):
            raise M2M100ImportError(f"{where}: the tokenizer gives {token!r} the id {i!r}, taken or not an id")
        found[i] = token
    if max(found) >= size:
        raise M2M100ImportError(
            f"{where}: the tokenizer has ids up to {max(found)}, the model {size} embedding rows (config.json's "
            "vocab_size)"
        )
    tokens, used, madeup = [], set(found.values()), 0
    for i in range(size):
        if i not in found:
            while f"madeupword{madeup:04d}" in used:
                madeup += 1
            found[i] = f"madeupword{madeup:04d}"
            used.add(found[i])
        tokens.append(found[i])
    if tuple(tokens[:4]) != FAIRSEQ_SPECIALS:
        raise M2M100ImportError(f"{where}: ids 0-3 are {tokens[:4]}, not fairseq's {list(FAIRSEQ_SPECIALS)}")
    for i, token in enumerate(tokens):
        if not token or any(c.isspace() for c in token):
            raise M2M100ImportError(f"{where}: the token of id {i}, {token!r}, is empty or holds a space")
    return tokens


def language_codes(tokens: List[str]) -> List[str]:
    """The language codes among a vocabulary's symbols: NLLB's ``eng_Latn``, M2M100's ``__en__``."""
    return [t for t in tokens if NLLB_CODE.fullmatch(t) or M2M100_CODE.fullmatch(t)]


def code_language(code: str) -> str:
    """The language a code names: ``eng`` of ``eng_Latn``, ``en`` of ``__en__``."""
    m = M2M100_CODE.fullmatch(code)
    return m.group(1) if m else code.split("_")[0]


def listed(codes: List[str], most: int = 12) -> str:
    """Codes for a message: NLLB has 202, the first ``most`` and how many more."""
    return ", ".join(codes[:most]) + (f" and {len(codes) - most} more" if len(codes) > most else "")


def code_for(lang: str, given: Optional[str], codes: List[str], where: str) -> str:
    """The model's code for the recipe's language ``lang`` (``given``: a code named outright); refused, listing the
    codes, where it has none or several."""
    from ..languages import in_macrolanguage, same_language

    if given:
        if given not in codes:
            raise M2M100ImportError(f"{where}: no language code {given!r} (it has {listed(codes)})")
        return given
    if lang in codes:
        return lang
    found = [c for c in codes if same_language(code_language(c), lang)]
    if not found:  # a macrolanguage (sw, ar, fa, ms): its standard language where the model has one
        members = {c: in_macrolanguage(code_language(c), lang) for c in codes}
        standard = [c for c, kind in members.items() if kind == "standard"]
        found = standard if len(standard) == 1 else [c for c, kind in members.items() if kind]
    if len(found) == 1:
        return found[0]
    if not found:
        raise M2M100ImportError(
            f"{where}: no language code for {lang!r} among its {len(codes)} ({listed(codes)}): name one with "
            "--source-code / --target-code (the recipes: SRC_CODE, TGT_CODE)"
        )
    raise M2M100ImportError(
        f"{where}: several codes for {lang!r} ({', '.join(found)}): name one with --source-code / --target-code "
        "(the recipes: SRC_CODE, TGT_CODE)"
    )


def fairseq_dictionary(tokens: List[str]):
    """A fairseq Dictionary whose ids are the model's: fairseq's four, then every symbol in id order."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for i, token in enumerate(tokens[4:], start=4):
        if dictionary.add_symbol(token, n=len(tokens) - i) != i:
            raise M2M100ImportError(f"the symbol {token!r} (id {i}) comes twice")
    return dictionary


def load_weights(model, theirs: Dict[str, "object"]) -> None:
    """Their weights into ``model``: the layers (bart_family.copy_layers, no coordinate renamed), each stack's
    LayerNorm, the one embedding matrix."""
    import torch

    inverse = torch.arange(model.encoder.embed.embed_tokens.weight.size(1))

    def take(name):
        return theirs[name].detach().float()

    with torch.no_grad():
        copy_layers(model, take, inverse)
        copy_norm(model.encoder.layer_norm, take, "model.encoder.layer_norm", inverse)
        copy_norm(model.decoder.layer_norm, take, "model.decoder.layer_norm", inverse)
        model.encoder.embed.embed_tokens.weight.copy_(take("model.shared.weight"))  # its ids are fairseq's


def check_equivalent(model, theirs, src_code: int, tgt_code: int, tolerance: float = 1e-4) -> float:
    """The largest difference between the two models' log-probabilities on a probe batch of ragged sentences,
    ``[code] pieces </s>`` (fairseq's padded on the left, theirs on the right with its attention mask), the decoder
    fed ``</s> [code] pieces``."""
    import torch

    generator = torch.Generator().manual_seed(0)
    config = theirs.config
    n = model.encoder.embed.embed_tokens.weight.size(0)
    pad, eos = config.pad_token_id, config.eos_token_id
    ordinary = torch.arange(4, n)
    lengths = [9, 6, 3]
    theirs_src = torch.full((3, 11), pad)
    ours_src = torch.full((3, 11), pad)
    for b, length in enumerate(lengths):
        words = [src_code] + ordinary[torch.randint(len(ordinary), (length,), generator=generator)].tolist() + [eos]
        theirs_src[b, : len(words)] = torch.tensor(words)
        ours_src[b, 11 - len(words) :] = torch.tensor(words)
    target = ordinary[torch.randint(len(ordinary), (6,), generator=generator)].tolist()
    decoder_input = torch.tensor([[eos, tgt_code] + target] * 3)
    with torch.no_grad():
        ours = model.get_normalized_probs(
            model(ours_src, torch.tensor([n + 2 for n in lengths]), decoder_input), log_probs=True
        )
        found = (
            theirs(input_ids=theirs_src, attention_mask=theirs_src.ne(pad).long(), decoder_input_ids=decoder_input)
            .logits.float()
            .log_softmax(-1)
        )
    difference = float((ours.float() - found).abs().max())
    if not difference <= tolerance:
        raise M2M100ImportError(f"the imported model's log-probabilities differ from transformers' by {difference:.2e}")
    return difference


def import_m2m100(
    hf_dir: str,
    out_dir: str,
    source_lang: str,
    target_lang: str,
    source_code: Optional[str] = None,
    target_code: Optional[str] = None,
    force: bool = False,
) -> Tuple[str, List[str]]:
    """Write OUT_DIR (module docstring) from the NLLB or M2M100 directory ``hf_dir``: (the checkpoint's path, the
    fairseq-train flags that build this model, for --finetune-from-model)."""
    where = os.path.join(hf_dir, "config.json")
    config = read_json(where)
    check_config(config, where)
    sentencepiece = os.path.join(hf_dir, SENTENCEPIECE)
    if not os.path.exists(sentencepiece):
        raise M2M100ImportError(f"{sentencepiece}: no such file (the sentencepiece model of the model's tokenizer)")
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise M2M100ImportError(f"{out_dir}: not empty (--force replaces it)")
    tokenizer = load_tokenizer(hf_dir)
    tokens = tokens_by_id(tokenizer, config["vocab_size"], hf_dir)
    codes = language_codes(tokens)
    if not codes:
        raise M2M100ImportError(f"{hf_dir}: the tokenizer has no language codes (eng_Latn, __en__) among its symbols")
    pair = (
        code_for(source_lang, source_code, codes, hf_dir),
        code_for(target_lang, target_code, codes, hf_dir),
    )
    from transformers import M2M100ForConditionalGeneration

    theirs = M2M100ForConditionalGeneration.from_pretrained(hf_dir).float().eval()
    dictionary = fairseq_dictionary(tokens)
    model, args, model_flags = build_model(m2m100_flags(config), dictionary, dictionary)
    model.eval()
    load_weights(model, theirs.state_dict())
    check_equivalent(model, theirs, tokens.index(pair[0]), tokens.index(pair[1]))

    args.source_lang, args.target_lang, args.data = source_lang, target_lang, out_dir
    languages = {
        "family": family(config, tokenizer),
        "codes": codes,
        "source": {"lang": source_lang, "code": pair[0]},
        "target": {"lang": target_lang, "code": pair[1]},
    }
    staged = os.path.join(os.path.dirname(os.path.abspath(out_dir)), f".{os.path.basename(out_dir)}.languages.json")
    with open(staged, "w", encoding="utf-8") as f:
        json.dump(languages, f, indent=1)
    tokenizer_dir = os.path.join(os.path.dirname(os.path.abspath(out_dir)), f".{os.path.basename(out_dir)}.tokenizer")
    os.makedirs(tokenizer_dir, exist_ok=True)
    import shutil

    for name in TOKENIZER_FILES:
        if os.path.exists(os.path.join(hf_dir, name)):
            shutil.copyfile(os.path.join(hf_dir, name), os.path.join(tokenizer_dir, name))
    try:
        write_import(
            out_dir,
            hf_dir,
            model,
            args,
            (source_lang, target_lang),
            (dictionary, dictionary),
            {"languages": languages},
            {SOURCE_SPM: sentencepiece, TARGET_SPM: sentencepiece, LANGUAGES: staged, "tokenizer": tokenizer_dir},
        )
    finally:
        os.remove(staged)
        shutil.rmtree(tokenizer_dir, ignore_errors=True)
    return os.path.join(out_dir, "checkpoint.pt"), model_flags


@console_script
def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="vaswani-import-m2m100", description=__doc__.split("\n\n")[0])
    p.add_argument("hf_dir", help="an NLLB-200 or M2M100 directory: config.json, its weights, its tokenizer's files")
    p.add_argument("out_dir", help="where checkpoint.pt, the dictionaries, the sentencepiece model and languages go")
    p.add_argument("--source-lang", required=True, help="SRC as the recipes name it (en, eng): the files' suffix")
    p.add_argument("--target-lang", required=True, help="TGT as the recipes name it (de, deu)")
    p.add_argument("--source-code", help="the model's code for SRC (eng_Latn, __en__): default, found by ISO 639")
    p.add_argument("--target-code", help="the model's code for TGT (deu_Latn, __de__)")
    p.add_argument("--force", action="store_true", help="replace a non-empty OUT_DIR")
    a = p.parse_args(argv)
    try:
        path, flags = import_m2m100(
            a.hf_dir, a.out_dir, a.source_lang, a.target_lang, a.source_code, a.target_code, a.force
        )
    except ImportRefused as e:
        print(f"vaswani-import-m2m100: error: {e}", file=sys.stderr)
        return 2
    with open(os.path.join(a.out_dir, LANGUAGES), encoding="utf-8") as f:
        languages = json.load(f)
    what = f"{languages['family']}: {languages['source']['code']} -> {languages['target']['code']}"
    said_imported(a.hf_dir, path, flags, what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
