"""How fast ``vaswani_transformer`` learns per update against fairseq's ``transformer``, on real text.

Both models get identical sizes, data, seeds, criterion, optimizer and learning-rate curve; only the
implementation differs. The data is a real English-German corpus that the project prepares offline
from the gettext catalogues Debian packages ship (``preprocess.debian_l10n``: about 77,000 training
pairs), with a joint sentencepiece BPE vocabulary. For every model and seed the benchmark trains
for ``--updates`` updates, reads the validation nll (bits per token, fairseq's ``valid_nll_loss``)
every ``--interval`` updates from fairseq's own log, then translates the test split with beam 4 and
lenpen 0.6 and scores it with detokenized sacreBLEU and chrF.

    python -m benchmarks.learning --work runs/learning --out runs/learning/learning.md
    python -m benchmarks.learning --arm "fsin=vaswani:--sinusoid-variant fairseq"   # an ablation beside the two

``--arm NAME=IMPL[:FLAGS]`` adds a model: IMPL ``builtin`` (fairseq's transformer) or ``vaswani``,
FLAGS extra fairseq-train flags for it. Each run is kept in ``WORK/runs/NAME.seedS`` with the
command that made it; a re-run reuses a finished run only when its command and data are the same.
Defaults: N=3, d_model=256, d_ff=1024, h=4, dropout 0.1, label smoothing 0.1, Adam (0.9, 0.98,
1e-9), Eq. (3) with 200 warm-up updates scaled to a peak of 1e-3, ``--max-tokens 4096``, seeds 1
and 2, 1,200 updates: 77-80 minutes a run on one core of a 2-core machine, two runs side by side
(``OMP_NUM_THREADS=1`` and ``--only-arms --arm transformer=builtin`` in one process, ``--arm
vaswani=vaswani`` in the other; a run so made is reused by a later run with all arms).
"""

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import time
from types import SimpleNamespace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import BIN, PLUGIN, model_flags, print_table, sh  # noqa: E402
from transformer_plugin_cli.fairseq_output import log_records  # noqa: E402
from transformer_plugin_cli.paper import decoding_flags, training_flags  # noqa: E402

IMPLS = {"builtin": "fairseq `transformer`", "vaswani": "`vaswani_transformer`"}


def parse_arm(text: str):
    """NAME=IMPL[:FLAGS] -> (name, impl, [flags])."""
    m = re.fullmatch(r"([\w.-]+)=(builtin|vaswani)(?::(.*))?", text.strip(), flags=re.S)
    if not m:
        raise argparse.ArgumentTypeError(f"--arm {text!r}: expected NAME=builtin|vaswani[:FLAGS]")
    return m.group(1), m.group(2), shlex.split(m.group(3) or "")


def prepare_data(a) -> str:
    """Corpus, joint BPE and fairseq binaries; redone when the corpus or the settings change."""
    from preprocess import debian_l10n
    from preprocess.sentencepiece_vocab import encode, train

    data, bin_dir = os.path.join(a.work, "data"), os.path.join(a.work, "data-bin")
    report = debian_l10n.prepare(
        data, debs=a.debs, download_dir=os.path.join(a.work, "debs"), valid=a.valid, test=a.test
    )
    key = hashlib.sha256(json.dumps([report, a.vocab_size], sort_keys=True).encode()).hexdigest()
    stamp = os.path.join(bin_dir, "made_from.txt")
    if os.path.exists(stamp) and open(stamp).read() == key:
        return bin_dir
    shutil.rmtree(bin_dir, ignore_errors=True)
    model = train([f"{data}/train.en", f"{data}/train.de"], f"{data}/spm", a.vocab_size)
    splits = [f"{data}/{s}.{lang}" for s in ("train", "valid", "test") for lang in ("en", "de")]
    encode(
        model,
        splits,
        [
            p.replace(f"{os.sep}train.", f"{os.sep}train.sp.")
            .replace(f"{os.sep}valid.", f"{os.sep}valid.sp.")
            .replace(f"{os.sep}test.", f"{os.sep}test.sp.")
            for p in splits
        ],
    )
    sh(
        [
            f"{BIN}/fairseq-preprocess",
            "--source-lang",
            "en",
            "--target-lang",
            "de",
            "--joined-dictionary",
            "--trainpref",
            f"{data}/train.sp",
            "--validpref",
            f"{data}/valid.sp",
            "--testpref",
            f"{data}/test.sp",
            "--destdir",
            bin_dir,
            "--workers",
            "2",
        ]
    )
    with open(stamp, "w") as f:
        f.write(key)
    return bin_dir


def train_command(impl, extra, bin_dir, save_dir, seed, a):
    sizes = SimpleNamespace(layers=a.layers, d_model=a.d_model, d_ff=a.d_ff, heads=a.heads)
    multiplier = a.peak_lr * (a.d_model * a.warmup) ** 0.5  # Eq. (3) peaks at (d_model * warmup)^-0.5
    return [
        f"{BIN}/fairseq-train",
        bin_dir,
        "--user-dir",
        PLUGIN,
        *model_flags(impl, sizes),
        "--share-all-embeddings",
        "--dropout",
        "0.1",
        *training_flags(warmup_updates=a.warmup),
        "--lr-multiplier",
        f"{multiplier:.6g}",
        "--max-tokens",
        str(a.max_tokens),
        "--max-update",
        str(a.updates),
        "--seed",
        str(seed),
        "--validate-interval-updates",
        str(a.interval),
        "--validate-interval",
        "1000000",
        "--save-interval",
        "1000000",
        "--no-epoch-checkpoints",
        "--save-dir",
        save_dir,
        "--log-format",
        "json",
        "--log-interval",
        "50",
        "--num-workers",
        "0",
        *extra,
    ]


def train_curve(cmd, log):
    """Run fairseq-train ``cmd``; the validation nll (bits per token) by update and the training loss."""
    start = time.time()
    output, _, _ = sh(cmd, log)
    valid, train_inner = log_records(output, "valid"), log_records(output, "train_inner")
    return {
        "valid_nll": {int(v["valid_num_updates"]): float(v["valid_nll_loss"]) for v in valid},
        "train_loss": {int(r["num_updates"]): float(r["loss"]) for r in train_inner},
        "train_seconds": round(time.time() - start),
    }


def translate_and_score(checkpoint, bin_dir, reference, log):
    """Beam 4, lenpen 0.6 on the test split; detokenized sacreBLEU and chrF against ``reference``."""
    from transformer_plugin_cli.tools.evaluate import read_hypotheses, score

    gen, _, _ = sh(
        [
            f"{BIN}/fairseq-generate",
            bin_dir,
            "--user-dir",
            PLUGIN,
            "--path",
            checkpoint,
            "--gen-subset",
            "test",
            *decoding_flags(),
            "--post-process",
            "sentencepiece",
            "--batch-size",
            "128",
        ],
        log,
    )
    with open(reference, encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f]
    scores = score(read_hypotheses(gen.splitlines(), "D", expected=len(references)), references)
    return {"bleu": scores["sacrebleu"], "chrf": scores["chrf"], "signature": scores["sacrebleu_signature"]}


def run(name, impl, extra, seed, bin_dir, a):
    """Train one model with one seed, translate the test split, score it; reused when already done."""
    run_dir = os.path.join(a.work, "runs", f"{name}.seed{seed}")
    save_dir = os.path.join(run_dir, "checkpoints")
    cmd = train_command(impl, extra, bin_dir, save_dir, seed, a)
    made_from = {
        "train": cmd[1:],
        "data": open(os.path.join(bin_dir, "made_from.txt")).read(),
        "beam": 4,
        "lenpen": 0.6,
    }
    result_path = os.path.join(run_dir, "result.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
        if result["made_from"] == made_from:
            for curve in ("valid_nll", "train_loss"):  # JSON keys are strings
                result[curve] = {int(k): v for k, v in result[curve].items()}
            return result
    shutil.rmtree(run_dir, ignore_errors=True)  # a run with other settings is never continued
    os.makedirs(run_dir)
    print(f"{name} seed {seed}: training, log in {os.path.join(run_dir, 'train.log')}", flush=True)
    result = {"made_from": made_from, **train_curve(cmd, os.path.join(run_dir, "train.log"))}
    result.update(
        translate_and_score(
            f"{save_dir}/checkpoint_last.pt",
            bin_dir,
            os.path.join(a.work, "data", "test.de"),
            os.path.join(run_dir, "generate.out"),
        )
    )
    with open(result_path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(result_path + ".tmp", result_path)
    shutil.rmtree(save_dir)  # the checkpoint has served; keep the disk small
    return result


def table(arms, results, seeds, a):
    steps = list(range(a.interval, a.updates + 1, a.interval))

    def valid(name, step, seed=None):
        values = [results[name, s]["valid_nll"][step] for s in seeds]
        return values[seeds.index(seed)] if seed is not None else statistics.mean(values)

    def mean(name, key):
        return statistics.mean(results[name, s][key] for s in seeds)

    base = arms[0][0]
    head = "| model | " + " | ".join(str(s) for s in steps) + " | BLEU | chrF |"
    rule = "|---" * (len(steps) + 3) + "|"
    lines = [
        f"valid nll (bits per token) every {a.interval} updates, mean of seeds {', '.join(map(str, seeds))};"
        f" sacreBLEU and chrF of the test split at update {a.updates} (beam 4, lenpen 0.6)",
        "",
        head,
        rule,
    ]
    for name, impl, extra in arms:
        label = f"{IMPLS[impl]}" + (f" `{shlex.join(extra)}`" if extra else "") + f" ({name})"
        lines.append(
            f"| {label} | "
            + " | ".join(f"{valid(name, s):.2f}" for s in steps)
            + f" | {mean(name, 'bleu'):.2f} | {mean(name, 'chrf'):.2f} |"
        )
    for name, _, _ in arms[1:]:
        lines.append(
            f"| {name} - {base} | "
            + " | ".join(f"{valid(name, s) - valid(base, s):+.2f}" for s in steps)
            + f" | {mean(name, 'bleu') - mean(base, 'bleu'):+.2f} | {mean(name, 'chrf') - mean(base, 'chrf'):+.2f} |"
        )
    lines += [
        "",
        "each seed:",
        "",
        "| model | seed | " + " | ".join(str(s) for s in steps) + " | BLEU | train min |",
        "|---" * (len(steps) + 4) + "|",
    ]
    for name, _, _ in arms:
        for seed in seeds:
            r = results[name, seed]
            lines.append(
                f"| {name} | {seed} | "
                + " | ".join(f"{valid(name, s, seed):.2f}" for s in steps)
                + f" | {r['bleu']:.2f} | {r['train_seconds'] / 60:.0f} |"
            )
    lines.append("")
    lines.append(f"sacreBLEU signature: {results[arms[0][0], seeds[0]]['signature']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default="runs/learning")
    p.add_argument("--debs", help="the Debian packages' .deb files are here (default: apt-get download)")
    p.add_argument("--arm", action="append", type=parse_arm, default=[], help="NAME=IMPL[:FLAGS], see above")
    p.add_argument("--only-arms", action="store_true", help="run the --arm models alone, without the two defaults")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--updates", type=int, default=1200)
    p.add_argument("--interval", type=int, default=200, help="updates between validations")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--peak-lr", type=float, default=1e-3)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--valid", type=int, default=1000)
    p.add_argument("--test", type=int, default=1500)
    p.add_argument("--out", help="write the table here (markdown)")
    a = p.parse_args(argv)
    arms = ([] if a.only_arms else [("transformer", "builtin", []), ("vaswani", "vaswani", [])]) + a.arm
    if not arms:
        p.error("--only-arms needs at least one --arm")
    names = [name for name, _, _ in arms]
    if len(set(names)) != len(names):
        p.error(f"two models have the same name: {names}")
    os.makedirs(a.work, exist_ok=True)
    bin_dir = prepare_data(a)
    results = {}
    for seed in a.seeds:
        for name, impl, extra in arms:
            results[name, seed] = r = run(name, impl, extra, seed, bin_dir, a)
            curve = " ".join(f"{v:.2f}" for _, v in sorted(r["valid_nll"].items()))
            print(f"{name} seed {seed}: valid nll {curve}; BLEU {r['bleu']:.2f}, chrF {r['chrf']:.2f}", flush=True)
    text = table(arms, results, a.seeds, a)
    print_table(text, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
