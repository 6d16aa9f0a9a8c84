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

Why Marian, and the one permutation
-----------------------------------
``MarianMTModel`` computes the paper's model: post-norm layers ``LayerNorm(x + Sublayer(x))``,
embeddings scaled by sqrt(d_model), biased projections, ReLU (``activation_function: relu``), no
layer norm on the embeddings, and fixed sinusoids with the paper's frequencies
``10000^(-2i/d_model)`` from position 0. It lays them out differently: the paper interleaves them,
``PE[2i] = sin``, ``PE[2i+1] = cos``; Marian puts all sines first, ``PE'[i] = sin``,
``PE'[d_model/2 + i] = cos``. So ``PE' = PE[perm]`` with ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``.

The exported model is the plugin's model with the d_model coordinates of its residual stream
renamed by ``perm``: every vector x on the stream becomes ``x[perm]``. That gives the same function,
because each part of a layer either commutes with the renaming or has its weights renamed with it:

- a linear map that reads the stream (W^Q, W^K, W^V, W_1, the output projection) computes
  ``W x = W[:, perm] x[perm]``: its columns are permuted;
- a linear map that writes to the stream (W^O, W_2) must give ``(W h + b)[perm] = W[perm, :] h + b[perm]``:
  its rows and bias are permuted;
- the residual sums are elementwise, so they commute; dropout is the identity at inference;
- LayerNorm's mean and variance are sums over all coordinates, unchanged by their order; its gain
  and bias are elementwise and are permuted;
- the embeddings write to the stream: the columns of each embedding matrix are permuted (a tied
  output projection stays tied: it reads the stream through the same permuted columns);
- the positional encodings added to them are already in Marian's order, which is the paper's
  permuted: ``PE' = PE[perm]``.

Nothing is approximated: the encoder and decoder outputs are the plugin's permuted, and the logits,
which read the stream through the permuted output projection, are the plugin's. The exporter checks
this on a probe batch before it writes anything (log-probabilities within 1e-4, and Marian's own
sinusoid table against the permuted paper table).

What Marian cannot hold is refused before anything is written, naming the flag:
``--normalize-before`` (Marian is post-norm), ``--positional-encoding learned`` (Marian's positions
are fixed sinusoids), ``--sinusoid-variant fairseq`` (other frequencies, and positions from
padding_idx + 1), ``--d-k``/``--d-v`` other than d_model/h (Marian splits d_model evenly).
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from ..paper import DECODING
from .checkpoint import UnsupportedModelError, check_even_heads, load_for_export

SOURCE_SPM, TARGET_SPM = "source.spm", "target.spm"


class ExportError(ValueError):
    """The inputs do not fit together (dictionary and sentencepiece model, output directory, ...)."""


def check_supported(cfg) -> None:
    """Refuse, naming the flag, a model that MarianMT cannot compute."""
    if getattr(cfg, "normalize_before", False):
        raise UnsupportedModelError(
            "--normalize-before: MarianMT's layers are post-norm, LayerNorm(x + Sublayer(x)), as in the paper"
        )
    if getattr(cfg, "positional_encoding", "sinusoidal") != "sinusoidal":
        raise UnsupportedModelError(
            f"--positional-encoding {cfg.positional_encoding}: MarianMT's positions are fixed sinusoids"
        )
    if getattr(cfg, "sinusoid_variant", "paper") != "paper":
        raise UnsupportedModelError(
            f"--sinusoid-variant {cfg.sinusoid_variant}: MarianMT's sinusoids have the paper's frequencies and start"
            " at position 0; fairseq's have other frequencies and start at padding_idx + 1"
        )
    check_even_heads(cfg, "MarianMT")


def paper_to_marian(d_model: int):
    """``perm``: Marian's coordinate k holds the paper's coordinate ``perm[k]`` (sines, then cosines)."""
    import torch

    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_state_dict(model, perm) -> Dict[str, "object"]:
    """The plugin model's weights under MarianMTModel's names, the residual stream renamed by ``perm``."""
    import torch

    state: Dict[str, torch.Tensor] = {}

    def reads(name, linear):  # columns: the input comes from the stream
        state[f"{name}.weight"] = linear.weight.detach()[:, perm]
        state[f"{name}.bias"] = linear.bias.detach()

    def writes(name, linear):  # rows and bias: the output goes to the stream
        state[f"{name}.weight"] = linear.weight.detach()[perm, :]
        state[f"{name}.bias"] = linear.bias.detach()[perm]

    def norm(name, layer_norm):
        state[f"{name}.weight"] = layer_norm.weight.detach()[perm]
        state[f"{name}.bias"] = layer_norm.bias.detach()[perm]

    def projections(name, weight, bias, parts: Sequence[str], sizes: Sequence[int]):
        for part, w, b in zip(parts, weight.detach().split(sizes), bias.detach().split(sizes)):
            state[f"{name}.{part}.weight"] = w[:, perm]
            state[f"{name}.{part}.bias"] = b

    def ffn(prefix, layer):
        reads(f"{prefix}.fc1", layer.ffn.w_1)
        writes(f"{prefix}.fc2", layer.ffn.w_2)
        norm(f"{prefix}.final_layer_norm", layer.ffn_sublayer.layer_norm)

    def self_attention(prefix, layer):
        attn = layer.self_attn
        projections(f"{prefix}.self_attn", attn.in_proj.weight, attn.in_proj.bias, ("q_proj", "k_proj", "v_proj"),
                    [attn.h * attn.d_k, attn.h * attn.d_k, attn.h * attn.d_v])  # fmt: skip
        writes(f"{prefix}.self_attn.out_proj", attn.out_proj)
        norm(f"{prefix}.self_attn_layer_norm", layer.self_attn_sublayer.layer_norm)

    encoder, decoder = model.encoder, model.decoder
    for i, layer in enumerate(encoder.layers):
        self_attention(f"model.encoder.layers.{i}", layer)
        ffn(f"model.encoder.layers.{i}", layer)
    for i, layer in enumerate(decoder.layers):
        prefix = f"model.decoder.layers.{i}"
        self_attention(prefix, layer)
        attn = layer.encoder_attn
        reads(f"{prefix}.encoder_attn.q_proj", attn.q_proj)
        projections(f"{prefix}.encoder_attn", attn.kv_proj.weight, attn.kv_proj.bias, ("k_proj", "v_proj"),
                    [attn.h * attn.d_k, attn.h * attn.d_v])  # fmt: skip
        writes(f"{prefix}.encoder_attn.out_proj", attn.out_proj)
        norm(f"{prefix}.encoder_attn_layer_norm", layer.encoder_attn_sublayer.layer_norm)
        ffn(prefix, layer)

    source_embed = encoder.embed.embed_tokens.weight.detach()[:, perm]
    target_embed = decoder.embed.embed_tokens.weight.detach()[:, perm]
    if encoder.embed.embed_tokens is decoder.embed.embed_tokens:  # --share-all-embeddings
        state["model.shared.weight"] = source_embed
    else:
        state["model.encoder.embed_tokens.weight"] = source_embed
        state["model.decoder.embed_tokens.weight"] = target_embed
    output = decoder.output_projection.weight
    if output is not decoder.embed.embed_tokens.weight:  # not tied: Marian's lm_head is a matrix of its own
        state["lm_head.weight"] = output.detach()[:, perm]
    state["final_logits_bias"] = torch.zeros(1, output.size(0))  # the paper's projection has no bias
    return state


def marian_config(cfg, source_dictionary, target_dictionary):
    """MarianConfig for the plugin model's configuration ``cfg`` and its dictionaries."""
    from transformers import MarianConfig

    for name in ("pad", "eos", "unk"):
        if getattr(source_dictionary, name)() != getattr(target_dictionary, name)():
            raise ExportError(f"the source and target dictionaries give <{name}> different ids")
    shared = bool(cfg.share_all_embeddings)
    return MarianConfig(
        vocab_size=len(source_dictionary),
        decoder_vocab_size=len(target_dictionary),
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=shared or bool(cfg.share_decoder_input_output_embed),
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        encoder_attention_heads=cfg.attention_heads,
        decoder_attention_heads=cfg.attention_heads,
        activation_function="relu",
        scale_embedding=True,
        max_position_embeddings=max(cfg.max_source_positions, cfg.max_target_positions),
        dropout=cfg.dropout,  # for fine-tuning; generation runs in eval mode
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        pad_token_id=target_dictionary.pad(),
        eos_token_id=target_dictionary.eos(),
        forced_eos_token_id=target_dictionary.eos(),
        decoder_start_token_id=target_dictionary.eos(),  # fairseq starts every target with </s>
        bos_token_id=None,
    )


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
        raise ExportError(f"{data_dir} holds no binarized {source_lang}-{target_lang} split to take the longest source "
                          "from, for generate()'s default bound: give --max_new_tokens")  # fmt: skip
    return min(longest + max_len_b + 1, positions)


def vocabulary(dictionary, spm_path: str) -> Dict[str, int]:
    """{piece: fairseq id} for the tokenizer's vocab.json. Every symbol of the dictionary but fairseq's
    own (<s>, <pad>, </s>, <unk>, madeupword*) must be a piece of the sentencepiece model."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
    specials = set(dictionary.symbols[: dictionary.nspecial])
    foreign = [s for s in dictionary.symbols if s not in pieces and s not in specials and not s.startswith("madeupword")]
    if foreign:
        raise ExportError(
            f"{len(foreign)} symbols of the dictionary are not pieces of {spm_path} (e.g. {foreign[:5]}):"
            " give the sentencepiece model the data was encoded with"
        )
    return {symbol: i for i, symbol in enumerate(dictionary.symbols)}


def check_equivalent(model, marian, source_dictionary, target_dictionary, perm, tolerance: float = 1e-4) -> float:
    """The largest difference between the two models' log-probabilities on a probe batch; raises if it
    exceeds ``tolerance`` or if Marian's sinusoids are not the paper's permuted."""
    import torch

    from transformer_plugin.modules.positional_encoding import sinusoid_table

    table = marian.model.encoder.embed_positions.weight
    expected = sinusoid_table(table.size(0), table.size(1), "paper")[:, perm]
    if not torch.allclose(table.float(), expected, atol=1e-6, rtol=0):
        raise ExportError("MarianMT's sinusoid table is not the paper's in sine-then-cosine order")
    generator = torch.Generator().manual_seed(0)

    def tokens(dictionary, n):
        return torch.randint(dictionary.nspecial, len(dictionary), (3, n), generator=generator)

    source = torch.cat([tokens(source_dictionary, 9), torch.full((3, 1), source_dictionary.eos())], dim=1)
    target = torch.cat([torch.full((3, 1), target_dictionary.eos()), tokens(target_dictionary, 7)], dim=1)
    with torch.no_grad():
        ours = model.get_normalized_probs(model(source, torch.full((3,), source.size(1)), target), log_probs=True)
        theirs = marian(input_ids=source, attention_mask=torch.ones_like(source), decoder_input_ids=target).logits
        theirs = torch.log_softmax(theirs.float(), dim=-1)
    difference = float((ours.float() - theirs).abs().max())
    if not difference <= tolerance:
        raise ExportError(f"the exported model's log-probabilities differ from the checkpoint's by {difference:.2e}")
    return difference


def model_card(cfg, task, state, parameters: int, scores: List[Tuple[str, Dict]], command: str, dataset: Optional[str],
               directory: str, difference: float, beam: int, lenpen: float, max_len_b: int, max_new_tokens: int) -> str:  # fmt: skip
    """README.md: what the model is, how it was trained, and what it scored."""
    from transformer_plugin import __version__

    m, src, tgt = cfg.model, task.cfg.source_lang, task.cfg.target_lang
    history = (state.get("optimizer_history") or [{}])[-1]
    opt = cfg.optimization
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: translation",
        *([f"language:\n- {src}\n- {tgt}"] if src and tgt and len(src) == len(tgt) == 2 else []),  # ISO 639-1
        "tags:\n- marian\n- fairseq\n- attention-is-all-you-need",
        "---",
        "",
        f"# {m._name} {src}-{tgt}",
        "",
        '"Attention Is All You Need" (Vaswani et al., 2017), trained with fairseq and the transformer_plugin'
        f" {__version__} `--user-dir` plugin, exported to MarianMT by `vaswani-export-hf`.",
        "",
        "## Architecture",
        "",
        "| N | d_model | d_ff | h | d_k = d_v | P_drop | parameters | vocabulary | embeddings |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {m.encoder_layers} / {m.decoder_layers} | {m.d_model} | {m.d_ff} | {m.attention_heads} |"
        f" {m.d_k or m.d_model // m.attention_heads} |"
        f" {m.dropout} | {parameters / 1e6:.1f}M | {len(task.source_dictionary)}"
        f"{'' if m.share_all_embeddings else ' / ' + str(len(task.target_dictionary))} |"
        f" {'shared: source, target, output (Section 3.4)' if m.share_all_embeddings else 'target and output shared' if m.share_decoder_input_output_embed else 'separate'} |",
        "",
        "Post-norm layers, sinusoidal positions (Section 3.5), ReLU, embeddings scaled by sqrt(d_model). MarianMT holds"
        " the paper's sinusoids in sine-then-cosine order; the weights are permuted to match, which gives the same"
        " function (the exporter's module docstring says why). Checked at export: the log-probabilities of this"
        f" model and of the fairseq checkpoint agreed within {difference:.1e} on a probe batch.",
        "",
        "## Training",
        "",
        f"- updates: {history.get('num_updates', 'not recorded')}; criterion `{cfg.criterion._name}`"
        f"{f' (label smoothing {cfg.criterion.label_smoothing})' if hasattr(cfg.criterion, 'label_smoothing') else ''};"
        f" learning-rate schedule `{cfg.lr_scheduler._name}`"
        f"{f' (warmup {cfg.lr_scheduler.warmup_updates})' if hasattr(cfg.lr_scheduler, 'warmup_updates') else ''};"
        f" optimizer `{cfg.optimizer._name}`",
        f"- batch: --max-tokens {cfg.dataset.max_tokens} x {cfg.distributed_training.distributed_world_size} processes"
        f" x --update-freq {opt.update_freq[0] if opt.update_freq else 1}",
        f"- data: {dataset or 'not described (vaswani-export-hf --dataset)'}; binarized in `{cfg.task.data}`",
        "",
        "## Evaluation",
        "",
    ]
    if scores:
        lines += ["| test set | sacreBLEU | chrF | tokenized BLEU | sentences |", "|---|---|---|---|---|"]
        for label, s in scores:
            tok = s.get("tokenized_bleu_compound_split", s.get("tokenized_bleu", ""))
            lines.append(f"| {label} | {s.get('sacrebleu', '')} | {s.get('chrf', '')} | {tok} | {s.get('sentences', '')} |")
        signatures = {s.get("sacrebleu_signature") for _, s in scores} | {s.get("chrf_signature") for _, s in scores}
        lines += ["", "Scored with fairseq-generate's output by `vaswani-evaluate`; signatures:", ""]
        lines += [f"- `{sig}`" for sig in sorted(x for x in signatures if x)]
    else:
        lines.append("No scores were given to the exporter (`--scores LABEL=FILE`, from `vaswani-evaluate --json`).")
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "from transformers import MarianMTModel, MarianTokenizer",
        f"tokenizer = MarianTokenizer.from_pretrained({directory!r})",
        f"model = MarianMTModel.from_pretrained({directory!r})",
        'batch = tokenizer(["A sentence to translate."], return_tensors="pt", padding=True)',
        f'output = model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + {max_len_b + 1})',
        "print(tokenizer.batch_decode(output, skip_special_tokens=True))",
        "```",
        "",
        f"`generate()` runs beam search (beam {beam}, length penalty {lenpen}) as fairseq-generate does, and"
        f" `max_new_tokens` bounds the output as fairseq does: the batch's longest input + {max_len_b} tokens,"
        " then `</s>`. A generation config cannot follow the input; without the argument the output stops after"
        f" {max_new_tokens} new tokens (that bound for the longest source in the data the model was exported"
        " with), and a hypothesis that never ends makes its whole batch run that long. `skip_special_tokens=True`"
        " drops `<unk>` where fairseq prints it.",
        "",
        f"Exported on {datetime.date.today().isoformat()} with `{command}`.",
        "",
    ]
    return "\n".join(lines)


def read_scores(specs: Sequence[str]) -> List[Tuple[str, Dict]]:
    found = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise ExportError(f"--scores {spec!r}: give LABEL=FILE")
        try:
            with open(path, encoding="utf-8") as f:
                scores = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ExportError(f"--scores {path}: {e}") from e
        if not isinstance(scores, dict) or "sacrebleu" not in scores:
            raise ExportError(f"--scores {path}: not a vaswani-evaluate --json file (no 'sacrebleu')")
        found.append((label, scores))
    return found


def export(model_path: str, data_dir: str, spm: str, output_dir: str, target_spm: Optional[str] = None,
           source_lang: Optional[str] = None, target_lang: Optional[str] = None, scores: Sequence[str] = (),
           dataset: Optional[str] = None, force: bool = False, command: str = "", beam: int = DECODING.beam,
           lenpen: float = DECODING.lenpen, max_len_b: int = DECODING.max_len_b,
           max_new_tokens: Optional[int] = None) -> float:  # fmt: skip
    """Write the model directory (see the module doc); returns the probe's largest log-probability
    difference. Everything is checked before ``output_dir`` appears; it appears complete or not at all."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    target_spm = target_spm or spm
    for path in {spm, target_spm}:
        if not os.path.isfile(path):
            raise ExportError(f"no sentencepiece model at {path}")
    if os.path.exists(output_dir) and os.listdir(output_dir) and not force:
        raise ExportError(f"{output_dir} exists and is not empty (--force replaces it)")
    score_list = read_scores(scores)
    model, cfg, task, state = load_for_export(model_path, data_dir, source_lang, target_lang, check_supported,
                                              "for fairseq's own transformer, see Transformers' FSMT converter")
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    source_vocab, target_vocab = vocabulary(src_dict, spm), vocabulary(tgt_dict, target_spm)
    perm = paper_to_marian(cfg.model.d_model)

    config = marian_config(cfg.model, src_dict, tgt_dict)
    if max_new_tokens is None:
        max_new_tokens = default_bound(data_dir, task.cfg.source_lang, task.cfg.target_lang, max_len_b,
                                       config.max_position_embeddings)  # fmt: skip
    marian = MarianMTModel(config).eval()
    with torch.no_grad():
        missing, unexpected = marian.load_state_dict(marian_state_dict(model, perm), strict=False)
    missing = [k for k in missing if not k.endswith("embed_positions.weight") and k not in _tied(marian)]
    if missing or unexpected:
        raise ExportError(f"weights not mapped: missing {missing[:5]}, unexpected {unexpected[:5]}")
    difference = check_equivalent(model, marian, src_dict, tgt_dict, perm)
    marian.generation_config = generation_config(config, beam, lenpen, max_new_tokens)

    partial = output_dir.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        marian.save_pretrained(partial)
        shutil.copyfile(spm, os.path.join(partial, SOURCE_SPM))
        shutil.copyfile(target_spm, os.path.join(partial, TARGET_SPM))
        separate = source_vocab != target_vocab
        with open(os.path.join(partial, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(source_vocab, f, ensure_ascii=False, indent=1)
        if separate:
            with open(os.path.join(partial, "target_vocab.json"), "w", encoding="utf-8") as f:
                json.dump(target_vocab, f, ensure_ascii=False, indent=1)
        tokenizer = MarianTokenizer(
            os.path.join(partial, SOURCE_SPM), os.path.join(partial, TARGET_SPM), os.path.join(partial, "vocab.json"),
            target_vocab_file=os.path.join(partial, "target_vocab.json") if separate else None,
            separate_vocabs=separate, source_lang=task.cfg.source_lang, target_lang=task.cfg.target_lang,
            model_max_length=config.max_position_embeddings, clean_up_tokenization_spaces=False,
        )  # fmt: skip
        tokenizer.save_pretrained(partial)
        parameters = sum(p.numel() for p in model.parameters())
        card = model_card(cfg, task, state, parameters, score_list, command or "vaswani-export-hf", dataset,
                          output_dir, difference, beam, lenpen, max_len_b, max_new_tokens)  # fmt: skip
        with open(os.path.join(partial, "README.md"), "w", encoding="utf-8") as f:
            f.write(card)
        if os.path.exists(output_dir):
            shutil.rmtree(output_dir)
        os.replace(partial, output_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return difference


def _tied(marian) -> set:
    """The weights Marian ties to others (they need no entry of their own)."""
    tied = getattr(marian, "_tied_weights_keys", None) or {}
    tied = set(tied) if marian.config.tie_word_embeddings else set()
    base = getattr(marian.model, "_tied_weights_keys", None) or {}
    return tied | {f"model.{k}" for k in base}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_path", required=True, help="the vaswani_transformer checkpoint (.pt)")
    parser.add_argument("--data_dir", required=True, help="the fairseq data directory with its dict.*.txt")
    parser.add_argument("--spm", required=True, help="the sentencepiece model the source (and target) was encoded with")
    parser.add_argument("--target_spm", help="the target side's sentencepiece model, if not --spm")
    parser.add_argument("--output_dir", required=True, help="the model directory to write")
    parser.add_argument("--source_lang", help="source language, if the checkpoint does not name it")
    parser.add_argument("--target_lang", help="target language, if the checkpoint does not name it")
    parser.add_argument("--scores", action="append", default=[], metavar="LABEL=FILE",
                        help="scores for the model card: a vaswani-evaluate --json file (repeatable)")
    parser.add_argument("--dataset", help="the training data, in words, for the model card")
    parser.add_argument("--beam", type=int, default=DECODING.beam, help="generate()'s beam (default: Section 6.1's)")
    parser.add_argument("--lenpen", type=float, default=DECODING.lenpen,
                        help="generate()'s length penalty alpha (default: Section 6.1's; parsing, Section 6.3: 0.3)")
    parser.add_argument("--max_len_b", type=int, default=DECODING.max_len_b,
                        help="fairseq's --max-len-b: outputs at most the input + this many tokens (default: Section 6.1's"
                             " 50; parsing, Section 6.3: 300)")  # fmt: skip
    parser.add_argument("--max_new_tokens", type=int,
                        help="generate()'s bound when a call gives none (default: --max_len_b + 1 past the longest source"
                             " binarized in --data_dir)")  # fmt: skip
    parser.add_argument("--force", action="store_true", help="replace a non-empty --output_dir")
    args = parser.parse_args(argv)
    from transformer_plugin.patches.checkpoint_allowlist import CorruptCheckpointError, UnsafeCheckpointError

    command = "vaswani-export-hf " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        difference = export(args.model_path, args.data_dir, args.spm, args.output_dir, args.target_spm,
                            args.source_lang, args.target_lang, args.scores, args.dataset, args.force, command,
                            args.beam, args.lenpen, args.max_len_b, args.max_new_tokens)  # fmt: skip
    except (UnsupportedModelError, ExportError, CorruptCheckpointError, UnsafeCheckpointError, FileNotFoundError) as e:
        print(f"export_transformers: error: {e}", file=sys.stderr)
        return 1
    print(f"MarianMT model: {args.output_dir} (log-probabilities within {difference:.1e} of the checkpoint's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
