"""A ``vaswani_transformer`` checkpoint as a Hugging Face Transformers model directory (MarianMT).

    vaswani-export-hf --model_path checkpoints/average.pt --data_dir data-bin/wmt14_en_de \\
        --spm data/spm.model --output_dir hf_model [--scores "newstest2014=results/scores.test.json"]

writes a directory that ``MarianMTModel.from_pretrained`` and ``MarianTokenizer.from_pretrained``
(or the ``Auto`` classes) load with no missing or unexpected weights:

- ``config.json`` and ``model.safetensors``: the weights in float32, permuted as below;
- ``generation_config.json``: beam search as fairseq-generate runs it, by default with the paper's
  settings (Section 6.1: beam 4, length penalty alpha 0.6; ``--beam`` and ``--lenpen`` change them;
  the score normalised by length^alpha as fairseq does), the
  decoder started from ``</s>`` (fairseq's), ``<pad>`` never generated and no empty output (fairseq's
  ``--min-len 1``). fairseq bounds each batch's output by its input: at most the batch's longest input
  + 50 tokens (``--max-len-a 1 --max-len-b 50``), then ``</s>``. A generation config cannot follow the
  input, so ``generate()`` takes it per call: ``max_new_tokens=batch["input_ids"].shape[1] + 51`` (the
  README and the model card show it). The config's own bound, for a call without it, is that of the
  longest source in the data the model was trained and tested on (the binarized splits in
  ``--data_dir``): ``max_new_tokens`` = its length + 51, never more than the model's positions. Without
  a bound, one hypothesis that never ends (a model that loops) makes its whole batch run to the model's
  1,024 positions;
- the tokenizer: ``source.spm`` and ``target.spm`` (the sentencepiece models), ``vocab.json`` (and
  ``target_vocab.json`` for separate vocabularies) giving every piece fairseq's dictionary id, so that
  ``<s>``, ``<pad>``, ``</s>``, ``<unk>`` and every piece have the ids the model was trained with; a
  source sentence gets ``</s>`` appended, as in fairseq;
- ``README.md``: a model card with the architecture, the training run as the checkpoint records it,
  the data, and the scores given with ``--scores`` (files written by ``vaswani-evaluate --json``).

How the weights map (the one permutation, and what Marian cannot hold): ``marian.py``. The model card:
``model_card.py``.
"""

import argparse
import glob
import json
import os
import shutil
import sys
from typing import Dict, Optional, Sequence, Tuple

from ..console import console_script, kebab_case_options
from ..paper import DECODING
from .checkpoint import UnsupportedModelError, load_for_export
from .marian import (
    ExportError,
    check_equivalent,
    check_supported,
    marian_config,
    marian_state_dict,
    paper_to_marian,
    tied_weights,
    vocabulary,
)
from .model_card import model_card, read_scores

SOURCE_SPM, TARGET_SPM = "source.spm", "target.spm"


def generation_config(config, beam: int, lenpen: float, max_new_tokens: int):
    """Beam search as fairseq-generate's (see the module doc)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        num_beams=beam,
        length_penalty=lenpen,  # score / length^alpha, length counting the generated tokens and </s>: fairseq's
        early_stopping=True,  # a sentence is done when `beam` hypotheses have ended, as in fairseq
        min_new_tokens=1,  # fairseq's --min-len 1: </s> cannot come first
        max_new_tokens=max_new_tokens,  # fairseq's bound for the longest source of the data (see default_bound)
        bad_words_ids=[[config.pad_token_id]],  # fairseq never generates <pad>
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=config.eos_token_id,
        forced_eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )


def longest_source(data_dir: str, source_lang: str, target_lang: str) -> Optional[int]:
    """The longest source sentence, in tokens with its </s>, of the splits binarized in data_dir (None if
    there are none): fairseq's index files hold every sentence's length."""
    from fairseq.data import data_utils

    longest = None
    for pair in (f"{source_lang}-{target_lang}", f"{target_lang}-{source_lang}"):
        for index in glob.glob(os.path.join(data_dir, f"*.{pair}.{source_lang}.idx")):
            dataset = data_utils.load_indexed_dataset(index[: -len(".idx")], None)  # its sizes are a view of its mmap
            if len(dataset.sizes):
                longest = max(longest or 0, int(dataset.sizes.max()))
            del dataset
    return longest


def default_bound(data_dir: str, source_lang: str, target_lang: str, max_len_b: int, positions: int) -> int:
    """generate()'s max_new_tokens when a call gives none: fairseq-generate's bound (input + max_len_b,
    then </s>) for the longest source in data_dir, within the model's positions."""
    longest = longest_source(data_dir, source_lang, target_lang)
    if longest is None:
        raise ExportError(
            f"{data_dir} holds no binarized {source_lang}-{target_lang} split to take the longest source "
            "from, for generate()'s default bound: give --max_new_tokens"
        )
    return min(longest + max_len_b + 1, positions)


def check_target_token(target_token: Optional[str], source_vocab: Dict, data_dir: str) -> None:
    """A --target-token is a symbol of the source dictionary (a multilingual parent's >>xx<< token)."""
    if target_token and target_token not in source_vocab:
        raise ExportError(
            f"--target-token {target_token}: not a symbol of {data_dir}'s source dictionary (a multilingual parent's "
            ">>xx<< token, which the model was trained with before every source sentence)"
        )


def marian_of(model, cfg, src_dict, tgt_dict):
    """(the MarianMTModel of the plugin's ``model``, its weights renamed by paper_to_marian; the probe's largest
    log-probability difference between the two, checked)."""
    import torch
    from transformers import MarianMTModel

    perm = paper_to_marian(cfg.model.d_model)
    marian = MarianMTModel(marian_config(cfg.model, src_dict, tgt_dict)).eval()
    with torch.no_grad():
        missing, unexpected = marian.load_state_dict(marian_state_dict(model, perm), strict=False)
    missing = [k for k in missing if not k.endswith("embed_positions.weight") and k not in tied_weights(marian)]
    if missing or unexpected:
        raise ExportError(f"weights not mapped: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return marian, check_equivalent(model, marian, src_dict, tgt_dict, perm)


def write_tokenizer(directory: str, spms: Tuple[str, str], vocabularies: Tuple[Dict, Dict], task_cfg, config) -> None:
    """MarianTokenizer's files in ``directory``: the (source, target) sentencepiece models, vocab.json (and
    target_vocab.json where the vocabularies differ), and its config for the task's pair."""
    from transformers import MarianTokenizer

    (spm, target_spm), (source_vocab, target_vocab) = spms, vocabularies
    shutil.copyfile(spm, os.path.join(directory, SOURCE_SPM))
    shutil.copyfile(target_spm, os.path.join(directory, TARGET_SPM))
    separate = source_vocab != target_vocab
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(source_vocab, f, ensure_ascii=False, indent=1)
    if separate:
        with open(os.path.join(directory, "target_vocab.json"), "w", encoding="utf-8") as f:
            json.dump(target_vocab, f, ensure_ascii=False, indent=1)
    tokenizer = MarianTokenizer(
        os.path.join(directory, SOURCE_SPM),
        os.path.join(directory, TARGET_SPM),
        os.path.join(directory, "vocab.json"),
        target_vocab_file=os.path.join(directory, "target_vocab.json") if separate else None,
        separate_vocabs=separate,
        source_lang=task_cfg.source_lang,
        target_lang=task_cfg.target_lang,
        model_max_length=config.max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.save_pretrained(directory)


def export(
    model_path: str,
    data_dir: str,
    spm: str,
    output_dir: str,
    target_spm: Optional[str] = None,
    source_lang: Optional[str] = None,
    target_lang: Optional[str] = None,
    scores: Sequence[str] = (),
    dataset: Optional[str] = None,
    force: bool = False,
    command: str = "",
    beam: int = DECODING.beam,
    lenpen: float = DECODING.lenpen,
    max_len_b: int = DECODING.max_len_b,
    max_new_tokens: Optional[int] = None,
    target_token: Optional[str] = None,
) -> float:
    """Write the model directory (see the module doc); returns the probe's largest log-probability
    difference. Everything is checked before ``output_dir`` appears; it appears complete or not at all."""
    target_spm = target_spm or spm
    for path in {spm, target_spm}:
        if not os.path.isfile(path):
            raise ExportError(f"no sentencepiece model at {path}")
    if os.path.exists(output_dir) and os.listdir(output_dir) and not force:
        raise ExportError(f"{output_dir} exists and is not empty (--force replaces it)")
    score_list = read_scores(scores)
    model, cfg, task, state = load_for_export(
        model_path,
        data_dir,
        source_lang,
        target_lang,
        check_supported,
        "for fairseq's own transformer, see Transformers' FSMT converter",
    )
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    source_vocab, target_vocab = vocabulary(src_dict, spm), vocabulary(tgt_dict, target_spm)
    check_target_token(target_token, source_vocab, data_dir)
    marian, difference = marian_of(model, cfg, src_dict, tgt_dict)
    config = marian.config
    if max_new_tokens is None:
        max_new_tokens = default_bound(
            data_dir, task.cfg.source_lang, task.cfg.target_lang, max_len_b, config.max_position_embeddings
        )
    marian.generation_config = generation_config(config, beam, lenpen, max_new_tokens)

    partial = output_dir.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        marian.save_pretrained(partial)
        write_tokenizer(partial, (spm, target_spm), (source_vocab, target_vocab), task.cfg, config)
        parameters = sum(p.numel() for p in model.parameters())
        card = model_card(
            cfg,
            task,
            state,
            parameters,
            score_list,
            command or "vaswani-export-hf",
            dataset,
            output_dir,
            difference,
            beam,
            lenpen,
            max_len_b,
            max_new_tokens,
            target_token,
        )
        with open(os.path.join(partial, "README.md"), "w", encoding="utf-8") as f:
            f.write(card)
        if os.path.exists(output_dir):
            shutil.rmtree(output_dir)
        os.replace(partial, output_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return difference


@console_script
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", required=True, help="the vaswani_transformer checkpoint (.pt)")
    parser.add_argument("--data-dir", required=True, help="the fairseq data directory with its dict.*.txt")
    parser.add_argument("--spm", required=True, help="the sentencepiece model the source (and target) was encoded with")
    parser.add_argument("--target-spm", help="the target side's sentencepiece model, if not --spm")
    parser.add_argument("--output-dir", required=True, help="the model directory to write")
    parser.add_argument("--source-lang", help="source language, if the checkpoint does not name it")
    parser.add_argument("--target-lang", help="target language, if the checkpoint does not name it")
    parser.add_argument(
        "--scores",
        action="append",
        default=[],
        metavar="LABEL=FILE",
        help="scores for the model card: a vaswani-evaluate --json file (repeatable)",
    )
    parser.add_argument("--dataset", help="the training data, in words, for the model card")
    parser.add_argument("--beam", type=int, default=DECODING.beam, help="generate()'s beam (default: Section 6.1's)")
    parser.add_argument(
        "--lenpen",
        type=float,
        default=DECODING.lenpen,
        help="generate()'s length penalty alpha (default: Section 6.1's; parsing, Section 6.3: 0.3)",
    )
    parser.add_argument(
        "--max_len_b",
        type=int,
        default=DECODING.max_len_b,
        help="fairseq's --max-len-b: outputs at most the input + this many tokens (default: Section 6.1's"
        " 50; parsing, Section 6.3: 300)",
    )
    parser.add_argument(
        "--max_new_tokens",
        type=int,
        help="generate()'s bound when a call gives none (default: --max_len_b + 1 past the longest source"
        " binarized in --data_dir)",
    )
    parser.add_argument(
        "--target_token",
        help="a multilingual parent's >>xx<< token the model was fine-tuned with before every source sentence: the "
        "model card says to put it there",
    )
    parser.add_argument(
        "--m2m100_tokenizer",
        help="an NLLB-200 or M2M100 parent's tokenizer (vaswani-import-m2m100's OUT_DIR/tokenizer): the model is "
        "exported as M2M100ForConditionalGeneration with it, not as MarianMT",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --output_dir")
    args = kebab_case_options(parser).parse_args(argv)
    from transformer_plugin.patches.checkpoint_allowlist import CorruptCheckpointError, UnsafeCheckpointError

    command = "vaswani-export-hf " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        if args.m2m100_tokenizer:
            from .export_m2m100 import main_of

            return main_of(args)
        difference = export(
            args.model_path,
            args.data_dir,
            args.spm,
            args.output_dir,
            args.target_spm,
            args.source_lang,
            args.target_lang,
            args.scores,
            args.dataset,
            args.force,
            command,
            args.beam,
            args.lenpen,
            args.max_len_b,
            args.max_new_tokens,
            args.target_token,
        )
    except (UnsupportedModelError, ExportError, CorruptCheckpointError, UnsafeCheckpointError, FileNotFoundError) as e:
        print(f"export_transformers: error: {e}", file=sys.stderr)
        return 1
    print(f"MarianMT model: {args.output_dir} (log-probabilities within {difference:.1e} of the checkpoint's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
