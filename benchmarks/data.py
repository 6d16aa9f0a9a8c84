"""What the WMT14 recipes' data stages cost at growing corpus sizes: wall time, lines per second per process,
and the peak memory of each stage's whole process tree; and what sentencepiece needs per million sentences.

``make bench-data`` runs the recipe itself (``recipes/wmt14_en_de_base.sh`` or ``wmt14_en_fr_base.sh`` with
``DATA_ONLY=1``: stages 1 clean and normalise, 2a sentencepiece, 2b encode, 3 fairseq-preprocess, exactly as
a user's run does them) on archives in the WMT14 layout (``word_frequency_text.py``), for each corpus size. It
reads the stages from the recipe's banners and samples the memory of every process below the recipe (the
proportional set size, PSS, so that pages shared by fairseq-preprocess's forked workers count once) every
0.2 s. ``--spm`` trains sentencepiece alone on samples of growing size, for BPE and unigram, and records
its peak resident memory (one process: the kernel's own maximum, ``ru_maxrss``).

The text: ``benchmarks/word_frequency_text.py`` (WMT14 cannot be downloaded here). The memory:
``benchmarks/process_memory.py``.

    python -m benchmarks.data --pair en-de --sizes 100000 300000 1000000 --work runs/bench-data \
        --out runs/bench-data/table.md
    python -m benchmarks.data --spm bpe unigram --spm-sizes 250000 500000 1000000 2000000 --work runs/bench-data
    python -m benchmarks.data --sizes 100000 4000000 --spm bpe unigram --plot docs/figures/bench-data.png  # reuses both

Each size's result is kept in ``WORK/<pair>/<size>/result.json`` and reused when its settings are the same.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import print_table  # noqa: E402
from benchmarks.process_memory import TreeMemory  # noqa: E402
from benchmarks.word_frequency_text import MEAN_WORDS, SIGMA, Lexicon, sentence_pairs, write_archives  # noqa: E402
from preprocess.corpora import count_lines  # noqa: E402

SCRIPTS = {"en-de": "wmt14_en_de_base.sh", "en-fr": "wmt14_en_fr_base.sh"}


BANNER = re.compile(r"^==== stage (\S+): (.*) ====$")


def run_recipe_stages(script: str, env: Dict[str, str], log_path: str) -> List[Dict]:
    """Run ``script`` with ``env``; each stage's id, title, wall seconds and peak tree memory (bytes)."""
    stages: List[Dict] = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            ["bash", os.path.join(REPO, "recipes", script)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        memory = TreeMemory(proc.pid)
        memory.start()
        current: Optional[Dict] = None
        for line in proc.stdout:
            log.write(line)
            m = BANNER.match(line.rstrip("\n"))
            if m:
                now = time.monotonic()
                if current:
                    current.update(
                        seconds=now - current.pop("start"),
                        peak_bytes=memory.take(),
                        anon_peak_bytes=memory.take(anon=True),
                    )
                current = {"id": m.group(1), "title": m.group(2), "start": now}
                memory.take(), memory.take(anon=True)
                stages.append(current)
        code = proc.wait()
        memory.stopped.set()
        memory.join()
        if current and "start" in current:
            current.update(
                seconds=time.monotonic() - current.pop("start"),
                peak_bytes=memory.take(),
                anon_peak_bytes=memory.take(anon=True),
            )
    if code != 0:
        raise RuntimeError(f"{script} failed (exit {code}); its output: {log_path}")
    return stages


def measure_size(pair: str, pairs: int, work: str, workers: int, seed: int, extra_env: Dict[str, str]) -> Dict:
    """The recipe's data stages on ``pairs`` pairs; reused when done with the same settings."""
    where = os.path.join(work, pair, str(pairs))
    settings = {
        "pair": pair,
        "pairs": pairs,
        "workers": workers,
        "seed": seed,
        "env": extra_env,
        "mean_words": MEAN_WORDS,
        "sigma": SIGMA,
    }
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
    env = dict(
        os.environ,
        FROM=archives,
        WORK=os.path.join(where, "work"),
        DATA_ONLY="1",
        IGNORE_PINNED_MD5="1",
        PREP_WORKERS=str(workers),
        VENV_PYTHON=sys.executable,
        IGNORE_FREE_SPACE="1",
        **extra_env,
    )
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
    code = (
        "import sys; from preprocess.sentencepiece_vocab import train; "
        f"train([{text!r}], {prefix!r}, {vocab}, {model_type!r}, input_sentence_size={sentences}, threads={threads})"
    )
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    if status != 0:
        return {"sentences": sentences, "model_type": model_type, "failed": status, "seconds": seconds}
    return {
        "sentences": sentences,
        "model_type": model_type,
        "seconds": seconds,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
    }


def compare_vocabularies(models: Dict[int, str], held_out: Sequence[str]) -> List[Dict]:
    """Each model against the one of the largest sample: the share of its pieces that the largest has,
    and pieces per sentence on ``held_out`` text (sentences none of the samples held)."""
    import sentencepiece as spm

    largest = max(models)
    pieces = {
        n: {p.id_to_piece(i) for i in range(p.get_piece_size())}
        for n, p in ((n, spm.SentencePieceProcessor(model_file=path)) for n, path in models.items())
    }
    rows = []
    for n, path in sorted(models.items()):
        processor = spm.SentencePieceProcessor(model_file=path)
        tokens = sum(len(t) for t in processor.encode(list(held_out), out_type=int))
        rows.append(
            {
                "sample": n,
                "shared_with_largest": len(pieces[n] & pieces[largest]) / len(pieces[n]),
                "pieces_per_sentence": tokens / len(held_out),
            }
        )
    return rows


# ---- the table ------------------------------------------------------------------------------------------


def table(results: Sequence[Dict], workers: int) -> str:
    lines = [
        f"data stages of the WMT14 recipe, PREP_WORKERS={workers}: wall time, lines per second per process, "
        "peak memory (PSS) of the stage's process tree",
        "",
        "| pairs | kept | stage | wall s | lines/s per process | peak MB | of it anonymous |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        pairs, kept = r["settings"]["pairs"], r["kept_pairs"]
        for s in r["stages"]:
            lines_of = {"1": pairs * 2, "2a": min(2 * kept, 10_000_000), "2b": 2 * kept, "3": 2 * kept}.get(s["id"])
            procs = {"1": workers, "2a": workers, "2b": workers, "3": workers}.get(s["id"], 1)
            rate = f"{lines_of / s['seconds'] / procs:,.0f}" if lines_of and s["seconds"] > 0 else ""
            lines.append(
                f"| {pairs:,} | {kept:,} | {s['id']} {s['title']} | {s['seconds']:.1f} | {rate} | "
                f"{s['peak_bytes'] / 1e6:,.0f} | {s.get('anon_peak_bytes', 0) / 1e6:,.0f} |"
            )
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
        (line,) = time_ax.plot(xs, [s["seconds"] for _, s in rows], marker + "-", label=name)
        last_x, last = rows[-1]
        far = [last_x, *sorted(v for v in SIZES_OF_WMT14.values() if v > last_x)]
        if stage_id != "2a":  # stage 2a stops growing at its sample; the others are linear in the corpus
            time_ax.plot(far, [last["seconds"] * x / last_x for x in far], ":", color=line.get_color())
        memory_ax.plot(xs, [s["peak_bytes"] / 1e9 for _, s in rows], marker + "-", label=name, color=line.get_color())
        if stage_id == "2a":  # the recipes' check, at the BPE sample of SPM_SAMPLE (10M) sentences at most
            far = sorted({*far, *[x for x in (5_000_000,) if x > last_x]})  # 5M pairs: both sides fill the sample
            memory_ax.plot(
                far,
                [memory_needed("bpe", min(2 * x, 10_000_000), mean_characters) / 1e9 for x in far],
                ":",
                color=line.get_color(),
                label="2a: the recipes' check, BPE",
            )
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
        rows = sorted(
            (r["sentences"], r["peak_rss_bytes"])
            for r in spm
            if r.get("model_type") == model_type and "peak_rss_bytes" in r
        )
        if not rows:
            continue
        (line,) = spm_ax.plot(
            [x / 1e6 for x, _ in rows], [m / 1e9 for _, m in rows], marker, label=f"{model_type}: measured"
        )
        xs = [x / 1e6 for x in range(0, 10_000_001, 250_000)]
        spm_ax.plot(
            xs,
            [memory_needed(model_type, x * 1e6, mean_characters) / 1e9 for x in xs],
            "-",
            color=line.get_color(),
            alpha=0.6,
            label=f"{model_type}: the recipes' check",
        )
    for label, x in (("unigram SPM_SAMPLE", 3), ("BPE SPM_SAMPLE", 10)):
        spm_ax.axvline(x, color="grey", lw=0.8, ls="--")
        spm_ax.text(
            x, 0.98, f"{label} ", transform=spm_ax.get_xaxis_transform(), va="top", ha="right", fontsize=8, color="grey"
        )
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
    p.add_argument(
        "--spm", nargs="*", default=[], choices=["bpe", "unigram"], help="sentencepiece alone, per model type"
    )
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
            f"| {r['model_type']} | {r['sentences']:,} | {r['seconds']:.0f} | {r.get('peak_rss_bytes', 0) / 1e6:,.0f} |"
            for r in spm
        )
        import numpy as np

        src, tgt = a.pair.split("-")
        lex = {lang: Lexicon.of(lang) for lang in (src, tgt)}
        held_out = [
            s
            for pair in sentence_pairs(5000, lex[src], lex[tgt], tgt, np.random.default_rng(a.seed + 1000))
            for s in pair
        ]
        text += "\n\nthe vocabulary of a sample against the largest sample's: "
        text += "| type | sample | pieces shared | pieces a sentence |"
        for model_type in a.spm:
            models = {n: os.path.join(a.work, "spm", f"{model_type}.{n}.model") for n in a.spm_sizes}
            # the recipe's own model on the largest corpus, when larger
            if results and RECIPE_SPM[a.pair] == model_type:
                largest_run = max(results, key=lambda r: r["settings"]["pairs"])
                sample = min(2 * largest_run["kept_pairs"], RECIPE_SAMPLE[model_type])
                if sample > max(models, default=0):
                    models[sample] = os.path.join(
                        a.work, a.pair, str(largest_run["settings"]["pairs"]), "work", "spm", "spm.model"
                    )
            for r in compare_vocabularies({n: m for n, m in models.items() if os.path.exists(m)}, held_out):
                spm.append({"model_type": model_type, **r})
                shared, pieces = r["shared_with_largest"], r["pieces_per_sentence"]
                text += f"\n| {model_type} | {r['sample']:,} | {shared:.1%} | {pieces:.2f} |"
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
