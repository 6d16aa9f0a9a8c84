"""What a recipe's stages will write under WORK, worked out before any work.

Each stage's command says what it writes; this module turns that into bytes, stage by stage, the estimate of
one stage feeding the next (the data the first stage will write is what the second encodes):

- **checkpoints**, from the training's own flags: the model's parameters (counted from its architecture,
  transformer_plugin/architectures.py, the flags that change it, and the vocabulary), 12 bytes each in float32
  (the weights and Adam's two moments; 10 in fp16/bf16, whose weights take 2), times what fairseq keeps:
  ``--keep-interval-updates`` numbered checkpoints, the epoch checkpoints (none with
  ``--no-epoch-checkpoints``), the last and the best; and, while it saves, a new checkpoint before the
  oldest is removed and the copy of it to checkpoint_last.pt: two more. Averaging writes one checkpoint.
- **data**, from the size of what each stage reads: the WMT14 preparation writes the text it extracts and
  the text it keeps (each about the uncompressed size of the archives' text); sentencepiece's encoding
  about 1.6 times its input; fairseq-preprocess about half of it (2 bytes per token id). Where the corpora
  are still to be downloaded, WMT14's own sizes stand in (DOWNLOADED_TEXT).
- generation, scores, reports and exports are small, and counted as such (SMALL); a command not known here is
  counted as SMALL too, and the estimate says that it has no estimate for it.

The ratios were measured on the toy runs; WMT14's full sizes are the published figures, not yet measured
here. The estimate is a plan, not a promise: tests/integration/test_wmt14_recipes.py holds it to within 10%
of what a toy run writes.
"""

import contextlib
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from transformer_plugin_cli.files import size
from recipes.engine.verbs import call
from recipes.planner.model import Model, architectures, flag

SMALL = 64 * 1024  # a generation's output, a score, a log (newstest2014's generation: about 2 MB)
ENCODED_RATIO = 1.6  # sentencepiece pieces of a text, written out (the U+2581 before each word is 3 bytes):
# 1.75 with the toy runs' 500 pieces, less with 32k-37k, where most words are one piece
BINARIZED_RATIO = 0.6  # fairseq-preprocess's token ids (2 bytes each) and index, against its input text
CHECKPOINT_OVERHEAD = 64 * 1024  # a checkpoint's configuration, iterator and meters
# bytes of parallel text (both sides) that preparing WMT14 downloads and unpacks, where FROM is not given
DOWNLOADED_TEXT = {"en-de": 1.4e9, "en-fr": 15e9}
ARCHIVE_RATIO = 0.35  # compressed archives against the text they unpack to
CLEANED_RATIO = 0.8  # the text kept (train, valid, test; both languages) against the text unpacked
SYNTHETIC_PAIR = 130  # bytes of a sentence pair of the demo's synthetic language pair, both sides
# commands whose outputs are small (a generation, scores, a report, an export of a model already counted)
SMALL_PROGRAMS = ("fairseq-generate", "fairseq-validate", "fairseq-interactive", "fairseq-score")
SMALL_MODULES = (
    "transformer_plugin_cli.tools.evaluate",
    "transformer_plugin_cli.tools.report",
    "transformer_plugin_cli.parsing.evalb",
    "transformer_plugin_cli.serving.export_ctranslate2",
    "transformer_plugin_cli.serving.export_transformers",
    "transformer_plugin_cli.parsing.trees",
)


@dataclass
class Written:
    """What one stage writes: ``kept`` bytes that stay, ``transient`` more at its peak, and how."""

    kept: float = 0.0
    transient: float = 0.0
    how: str = ""
    kind: str = "other"  # data | checkpoints | other | unknown (no estimate: said so)


@dataclass
class Estimate:
    """The estimate of a run: per stage, and what the estimates of earlier stages say of paths."""

    stages: List[Tuple[str, Written]] = field(default_factory=list)
    sizes: Dict[str, float] = field(default_factory=dict)  # path (real, absolute) -> bytes it will hold
    vocabulary: Dict[str, int] = field(default_factory=dict)  # a sentencepiece model prefix or data-bin -> its size
    checkpoint: Dict[str, float] = field(default_factory=dict)  # a --save-dir (real) -> bytes of one checkpoint
    fallback_vocabulary: Optional[int] = None  # the recipe's VOCAB_SIZE, where the plan does not say

    @property
    def kept(self) -> float:
        """Bytes the run leaves under WORK."""
        return sum(w.kept for _, w in self.stages)

    @property
    def needed(self) -> float:
        """Bytes the run needs free at its peak: everything kept, and the largest transient."""
        return self.kept + max((w.transient for _, w in self.stages), default=0)

    def total(self, kind: str) -> float:
        return sum(w.kept for _, w in self.stages if w.kind == kind)


def size_of(path: str, plan: Optional[Estimate] = None) -> float:
    """Bytes at ``path`` (a file, or everything below a directory), as on disk now or as a stage before
    this one will write it."""
    real = os.path.realpath(path)
    if plan is not None:
        planned = [b for p, b in plan.sizes.items() if p == real or p.startswith(real + os.sep)]
        if planned:
            return sum(planned)
    if os.path.isfile(real):
        return os.path.getsize(real)
    total = 0
    for directory, _, names in os.walk(real):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(directory, name))
    return total


def unpacked_size(archive: str) -> float:
    """What a .tgz/.gz unpacks to (gzip's trailer: its size modulo 4 GiB, so at least the archive's own
    size times 3 when the trailer says less), or a plain file's size."""
    size = os.path.getsize(archive)
    if archive.endswith((".gz", ".tgz")):
        with contextlib.suppress(OSError, struct.error), open(archive, "rb") as f:
            f.seek(-4, os.SEEK_END)
            trailer = struct.unpack("<I", f.read(4))[0]
            return trailer if trailer >= 3 * size else 3 * size
    return size


# ---- the model's parameters ---------------------------------------------------------------------------


def parameters(words: Sequence[str], source_vocab: int, target_vocab: int) -> Optional[int]:
    """The parameters of the model fairseq-train's ``words`` build (vaswani_* architectures: recipes/planner/model.py),
    or None for another architecture."""
    arch = flag(words, "--arch", flag(words, "-a"))
    if arch not in architectures():
        return None
    return Model(arch, tuple(words)).parameters(source_vocab, target_vocab)


def dictionary_size(data_bin: str, lang: str) -> Optional[int]:
    """len() of fairseq's dictionary in data_bin for lang: its 4 special symbols and the file's lines."""
    path = os.path.join(data_bin, f"dict.{lang}.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return 4 + sum(1 for _ in f)


def checkpoints_written(words: Sequence[str], plan: Estimate) -> Written:
    """What a fairseq-train command keeps and needs at its peak (see the module's docstring)."""
    at = next(i for i, w in enumerate(words) if os.path.basename(w) == "fairseq-train")
    data = words[at + 1] if at + 1 < len(words) and not words[at + 1].startswith("-") else None
    data = data.split(":")[0] if data else None  # shards (data-bin/shard0:data-bin/shard1): dictionaries in the first
    source, target = flag(words, "--source-lang", flag(words, "-s")), flag(words, "--target-lang", flag(words, "-t"))
    vocab_source = vocab_target = None
    if data:
        for name in os.listdir(data) if os.path.isdir(data) else ():
            m = re.fullmatch(r"dict\.(.+)\.txt", name)
            if m and source is None:
                source = m.group(1)
            elif m and target is None and m.group(1) != source:
                target = m.group(1)
        if source and target:
            vocab_source, vocab_target = dictionary_size(data, source), dictionary_size(data, target)
        planned = plan.vocabulary.get(os.path.realpath(data)) or plan.fallback_vocabulary
        if planned:
            vocab_source, vocab_target = vocab_source or planned, vocab_target or planned
    if not (vocab_source and vocab_target):
        return Written(0, 0, "checkpoints: the vocabulary is not known before the data is made", "checkpoints")
    params = parameters(words, vocab_source, vocab_target)
    if params is None:
        return Written(0, 0, f"checkpoints: not estimated for --arch {flag(words, '--arch')}", "checkpoints")
    half = any(w in words for w in ("--fp16", "--bf16", "--memory-efficient-fp16", "--memory-efficient-bf16"))
    one = params * (10 if half else 12) + CHECKPOINT_OVERHEAD
    interval, max_update = int(flag(words, "--save-interval-updates", 0)), int(flag(words, "--max-update", 0))
    saves = max_update // interval if interval and max_update else 0
    keep = int(flag(words, "--keep-interval-updates", -1))
    numbered = min(keep, saves) if keep > 0 and saves else saves
    epochs = 0 if "--no-epoch-checkpoints" in words else max(1, int(flag(words, "--keep-last-epochs", -1)))
    last = 0 if "--no-last-checkpoints" in words else 1
    best = 0 if "--disable-validation" in words else 1
    kept = numbered + epochs + last + best
    how = (
        f"checkpoints: {kept} of {one / 1e6:,.1f} MB ({params:,} parameters x {10 if half else 12} bytes): "
        f"{numbered} by update, {epochs} by epoch, {last} last, {best} best; 2 more while one is saved"
    )
    save_dir = flag(words, "--save-dir", "checkpoints")
    there = size_of(save_dir) if os.path.isdir(save_dir) else 0  # a training that resumes has some already
    return Written(max(0.0, kept * one - there), 2 * one, how, "checkpoints")


# ---- stage by stage ------------------------------------------------------------------------------------


def python_module(words: Sequence[str]) -> Tuple[Optional[str], List[str]]:
    """(module, its arguments) of ``python -m MODULE ARGS``, else (None, words)."""
    for i, word in enumerate(words[:-1]):
        if word == "-m" and "python" in os.path.basename(words[max(0, i - 1)]):
            return words[i + 1], list(words[i + 2 :])
    return None, list(words)


def values_after(words: Sequence[str], name: str) -> List[str]:
    """The words after ``name`` up to the next option."""
    if name not in words:
        return []
    out = []
    for word in words[words.index(name) + 1 :]:
        if word.startswith("--"):
            break
        out.append(word)
    return out


def preprocess_vocabulary(words: Sequence[str], plan: Estimate) -> Optional[int]:
    """The dictionary size a fairseq-preprocess command will write, where a stage before it said: the
    sentencepiece model beside its --trainpref, or the dictionary it is given (--srcdict: a shard,
    binarized with the dictionary of all of them)."""
    trainpref, srcdict = flag(words, "--trainpref"), flag(words, "--srcdict")
    if srcdict:
        return plan.vocabulary.get(os.path.dirname(os.path.realpath(srcdict)))
    return next(
        (
            v
            for prefix, v in plan.vocabulary.items()
            if trainpref and os.path.dirname(os.path.realpath(trainpref)) == os.path.dirname(prefix)
        ),
        None,
    )


def binarized_written(words: Sequence[str], plan: Estimate) -> Written:
    """What fairseq-preprocess of ``words`` writes: its token ids and index, against the text it reads; records the
    data-bin's size and vocabulary for the stages after."""
    inputs = sum(
        size_of(f"{prefix}.{lang}", plan)
        for name in ("--trainpref", "--validpref", "--testpref")
        for prefix in [flag(words, name)]
        if prefix
        for lang in (flag(words, "--source-lang"), flag(words, "--target-lang"))
    )
    written = BINARIZED_RATIO * inputs
    dest = os.path.realpath(flag(words, "--destdir", "data-bin"))
    plan.sizes[dest] = written
    vocab = preprocess_vocabulary(words, plan)
    nwords = flag(words, "--nwordssrc")
    if vocab or nwords:
        plan.vocabulary[dest] = _padded(vocab or int(nwords) + 4)
    return Written(written, 0, f"binarized data: {BINARIZED_RATIO} x {inputs / 1e6:,.1f} MB of text", "data")


def stage_writes(argv: Sequence[str], plan: Estimate, reads: Sequence[str] = ()) -> Written:
    """What the stage of ``argv`` (as lib.sh declares it, with the files it declares reading) writes; records what
    later stages will read."""
    c = call(argv)
    if c.verb is not None and c.verb.name == "capture":
        return Written(SMALL, 0, "a small output")
    words = c.command
    if any(os.path.basename(w) == "fairseq-train" for w in words):
        return checkpoints_written(words, plan)
    if any(os.path.basename(w) == "fairseq-preprocess" for w in words) and "--dict-only" in words:
        vocab = preprocess_vocabulary(words, plan)
        if vocab:
            plan.vocabulary[os.path.realpath(flag(words, "--destdir", "data-bin"))] = vocab
        return Written(SMALL, 0, "a dictionary")
    if any(os.path.basename(w) == "fairseq-preprocess" for w in words):
        return binarized_written(words, plan)
    module, args = python_module(words)
    if module == "preprocess.wmt14" and args[:1] == ["prepare"]:
        return wmt14_written(args, plan)
    if module == "preprocess.wmt14" and args[:1] == ["toy-archives"]:
        plan.sizes[os.path.realpath(flag(args, "--out"))] = 120 * 1024
        return Written(120 * 1024, 0, "toy archives", "data")
    if module == "preprocess.parallel_text" and args[:1] == ["prepare"]:
        # the corpora's files, as the recipe declares them (the prefix form names none); else the TSVs named
        files = [p for p in reads if os.path.isfile(p)] or [
            p for p in values_after(args, "--train") if os.path.isfile(p)
        ]
        text = sum(unpacked_size(path) for path in files)
        src, tgt, out = flag(args, "--src"), flag(args, "--tgt"), os.path.realpath(flag(args, "--out"))
        plan.sizes[os.path.join(out, f"train.{src}")] = plan.sizes[os.path.join(out, f"train.{tgt}")] = (
            CLEANED_RATIO * text / 2
        )
        return Written(CLEANED_RATIO * text, text, "your text, cleaned (a copy of it while it is split)", "data")
    if module == "preprocess.shards" and args[:1] == ["split"]:
        prefix, out, shards = flag(args, "--prefix"), flag(args, "--out"), int(flag(args, "--shards", 1))
        written = 0.0
        for lang in values_after(args, "--langs"):
            text = size_of(f"{prefix}.{lang}", plan)
            for i in range(shards):
                plan.sizes[os.path.realpath(os.path.join(out, f"{os.path.basename(prefix)}.shard{i}.{lang}"))] = (
                    text / shards
                )
            written += text
        return Written(written, 0, "the training text again, in shards", "data")
    if module == "preprocess.synthetic_pair":
        pairs = sum(int(flag(args, f"--{split}", 0)) for split in ("train", "valid", "test"))
        return Written(SYNTHETIC_PAIR * pairs, 0, f"{pairs:,} synthetic sentence pairs", "data")
    if module == "preprocess.sentencepiece_vocab" and args[:1] == ["train"]:
        vocab = int(flag(args, "--vocab-size", 8000))
        plan.vocabulary[os.path.realpath(flag(args, "--model-prefix", "spm"))] = _padded(vocab + 4)
        return Written(vocab * 40 + 256 * 1024, 0, "a sentencepiece model", "data")
    if module == "preprocess.sentencepiece_vocab" and args[:1] == ["encode"]:
        written = 0.0
        for source, output in zip(values_after(args, "--inputs"), values_after(args, "--outputs")):
            plan.sizes[os.path.realpath(output)] = ENCODED_RATIO * size_of(source, plan)
            written += plan.sizes[os.path.realpath(output)]
        return Written(written, 0, f"sentencepiece pieces: {ENCODED_RATIO} x the text", "data")
    if module == "transformer_plugin_cli.tools.average_checkpoints":
        inputs = flag(args, "--inputs")
        one = _one_checkpoint(inputs, plan)
        return Written(one, 0, "an averaged checkpoint", "checkpoints")
    program = os.path.basename(words[0]) if words else ""
    if module in SMALL_MODULES or program in SMALL_PROGRAMS:
        return Written(SMALL, 0, "a small output")
    return Written(
        SMALL, 0, f"no estimate for {module or program or 'this command'}: counted as {size(SMALL)}", "unknown"
    )


def _padded(n: int) -> int:
    return -(-n // 8) * 8  # fairseq pads its dictionaries to a multiple of 8


def _one_checkpoint(save_dir: Optional[str], plan: Estimate) -> float:
    per = plan.checkpoint.get(os.path.realpath(save_dir or "checkpoints"))
    if per:
        return per
    last = os.path.join(save_dir or "checkpoints", "checkpoint_last.pt")
    return os.path.getsize(last) if os.path.exists(last) else 0


def wmt14_written(args: Sequence[str], plan: Estimate) -> Written:
    """preprocess.wmt14 prepare: the archives (downloaded, where FROM is not given), the text extracted from
    them, and the cleaned text, train/valid/test of both languages."""
    out, pair, origin = flag(args, "--out"), flag(args, "--pair", "en-de"), flag(args, "--from")
    if origin and os.path.isdir(origin):
        text = sum(
            unpacked_size(os.path.join(origin, name))
            for name in os.listdir(origin)
            if os.path.isfile(os.path.join(origin, name))
        )
        archives = 0.0
    elif origin:  # archives an earlier stage will write
        text, archives = size_of(origin, plan) / ARCHIVE_RATIO, 0.0
    else:
        text = DOWNLOADED_TEXT.get(pair, max(DOWNLOADED_TEXT.values()))
        archives = ARCHIVE_RATIO * text
    pairs = flag(args, "--max-pairs")
    cleaned = CLEANED_RATIO * (min(text, int(pairs) * 3 * 260) if pairs else text)  # ~130 bytes a sentence, 3 corpora
    src, tgt = pair.split("-")
    real = os.path.realpath(out)
    plan.sizes[os.path.join(real, f"train.{src}")] = cleaned / 2
    plan.sizes[os.path.join(real, f"train.{tgt}")] = cleaned / 2
    return Written(
        archives + text + cleaned,
        0,
        f"WMT14 {pair}: {'downloaded archives, ' if archives else ''}the text unpacked and the text kept",
        "data",
    )


def estimate(stages: Sequence[Tuple], vocabulary: Optional[int] = None) -> Estimate:
    """The plan of stages (id, argv, whether it runs[, the files it declares reading]); a stage that does not run writes
    nothing, but what it made is read from disk by the stages after it. ``vocabulary``: the recipe's VOCAB_SIZE, for a
    training whose data the plan cannot follow to its sentencepiece model."""
    plan = Estimate(fallback_vocabulary=_padded(vocabulary + 4) if vocabulary else None)
    for sid, argv, runs, *reads in stages:
        written = stage_writes(argv, plan, reads[0] if reads else ())
        if not runs:
            written = Written(0, 0, "done already", written.kind)
        plan.stages.append((sid, written))
        if written.kind == "checkpoints" and written.transient:
            plan.checkpoint[os.path.realpath(flag(argv, "--save-dir", "checkpoints"))] = written.transient / 2
    return plan


def lines(plan: Estimate, free: int, work: str) -> List[str]:
    """The estimate for people: in all, then stage by stage (those that write, and those it has no estimate for)."""
    out = [
        f"this run writes about {size(plan.kept)} under {work} (data {size(plan.total('data'))}, checkpoints "
        f"{size(plan.total('checkpoints'))}) and needs about {size(plan.needed)} free at its peak; {size(free)} is "
        "free there"
    ]
    out += [
        f"  stage {sid}: {size(w.kept)}"
        + (f" (+{size(w.transient)} at its peak)" if w.transient else "")
        + f": {w.how}"
        for sid, w in plan.stages
        if w.kept > SMALL or w.transient or w.kind in ("checkpoints", "unknown")
    ]
    return out
