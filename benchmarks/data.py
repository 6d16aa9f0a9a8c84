"""What the WMT14 recipes' data stages cost at growing corpus sizes: wall time, lines per second per process,
and the peak memory of each stage's whole process tree; and what sentencepiece needs per million sentences.

``make bench-data`` runs the recipe itself (``recipes/wmt14_en_de_base.sh`` or ``wmt14_en_fr_base.sh`` with
``DATA_ONLY=1``: stages 1 clean and normalise, 2a sentencepiece, 2b encode, 3 fairseq-preprocess, exactly as
a user's run does them) on archives in the WMT14 layout that this module writes, for each corpus size. It
reads the stages from the recipe's banners and samples the memory of every process below the recipe (the
proportional set size, PSS, so that pages shared by fairseq-preprocess's forked workers count once) every
0.2 s. ``--spm`` trains sentencepiece alone on samples of growing size, for BPE and unigram, and records
its peak resident memory (one process: the kernel's own maximum, ``ru_maxrss``).

The text. WMT14 cannot be downloaded here, so the archives hold text drawn from real word frequencies:
``wordfreq``'s "large" lists (English 321k, German 635k, French 311k words, from Wikipedia, news, books,
subtitles, the web; ``pip install wordfreq==3.1.1``, its data in the wheel), each word drawn independently
with its frequency. Sentence lengths are log-normal with a mean of 23 words (median 19), as in WMT14's
training text; the target side's length follows the source's (x 0.95 for German, x 1.12 for French, with
a spread of 15%), so that the recipe's length-ratio filter drops a few percent. Sentences start with a
capital and end with a full stop (5%: a question mark); a share of the word types is always capitalised
past the 300 most frequent (10% English, 35% German, 8% French: names, and German nouns); 6% of words are followed by a comma and 2% are
numbers. What this text lacks: names, URLs and markup beyond the lists' words (real corpora have more
distinct words, so sentencepiece's BPE, which counts distinct words, needs somewhat more than here), and
syntax (which no data stage looks at). The corpora's shares follow WMT14's (En-De: Europarl v7 1.92M,
Common Crawl 2.40M, News Commentary v9 0.20M pairs; En-Fr adds UN 12.9M and Giga-FrEn 22.5M).

    python -m benchmarks.data --pair en-de --sizes 100000 300000 1000000 --work runs/bench-data --out runs/bench-data/table.md
    python -m benchmarks.data --spm bpe unigram --spm-sizes 250000 500000 1000000 2000000 --work runs/bench-data
    python -m benchmarks.data --sizes 100000 4000000 --spm bpe unigram --plot docs/figures/bench-data.png   # reuses both

Each size's result is kept in ``WORK/<pair>/<size>/result.json`` and reused when its settings are the same.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import print_table  # noqa: E402
from preprocess.parallel_text import count_lines  # noqa: E402
from preprocess.wmt14 import PAIRS, _sgml  # noqa: E402

# pairs of each WMT14 training corpus (before cleaning), as the corpora's own READMEs and line counts give them
SHARES = {
    "en-de": {"europarl-v7": 1_920_209, "commoncrawl": 2_399_123, "news-commentary-v9": 201_288},
    "en-fr": {"europarl-v7": 2_007_723, "commoncrawl": 3_244_152, "un": 12_886_831, "news-commentary-v9": 183_251,
              "giga-fren": 22_520_400},
}  # fmt: skip
CAPITALISED = {"en": 0.1, "de": 0.35, "fr": 0.08}  # share of word types written with a capital (names; German nouns)
LENGTH_FACTOR = {"en": 1.0, "de": 0.95, "fr": 1.12}  # target words per source word
MEAN_WORDS, SIGMA = 23.0, 0.6  # log-normal sentence lengths: mean 23 words, median 19
TEST_PAIRS = 3000  # newstest2013 has 3000 sentences, newstest2014 3003 (En-Fr) / 2737 (En-De, filtered)
SCRIPTS = {"en-de": "wmt14_en_de_base.sh", "en-fr": "wmt14_en_fr_base.sh"}
WORD = re.compile(r"^[^\W\d_][\w'’-]*$")


# ---- text drawn from real word frequencies ----------------------------------------------------------------


class Lexicon:
    """A language's words and their cumulative frequencies (wordfreq's, or any {word: frequency})."""

    def __init__(self, frequencies: Dict[str, float], capitalised: float = 0.0):
        import zlib

        import numpy as np

        words = [w for w in frequencies if WORD.match(w)]
        # wordfreq's lists are lower case, most frequent first: a share of the word types past the 300 most
        # frequent (function words) is written with a capital, always the same ones (German nouns, names),
        # chosen by a hash of the word
        cut = int(capitalised * 2**32)
        words = [w[:1].upper() + w[1:] if i >= 300 and zlib.crc32(w.encode()) < cut else w for i, w in enumerate(words)]
        frequencies = {w.lower() if w[:1].isupper() else w: f for w, f in frequencies.items()}
        weights = np.array([frequencies[w[:1].lower() + w[1:]] for w in words], dtype=np.float64)
        self.words = np.array(words, dtype=object)
        self.cumulative = np.cumsum(weights / weights.sum())

    @classmethod
    def of(cls, lang: str) -> "Lexicon":
        try:
            import wordfreq
        except ImportError:
            raise SystemExit("benchmarks.data needs wordfreq: pip install wordfreq==3.1.1 (make bench-data installs it)")
        return cls(wordfreq.get_frequency_dict(lang, wordlist="large"), CAPITALISED.get(lang, 0.1))

    def draw(self, rng, n: int):
        return self.words[self.cumulative.searchsorted(rng.random(n), side="right").clip(max=len(self.words) - 1)]


def sentence(rng, words) -> str:
    out = []
    for i, w in enumerate(words):
        r = rng.random()
        if r < 0.02:
            w = str(int(rng.integers(1, 10_000)))
        out.append(w + ("," if 0.02 <= r < 0.08 and i < len(words) - 1 else ""))
    out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out) + ("?" if rng.random() < 0.05 else ".")


def sentence_pairs(n: int, src: Lexicon, tgt: Lexicon, tgt_lang: str, rng, batch: int = 20_000) -> Iterator[Tuple[str, str]]:
    """``n`` pairs of sentences drawn from the two lexicons (the module's docstring says how)."""
    import numpy as np

    mu = np.log(MEAN_WORDS) - SIGMA**2 / 2
    done = 0
    while done < n:
        k = min(batch, n - done)
        src_len = np.clip(np.rint(rng.lognormal(mu, SIGMA, k)), 1, 200).astype(int)
        tgt_len = np.clip(np.rint(src_len * LENGTH_FACTOR[tgt_lang] * rng.lognormal(0, 0.15, k)), 1, 200).astype(int)
        src_words, tgt_words = src.draw(rng, int(src_len.sum())), tgt.draw(rng, int(tgt_len.sum()))
        s = t = 0
        for a, b in zip(src_len, tgt_len):
            yield sentence(rng, src_words[s : s + a]), sentence(rng, tgt_words[t : t + b])
            s, t = s + a, t + b
        done += k


def write_archives(out: str, pair: str, pairs: int, seed: int = 1, lexicons: Optional[Dict[str, Lexicon]] = None) -> List[str]:
    """Archives with WMT14's names and inner layouts for ``pair``, ``pairs`` training pairs in all, shared
    among the corpora as in WMT14, and newstest2013/2014 of 3000 pairs; written member by member (memory
    does not grow with ``pairs``). Returns the archives' names."""
    import numpy as np

    rng = np.random.default_rng(seed)
    src, tgt = pair.split("-")
    lexicons = lexicons or {lang: Lexicon.of(lang) for lang in (src, tgt)}
    spec, shares = PAIRS[pair], SHARES[pair]
    total = sum(shares.values())
    counts = {c.name: pairs * shares[c.name] // total for c in spec["train"]}
    counts[spec["train"][0].name] += pairs - sum(counts.values())
    os.makedirs(out, exist_ok=True)
    members: Dict[str, List[Tuple[str, str]]] = {}
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        for corpus in spec["train"]:
            paths = {lang: os.path.join(tmp, f"{corpus.name}.{lang}") for lang in (src, tgt)}
            opener = (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=1)) if corpus.member.endswith(".gz") \
                else (lambda p: open(p, "w", encoding="utf-8"))  # fmt: skip
            with opener(paths[src]) as fs, opener(paths[tgt]) as ft:
                for a, b in sentence_pairs(counts[corpus.name], lexicons[src], lexicons[tgt], tgt, rng):
                    fs.write(a + "\n")
                    ft.write(b + "\n")
            for lang in (src, tgt):
                members.setdefault(corpus.archive, []).append((paths[lang], corpus.member.format(lang=lang)))
        dev = list(sentence_pairs(TEST_PAIRS, lexicons[src], lexicons[tgt], tgt, rng))
        test = list(sentence_pairs(TEST_PAIRS, lexicons[src], lexicons[tgt], tgt, rng))
        for corpus, kind, lang, lines in ((spec["valid"], "src", src, dev), (spec["valid"], "src", tgt, dev),
                                          (spec["test_src"], "src", src, test), (spec["test_ref"], "ref", tgt, test)):  # fmt: skip
            path = os.path.join(tmp, f"{corpus.name}.{kind}.{lang}.sgm")
            with open(path, "w", encoding="utf-8") as f:
                f.write(_sgml([p[0 if lang == src else 1] for p in lines], kind, corpus.name, lang))
            members.setdefault(corpus.archive, []).append((path, corpus.member.format(lang=lang)))
        for name, files in members.items():
            gz = dict(mode="w:gz", compresslevel=1) if name.endswith(".tgz") else dict(mode="w")
            with tarfile.open(os.path.join(out, name + ".tmp"), **gz) as tar:
                for path, member in sorted(files, key=lambda f: f[1]):
                    tar.add(path, arcname=member)
            os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
    return sorted(members)


# ---- the process tree's memory, stage by stage ------------------------------------------------------------


def children_map() -> Dict[int, List[int]]:
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    return children


def descendants(pid: int) -> List[int]:
    tree, todo, out = children_map(), [pid], []
    while todo:
        for child in tree.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


def pss_bytes(pid: int) -> Tuple[int, int]:
    """The proportional set size of ``pid``: (all of it, its anonymous part), (0, 0) once it is gone. The
    rest is file pages mapped in (libraries, memory-mapped data), which the kernel can drop and read again."""
    found = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                key = line.split(b":", 1)[0]
                if key in (b"Pss", b"Pss_Anon"):
                    found[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return found.get(b"Pss", 0), found.get(b"Pss_Anon", found.get(b"Pss", 0))


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class TreeMemory(threading.Thread):
    """Samples the summed PSS of every process below ``root`` but the recipe's own shell and engine, every
    ``interval`` seconds; ``take()`` returns the peak since the last call (``anon_peak``: the same for the
    anonymous part alone, which no file backs)."""

    def __init__(self, root: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.root, self.interval, self.peak, self.anon_peak, self.stopped = root, interval, 0, 0, threading.Event()
        self.lock = threading.Lock()
        self.skip: set = set()

    def run(self):
        while not self.stopped.wait(self.interval):
            pids = descendants(self.root)
            for pid in pids:
                if pid not in self.skip and "transformer_plugin_cli.tools.recipe" in cmdline(pid):
                    self.skip.add(pid)  # the engine: it waits, its memory is not the stage's
            sizes = [pss_bytes(p) for p in pids if p not in self.skip]
            with self.lock:
                self.peak = max(self.peak, sum(s[0] for s in sizes))
                self.anon_peak = max(self.anon_peak, sum(s[1] for s in sizes))

    def take(self, anon: bool = False) -> int:
        with self.lock:
            if anon:
                peak, self.anon_peak = self.anon_peak, 0
            else:
                peak, self.peak = self.peak, 0
        return peak


BANNER = re.compile(r"^==== stage (\S+): (.*) ====$")


def run_recipe_stages(script: str, env: Dict[str, str], log_path: str) -> List[Dict]:
    """Run ``script`` with ``env``; each stage's id, title, wall seconds and peak tree memory (bytes)."""
    stages: List[Dict] = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["bash", os.path.join(REPO, "recipes", script)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)  # fmt: skip
        memory = TreeMemory(proc.pid)
        memory.start()
        current: Optional[Dict] = None
        for line in proc.stdout:
            log.write(line)
            m = BANNER.match(line.rstrip("\n"))
            if m:
                now = time.monotonic()
                if current:
                    current.update(seconds=now - current.pop("start"), peak_bytes=memory.take(),
                                   anon_peak_bytes=memory.take(anon=True))  # fmt: skip
                current = {"id": m.group(1), "title": m.group(2), "start": now}
                memory.take(), memory.take(anon=True)
                stages.append(current)
        code = proc.wait()
        memory.stopped.set()
        memory.join()
        if current and "start" in current:
            current.update(seconds=time.monotonic() - current.pop("start"), peak_bytes=memory.take(),
                           anon_peak_bytes=memory.take(anon=True))  # fmt: skip
    if code != 0:
        raise RuntimeError(f"{script} failed (exit {code}); its output: {log_path}")
    return stages


def measure_size(pair: str, pairs: int, work: str, workers: int, seed: int, extra_env: Dict[str, str]) -> Dict:
    """The recipe's data stages on ``pairs`` pairs; reused when done with the same settings."""
    where = os.path.join(work, pair, str(pairs))
    settings = {"pair": pair, "pairs": pairs, "workers": workers, "seed": seed, "env": extra_env,
                "mean_words": MEAN_WORDS, "sigma": SIGMA}  # fmt: skip
    result_path = os.path.join(where, "result.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
        if result.get("settings") == settings:
            return result
    shutil.rmtree(where, ignore_errors=True)
    archives = os.path.join(where, "archives")
    start = time.monotonic()
    write_archives(archives, pair, pairs, seed)
    print(f"{pair} {pairs:,} pairs: archives written in {time.monotonic() - start:.0f} s", flush=True)
    env = dict(os.environ, FROM=archives, WORK=os.path.join(where, "work"), DATA_ONLY="1", IGNORE_PINNED_MD5="1",
               PREP_WORKERS=str(workers), VENV_PYTHON=sys.executable, IGNORE_FREE_SPACE="1", **extra_env)  # fmt: skip
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    stages = run_recipe_stages(SCRIPTS[pair], env, os.path.join(where, "recipe.log"))
    src, tgt = pair.split("-")
    data = os.path.join(where, "work", "data")
    kept = count_lines(os.path.join(data, f"train.{src}"))
    text_bytes = sum(os.path.getsize(os.path.join(data, f"train.{lang}")) for lang in (src, tgt))
    result = {"settings": settings, "stages": stages, "kept_pairs": kept, "train_text_bytes": text_bytes}
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1)
    shutil.rmtree(archives)  # the largest part of the disk it used; the results are kept
    return result


# ---- sentencepiece alone: memory per million sentences ---------------------------------------------------


def spm_peak(text: str, sentences: int, model_type: str, vocab: int, threads: int, prefix: str) -> Dict:
    """Train sentencepiece in a child process on ``sentences`` of ``text``; its wall time and peak RSS."""
    code = ("import sys; from preprocess.sentencepiece_vocab import train; "
            f"train([{text!r}], {prefix!r}, {vocab}, {model_type!r}, input_sentence_size={sentences}, threads={threads})")  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    if status != 0:
        return {"sentences": sentences, "model_type": model_type, "failed": status, "seconds": seconds}
    return {"sentences": sentences, "model_type": model_type, "seconds": seconds, "peak_rss_bytes": usage.ru_maxrss * 1024}


def compare_vocabularies(models: Dict[int, str], held_out: Sequence[str]) -> List[Dict]:
    """Each model against the one of the largest sample: the share of its pieces that the largest has,
    and pieces per sentence on ``held_out`` text (sentences none of the samples held)."""
    import sentencepiece as spm

    largest = max(models)
    pieces = {n: {p.id_to_piece(i) for i in range(p.get_piece_size())} for n, p in
              ((n, spm.SentencePieceProcessor(model_file=path)) for n, path in models.items())}  # fmt: skip
    rows = []
    for n, path in sorted(models.items()):
        processor = spm.SentencePieceProcessor(model_file=path)
        tokens = sum(len(t) for t in processor.encode(list(held_out), out_type=int))
        rows.append({"sample": n, "shared_with_largest": len(pieces[n] & pieces[largest]) / len(pieces[n]),
                     "pieces_per_sentence": tokens / len(held_out)})  # fmt: skip
    return rows


# ---- the table ------------------------------------------------------------------------------------------


def table(results: Sequence[Dict], workers: int) -> str:
    lines = [f"data stages of the WMT14 recipe, PREP_WORKERS={workers}: wall time, lines per second per process, "
             "peak memory (PSS) of the stage's process tree", "",
             "| pairs | kept | stage | wall s | lines/s per process | peak MB | of it anonymous |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        pairs, kept = r["settings"]["pairs"], r["kept_pairs"]
        for s in r["stages"]:
            lines_of = {"1": pairs * 2, "2a": min(2 * kept, 10_000_000), "2b": 2 * kept, "3": 2 * kept}.get(s["id"])
            procs = {"1": workers, "2a": workers, "2b": workers, "3": workers}.get(s["id"], 1)
            rate = f"{lines_of / s['seconds'] / procs:,.0f}" if lines_of and s["seconds"] > 0 else ""
            lines.append(f"| {pairs:,} | {kept:,} | {s['id']} {s['title']} | {s['seconds']:.1f} | {rate} | "
                         f"{s['peak_bytes'] / 1e6:,.0f} | {s.get('anon_peak_bytes', 0) / 1e6:,.0f} |")  # fmt: skip
    return "\n".join(lines)


RECIPE_SPM = {"en-de": "bpe", "en-fr": "unigram"}  # the WMT14 recipes' SPM_TYPE
RECIPE_SAMPLE = {"bpe": 10_000_000, "unigram": 3_000_000}  # their SPM_SAMPLE
STAGE_NAMES = {"1": "1 clean, normalise", "2a": "2a sentencepiece", "2b": "2b encode", "3": "3 fairseq-preprocess"}
SIZES_OF_WMT14 = {"En-De": 4_500_000, "En-Fr": 36_000_000}


def plot(results: Sequence[Dict], spm: Sequence[Dict], mean_characters: float, path: str) -> None:
    """Three panels against corpus size: each stage's wall time (measured, and linear from the largest size
    to WMT14's sizes), each stage's peak memory, and sentencepiece's peak memory against its sample with the
    line that ``preprocess.sentencepiece_vocab`` checks it by."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from preprocess.sentencepiece_vocab import memory_needed

    fig, (time_ax, memory_ax, spm_ax) = plt.subplots(1, 3, figsize=(15, 4.6))
    results = sorted(results, key=lambda r: r["settings"]["pairs"])
    pairs = [r["settings"]["pairs"] for r in results]
    for (stage_id, name), marker in zip(STAGE_NAMES.items(), "os^D"):
        rows = [(r["settings"]["pairs"], s) for r in results for s in r["stages"] if s["id"] == stage_id]
        if not rows:
            continue
        xs = [x for x, _ in rows]
        line, = time_ax.plot(xs, [s["seconds"] for _, s in rows], marker + "-", label=name)
        last_x, last = rows[-1]
        far = [last_x, *sorted(v for v in SIZES_OF_WMT14.values() if v > last_x)]
        if stage_id != "2a":  # stage 2a stops growing at its sample; the others are linear in the corpus
            time_ax.plot(far, [last["seconds"] * x / last_x for x in far], ":", color=line.get_color())
        memory_ax.plot(xs, [s["peak_bytes"] / 1e9 for _, s in rows], marker + "-", label=name, color=line.get_color())
        if stage_id == "2a":  # the recipes' check, at the BPE sample of SPM_SAMPLE (10M) sentences at most
            far = sorted({*far, *[x for x in (5_000_000,) if x > last_x]})  # 5M pairs: both sides fill the sample
            memory_ax.plot(far, [memory_needed("bpe", min(2 * x, 10_000_000), mean_characters) / 1e9 for x in far], ":",
                           color=line.get_color(), label="2a: the recipes' check, BPE")  # fmt: skip
        elif stage_id == "3" and len(rows) > 1:  # fairseq-preprocess keeps a few lists of per-line sizes
            (x0, s0), (x1, s1) = rows[-2], rows[-1]
            slope = (s1["peak_bytes"] - s0["peak_bytes"]) / (x1 - x0)
            memory_ax.plot(far, [(s1["peak_bytes"] + slope * (x - x1)) / 1e9 for x in far], ":", color=line.get_color())
    for ax in (time_ax, memory_ax):
        for label, x in SIZES_OF_WMT14.items():
            ax.axvline(x, color="grey", lw=0.8, ls="--")
            ax.text(x, 0.98, f" {label}", transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="grey")
        ax.set_xscale("log")
        ax.set_xlabel("training pairs")
        ax.grid(alpha=0.3, which="both")
    time_ax.set_yscale("log")
    time_ax.set_ylabel("wall seconds (PREP_WORKERS=2)")
    time_ax.set_title("data stages: time (dotted: linear in the corpus)", fontsize=10)
    time_ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, 0.92))
    memory_ax.set_ylabel("peak PSS of the stage's processes, GB")
    memory_ax.set_title("data stages: peak memory (dotted: extrapolated)", fontsize=10)
    memory_ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, 0.92))
    memory_ax.set_xlim(min(pairs) / 1.5, max(SIZES_OF_WMT14.values()) * 1.5)
    for model_type, marker in (("bpe", "o"), ("unigram", "s")):
        rows = sorted((r["sentences"], r["peak_rss_bytes"]) for r in spm if r.get("model_type") == model_type and "peak_rss_bytes" in r)
        if not rows:
            continue
        line, = spm_ax.plot([x / 1e6 for x, _ in rows], [m / 1e9 for _, m in rows], marker, label=f"{model_type}: measured")
        xs = [x / 1e6 for x in range(0, 10_000_001, 250_000)]
        spm_ax.plot(xs, [memory_needed(model_type, x * 1e6, mean_characters) / 1e9 for x in xs], "-",
                    color=line.get_color(), alpha=0.6, label=f"{model_type}: the recipes' check")  # fmt: skip
    for label, x in (("unigram SPM_SAMPLE", 3), ("BPE SPM_SAMPLE", 10)):
        spm_ax.axvline(x, color="grey", lw=0.8, ls="--")
        spm_ax.text(x, 0.98, f"{label} ", transform=spm_ax.get_xaxis_transform(), va="top", ha="right", fontsize=8, color="grey")
    spm_ax.axhline(16, color="red", lw=0.8)
    spm_ax.text(0.2, 16, " 16 GB", va="bottom", fontsize=8, color="red")
    spm_ax.set_xlabel(f"sentences in the sample, millions ({mean_characters:.0f} characters a line)")
    spm_ax.set_ylabel("peak resident memory, GB")
    spm_ax.set_title("sentencepiece alone: memory by sample", fontsize=10)
    spm_ax.set_xlim(0, 10.5)
    spm_ax.set_ylim(0, 32)
    spm_ax.grid(alpha=0.3)
    spm_ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pair", default="en-de", choices=sorted(SCRIPTS))
    p.add_argument("--sizes", type=int, nargs="*", default=[100_000, 300_000, 1_000_000])
    p.add_argument("--work", default="runs/bench-data")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="PREP_WORKERS of the recipe")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--spm", nargs="*", default=[], choices=["bpe", "unigram"], help="sentencepiece alone, per model type")
    p.add_argument("--spm-sizes", type=int, nargs="*", default=[250_000, 500_000, 1_000_000, 2_000_000])
    p.add_argument("--spm-vocab", type=int, nargs="*", default=[37_000, 32_000], help="per --spm model type")
    p.add_argument("--out", help="write the table here (markdown); results as JSON beside it")
    p.add_argument("--plot", help="draw time and memory against corpus size here (PNG)")
    a = p.parse_args(argv)
    results = []
    for pairs in a.sizes:
        r = measure_size(a.pair, pairs, a.work, a.workers, a.seed, {})
        results.append(r)
        print(table([r], a.workers), flush=True)
    text = table(results, a.workers) if results else ""
    spm = []
    if a.spm:
        largest = max(a.spm_sizes)
        corpus = os.path.join(a.work, "spm", f"text.{largest}")
        if not os.path.exists(corpus):
            import numpy as np

            os.makedirs(os.path.dirname(corpus), exist_ok=True)
            src, tgt = a.pair.split("-")
            lex = {lang: Lexicon.of(lang) for lang in (src, tgt)}
            with open(corpus + ".tmp", "w", encoding="utf-8") as f:  # both sides, as the joint model learns from
                for x, y in sentence_pairs(largest // 2, lex[src], lex[tgt], tgt, np.random.default_rng(a.seed)):
                    f.write(f"{x}\n{y}\n")
            os.replace(corpus + ".tmp", corpus)
        for model_type, vocab in zip(a.spm, a.spm_vocab):
            for n in a.spm_sizes:
                prefix = os.path.join(a.work, "spm", f"{model_type}.{n}")
                settings = {"vocab": vocab, "threads": a.workers, "corpus": corpus}
                if os.path.exists(prefix + ".json") and json.load(open(prefix + ".json")).get("settings") == settings:
                    r = json.load(open(prefix + ".json"))  # measured before with the same settings
                else:
                    r = {**spm_peak(corpus, n, model_type, vocab, a.workers, prefix), "settings": settings}
                    with open(prefix + ".json", "w") as f:
                        json.dump(r, f)
                spm.append(r)
                print(json.dumps(r), flush=True)
        text += "\n\nsentencepiece alone: | type | sentences | wall s | peak RSS MB |\n" + "\n".join(
            f"| {r['model_type']} | {r['sentences']:,} | {r['seconds']:.0f} | {r.get('peak_rss_bytes', 0) / 1e6:,.0f} |" for r in spm)
        import numpy as np

        src, tgt = a.pair.split("-")
        lex = {lang: Lexicon.of(lang) for lang in (src, tgt)}
        held_out = [s for pair in sentence_pairs(5000, lex[src], lex[tgt], tgt, np.random.default_rng(a.seed + 1000))
                    for s in pair]  # fmt: skip
        text += "\n\nthe vocabulary of a sample against the largest sample's: | type | sample | pieces shared | pieces a sentence |"
        for model_type in a.spm:
            models = {n: os.path.join(a.work, "spm", f"{model_type}.{n}.model") for n in a.spm_sizes}
            if results and RECIPE_SPM[a.pair] == model_type:  # the recipe's own model on the largest corpus, when larger
                largest_run = max(results, key=lambda r: r["settings"]["pairs"])
                sample = min(2 * largest_run["kept_pairs"], RECIPE_SAMPLE[model_type])
                if sample > max(models, default=0):
                    models[sample] = os.path.join(a.work, a.pair, str(largest_run["settings"]["pairs"]), "work", "spm", "spm.model")
            for r in compare_vocabularies({n: m for n, m in models.items() if os.path.exists(m)}, held_out):
                spm.append({"model_type": model_type, **r})
                text += f"\n| {model_type} | {r['sample']:,} | {r['shared_with_largest']:.1%} | {r['pieces_per_sentence']:.2f} |"
    print_table(text, a.out)
    if a.plot:
        corpus = os.path.join(a.work, "spm", f"text.{max(a.spm_sizes)}")
        mean = os.path.getsize(corpus) / count_lines(corpus) - 1 if a.spm and os.path.exists(corpus) else 134.0
        plot(results, spm, mean, a.plot)
    if a.out:
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump({"sizes": results, "spm": spm}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
