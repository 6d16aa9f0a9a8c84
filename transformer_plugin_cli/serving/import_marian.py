"""``vaswani-import-marian HF_DIR OUT_DIR``: a MarianMT model (an OPUS-MT model as Hugging Face publishes it, or any
directory ``MarianMTModel.save_pretrained`` wrote) as a ``vaswani_transformer`` checkpoint that fairseq decodes,
trains on, averages and exports again.

    vaswani-import-marian opus-mt-en-de opus-mt-en-de.fairseq [--source-lang en --target-lang de]

writes, in OUT_DIR, ``checkpoint.pt``, ``dict.SRC.txt`` and ``dict.TGT.txt`` (fairseq dictionaries for
``fairseq-preprocess --srcdict/--tgtdict``), and the model's ``source.spm`` and ``target.spm``.

The mapping is marian.py's, backwards: Marian's residual stream is the paper's with its coordinates renamed by
``perm`` (sines, then cosines), so each weight is renamed back by ``perm``'s inverse, and the positions, which
MarianMT recomputes on load, are the paper's (checked). How a published model differs from the paper is set
with the model's flags: ``--activation-fn`` (swish in OPUS-MT's), ``--output-bias`` (MarianMT's
``final_logits_bias``) and ``--decoder-start pad`` (MarianMT starts decoding from <pad>, fairseq from </s>).

Vocabulary. MarianMT's ids come from vocab.json (and target_vocab.json where the vocabularies are separate):
</s>, <unk>, the pieces, <pad> (its place is the config's ``pad_token_id``). fairseq's dictionary begins with
<s>, <pad>, </s>, <unk>, then the pieces in MarianMT's order. fairseq's <s> is no token of MarianMT: its
embedding row is zero and its output bias ``NO_TOKEN_BIAS``, so that its probability is 0 in float32 and the
log-probabilities of every other token are MarianMT's; a model this project exported has a <s> of its own, which
keeps its row.

Before writing, the imported model is compared with MarianMT on a probe batch (log-probabilities within 1e-4).
Refused, naming the setting: another ``model_type``, an activation other than relu or swish, embeddings not
scaled by sqrt(d_model), encoder and decoder of different widths or heads, a vocabulary that does not match
the embeddings, a missing file.
"""

import argparse
import os
import sys
from typing import Dict, List, Optional, Tuple

from transformer_plugin_cli.console import console_script

from .bart_family import (
    ImportRefused,
    build_model,
    copy_layers,
    read_json,
    said_imported,
    shape_flags,
    write_import,
)
from .marian import paper_to_marian

NO_TOKEN_BIAS = -1e4  # fairseq's <s>: exp(-1e4) is 0 in float32, and -1e4 is a float16 number
SOURCE_SPM, TARGET_SPM = "source.spm", "target.spm"


class MarianImportError(ImportRefused):
    """HF_DIR is not a MarianMT model this model can hold exactly, or a file is missing."""


def check_config(config: dict, where: str) -> None:
    """Refuse, naming the setting, a MarianMT configuration the paper's model with its flags cannot compute."""
    if config.get("model_type") != "marian":
        raise MarianImportError(f"{where}: model_type {config.get('model_type')!r}, not 'marian'")
    if config.get("activation_function", "swish") not in ("relu", "swish"):
        raise MarianImportError(f"{where}: activation_function {config['activation_function']!r}: relu or swish only")
    if not config.get("scale_embedding", False):
        raise MarianImportError(
            f"{where}: scale_embedding false: this model scales embeddings by sqrt(d_model) (Section 3.4)"
        )
    for a, b in (("encoder_ffn_dim", "decoder_ffn_dim"), ("encoder_attention_heads", "decoder_attention_heads")):
        if config.get(a) != config.get(b):
            raise MarianImportError(f"{where}: {a} {config.get(a)} and {b} {config.get(b)}: one value for both sides")
    if config["d_model"] % config["encoder_attention_heads"] != 0:
        raise MarianImportError(
            f"{where}: d_model {config['d_model']} is not divisible by {config['encoder_attention_heads']} heads"
        )
    for name in (
        "normalize_before",
        "normalize_embedding",
        "layernorm_embedding",
        "add_final_layer_norm",
    ):  # BART's, not Marian's
        if config.get(name):
            raise MarianImportError(
                f"{where}: {name} true: MarianMT (and the paper) is post-norm with no embedding norm"
            )


def vocabulary(path: str, size: int, specials: Dict[str, int]) -> List[str]:
    """The pieces of a vocab.json in id order, 0 .. size - 1: every id once, the special tokens where the config
    says."""
    found = read_json(path)
    by_id: Dict[int, str] = {}
    for piece, i in found.items():
        if not isinstance(i, int) or not 0 <= i < size or i in by_id:
            raise MarianImportError(
                f"{path}: {piece!r} has id {i!r}: ids must be 0 .. {size - 1}, each once (the embeddings' rows)"
            )
        by_id[i] = piece
    if len(by_id) != size:
        raise MarianImportError(f"{path}: {len(by_id)} pieces for {size} embedding rows")
    for name, i in specials.items():
        if by_id[i] != name:
            raise MarianImportError(f"{path}: id {i} is {by_id[i]!r}, where the config puts {name}")
    return [by_id[i] for i in range(size)]


def fairseq_dictionary(pieces: List[str], specials: Dict[str, int]):
    """(a fairseq Dictionary of MarianMT's pieces in its order, after fairseq's four; for each fairseq id the
    MarianMT id of its row, -1 for <s>)."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()  # <s>, <pad>, </s>, <unk>
    rows = [-1, specials["<pad>"], specials["</s>"], specials["<unk>"]]
    for i, piece in enumerate(pieces):
        if i in specials.values():
            continue
        if piece == dictionary.bos_word:  # a model this project exported: fairseq's <s> has a row of its own
            rows[dictionary.bos()] = i
            continue
        if dictionary.add_symbol(piece, n=len(pieces) - i) != len(rows):  # counts in MarianMT's order, were it sorted
            raise MarianImportError(f"the piece {piece!r} (id {i}) is also one of fairseq's own symbols")
        rows.append(i)
    return dictionary, rows


def shared_and_tied(config: dict) -> Tuple[bool, bool]:
    """(one embedding matrix for both sides, the decoder's output tied to its input), as MarianConfig reads them."""
    return bool(config.get("share_encoder_decoder_embeddings", True)), bool(config.get("tie_word_embeddings", True))


def marian_flags(config: dict) -> List[str]:
    """The ``vaswani_transformer`` flags (less ``--arch``) of the model of a MarianMT config.json: fairseq-train's
    for --finetune-from-model, and the recipe's for INIT= (recipes.planner.parent)."""
    flags = shape_flags(config) + [
        "--activation-fn",
        config.get("activation_function", "swish"),
        "--output-bias",
        "--max-source-positions",
        config.get("max_position_embeddings", 512),
        "--max-target-positions",
        config.get("max_position_embeddings", 512),
    ]
    if config.get("decoder_start_token_id", config.get("pad_token_id")) == config.get("pad_token_id"):
        flags += ["--decoder-start", "pad"]
    shared, tied = shared_and_tied(config)
    flags += ["--share-all-embeddings"] if shared else (["--share-decoder-input-output-embed"] if tied else [])
    return [str(f) for f in flags]


def embedding_rows(matrix, rows: List[int], inverse):
    """fairseq's embedding rows from theirs (``rows``: for each fairseq id the row of theirs; -1, fairseq's <s> where
    they have none, a zero row), the columns renamed back by ``inverse``."""
    import torch

    out = torch.zeros(len(rows), matrix.size(1))
    known = torch.tensor([r >= 0 for r in rows])
    out[known] = matrix[torch.tensor([r for r in rows if r >= 0])]
    return out[:, inverse]


def load_weights(
    model, theirs: Dict[str, "object"], perm, src_rows: List[int], tgt_rows: List[int], shared: bool
) -> None:
    """MarianMT's weights into ``model``, renamed back by ``perm``'s inverse (marian.py, marian_state_dict)."""
    import torch

    inverse = torch.argsort(perm)

    def take(name):
        return theirs[name].detach().float()

    with torch.no_grad():
        copy_layers(model, take, inverse)
        source = take("model.shared.weight") if shared else take("model.encoder.embed_tokens.weight")
        target = take("model.shared.weight") if shared else take("model.decoder.embed_tokens.weight")
        model.encoder.embed.embed_tokens.weight.copy_(embedding_rows(source, src_rows, inverse))
        model.decoder.embed.embed_tokens.weight.copy_(embedding_rows(target, tgt_rows, inverse))
        output = model.decoder.output_projection.weight
        if output is not model.decoder.embed.embed_tokens.weight:  # not tied: MarianMT's lm_head
            output.copy_(embedding_rows(take("lm_head.weight"), tgt_rows, inverse))
        bias = take("final_logits_bias").reshape(-1)
        model.decoder.output_bias.copy_(torch.tensor([float(bias[r]) if r >= 0 else NO_TOKEN_BIAS for r in tgt_rows]))


def check_equivalent(model, marian, src_rows: List[int], tgt_rows: List[int], tolerance: float = 1e-4) -> float:
    """The largest difference between the two models' log-probabilities over MarianMT's tokens on a probe batch of
    ragged sentences (fairseq's padded on the left, MarianMT's on the right, with its attention mask)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    src_ids = {m: f for f, m in enumerate(src_rows) if m >= 0}
    tgt_ids = {m: f for f, m in enumerate(tgt_rows) if m >= 0}
    config = marian.config
    specials = {config.pad_token_id, config.eos_token_id}
    ordinary = [m for m in src_ids if m not in specials]
    lengths = [9, 6, 3]
    theirs_src = torch.full((3, 10), config.pad_token_id)
    ours_src = torch.full((3, 10), model.encoder.padding_idx)
    for b, n in enumerate(lengths):
        words = [ordinary[int(i)] for i in torch.randint(len(ordinary), (n,), generator=generator)] + [
            config.eos_token_id
        ]
        theirs_src[b, : n + 1] = torch.tensor(words)
        ours_src[b, 10 - n - 1 :] = torch.tensor([src_ids[w] for w in words])
    outputs = [m for m in tgt_ids if m not in specials]
    target = [outputs[int(i)] for i in torch.randint(len(outputs), (6,), generator=generator)]
    theirs_tgt = torch.tensor([[config.decoder_start_token_id] + target] * 3)
    ours_tgt = torch.tensor([[tgt_ids[config.eos_token_id]] + [tgt_ids[t] for t in target]] * 3)
    with torch.no_grad():
        ours = model.get_normalized_probs(
            model(ours_src, torch.tensor([n + 1 for n in lengths]), ours_tgt), log_probs=True
        )
        theirs = (
            marian(
                input_ids=theirs_src,
                attention_mask=theirs_src.ne(config.pad_token_id).long(),
                decoder_input_ids=theirs_tgt,
            )
            .logits.float()
            .log_softmax(-1)
        )
    columns = torch.tensor([tgt_ids[m] for m in range(theirs.size(-1))])
    difference = float((ours.float()[..., columns] - theirs).abs().max())
    if not difference <= tolerance:
        raise MarianImportError(f"the imported model's log-probabilities differ from MarianMT's by {difference:.2e}")
    return difference


def tokenizer_config(hf_dir: str) -> Tuple[str, dict]:
    """(the path of HF_DIR's tokenizer_config.json, what it holds: {} where there is none)."""
    path = os.path.join(hf_dir, "tokenizer_config.json")
    return path, read_json(path) if os.path.exists(path) else {}


def languages(tokenizer: Tuple[str, dict], source_lang: Optional[str], target_lang: Optional[str]) -> Tuple[str, str]:
    """The pair: given, else the tokenizer config's source_lang / target_lang."""
    path, found = tokenizer
    src, tgt = source_lang or found.get("source_lang"), target_lang or found.get("target_lang")
    if not src or not tgt:
        raise MarianImportError(f"{path}: no source_lang and target_lang: give --source-lang and --target-lang")
    return src, tgt


def import_marian(
    hf_dir: str, out_dir: str, source_lang: Optional[str] = None, target_lang: Optional[str] = None, force: bool = False
) -> Tuple[str, List[str]]:
    """Write OUT_DIR (module docstring) from the MarianMT directory ``hf_dir``: (the checkpoint's path, the
    fairseq-train flags that build this model, for --finetune-from-model)."""
    import torch

    config = read_json(os.path.join(hf_dir, "config.json"))
    check_config(config, os.path.join(hf_dir, "config.json"))
    for name in (SOURCE_SPM, TARGET_SPM):
        if not os.path.exists(os.path.join(hf_dir, name)):
            raise MarianImportError(
                f"{os.path.join(hf_dir, name)}: no such file (the sentencepiece model MarianMT's tokenizer reads)"
            )
    tokenizer = tokenizer_config(hf_dir)
    src, tgt = languages(tokenizer, source_lang, target_lang)
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise MarianImportError(f"{out_dir}: not empty (--force replaces it)")
    from transformers import MarianMTModel

    marian = MarianMTModel.from_pretrained(hf_dir).float().eval()
    cfg = marian.config
    shared, _ = shared_and_tied(config)
    specials = {"</s>": cfg.eos_token_id, "<pad>": cfg.pad_token_id}
    if cfg.decoder_start_token_id not in specials.values():
        raise MarianImportError(
            f"{hf_dir}/config.json: decoder_start_token_id {cfg.decoder_start_token_id}: <pad> or </s> only"
        )
    separate = bool(tokenizer[1].get("separate_vocabs"))
    vocabularies = [
        os.path.join(hf_dir, "vocab.json"),
        os.path.join(hf_dir, "target_vocab.json" if separate else "vocab.json"),
    ]
    dictionaries = []
    for path, size in zip(vocabularies, (cfg.vocab_size, cfg.decoder_vocab_size or cfg.vocab_size)):
        pieces = vocabulary(path, size, specials)
        if "<unk>" not in pieces:
            raise MarianImportError(f"{path}: no <unk>")
        dictionaries.append(fairseq_dictionary(pieces, {**specials, "<unk>": pieces.index("<unk>")}))
    (src_dict, src_rows), (tgt_dict, tgt_rows) = dictionaries
    if shared and src_rows != tgt_rows:
        raise MarianImportError(f"{hf_dir}: shared embeddings over two vocabularies")

    perm = paper_to_marian(cfg.d_model)
    from transformer_plugin.modules.positional_encoding import sinusoid_table

    table = marian.model.encoder.embed_positions.weight
    if not torch.allclose(
        table.float(), sinusoid_table(table.size(0), table.size(1), "paper")[:, perm], atol=1e-6, rtol=0
    ):
        raise MarianImportError(
            f"{hf_dir}: MarianMT's positions are not the paper's sinusoids in sine-then-cosine order"
        )
    model, args, model_flags = build_model(marian_flags(config), src_dict, tgt_dict)
    model.eval()
    load_weights(model, marian.state_dict(), perm, src_rows, tgt_rows, shared)
    check_equivalent(model, marian, src_rows, tgt_rows)

    args.source_lang, args.target_lang, args.data = src, tgt, out_dir
    extra = {
        # the pair the MarianMT model itself names (a multilingual one's group, "eng"-"mul"), whatever pair it was
        # imported as: INIT= takes its >>xx<< token for TGT from it (recipes.planner.parent)
        "marian_pair": [tokenizer[1].get("source_lang"), tokenizer[1].get("target_lang")],
    }
    spm = {SOURCE_SPM: os.path.join(hf_dir, SOURCE_SPM), TARGET_SPM: os.path.join(hf_dir, TARGET_SPM)}
    write_import(out_dir, hf_dir, model, args, (src, tgt), (src_dict, tgt_dict), extra, spm)
    return os.path.join(out_dir, "checkpoint.pt"), model_flags


@console_script
def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="vaswani-import-marian", description=__doc__.split("\n\n")[0])
    p.add_argument("hf_dir", help="a MarianMT directory: config.json, its weights, vocab.json, source.spm, target.spm")
    p.add_argument("out_dir", help="where checkpoint.pt, dict.SRC.txt, dict.TGT.txt and the sentencepiece models go")
    p.add_argument("--source-lang", help="SRC (default: tokenizer_config.json's source_lang)")
    p.add_argument("--target-lang", help="TGT (default: tokenizer_config.json's target_lang)")
    p.add_argument("--force", action="store_true", help="replace a non-empty OUT_DIR")
    a = p.parse_args(argv)
    try:
        path, flags = import_marian(a.hf_dir, a.out_dir, a.source_lang, a.target_lang, a.force)
    except ImportRefused as e:
        print(f"vaswani-import-marian: error: {e}", file=sys.stderr)
        return 2
    said_imported(a.hf_dir, path, flags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
