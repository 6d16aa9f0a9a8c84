"""Speed of ``vaswani_transformer`` against fairseq's built-in ``transformer``, in one run.

Both models get identical sizes, data, seed, criterion, schedule and number of updates; only the
implementation differs. For each of ``--repeats`` rounds it trains both (order alternating) and
reads from fairseq's own log the training speed (target tokens per second, the mean of the logged
intervals after the first) and the final training loss, and from the operating system the peak
resident memory of the process. For generation it converts the built-in model's last checkpoint to
``vaswani_transformer`` (transformer_plugin_cli.tools.convert: the same weights) and decodes the test set with
beam 4 with both, ``--generate-repeats`` times in alternating order, so the hypotheses must be
identical. Ratios are given of the means, of the medians, and within each round: on a shared
machine a round is sometimes much slower than the others, which moves a mean more than a median,
and the speed of the machine drifts, which moves the two runs of one round (adjacent in time)
least. With ``--plain``, each round also trains ``vaswani_transformer`` with every speed lever of the plugin
off (``vaswani-plain``: ``--compile-layers off``, ``--compile-loss off``, and fairseq's per-tensor Adam and
master-weight copies by TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER=0), and the report gives the levers' gain, on
against off, in the same rounds; generation has no lever of these, and is not run for it. fairseq's ``transformer``
trains with the plugin's criterion as ours does, its loss eager (``--compile-loss off``).

Model FLOPs utilisation is the training FLOPs (6 x parameters x tokens, the usual approximation, attention scores
excluded) per second over the measured float32 matrix-multiply peak of this machine.

    python -m benchmarks.speed --work runs/bench --repeats 3 --out runs/bench/speed.md

Runs on CPU here and unchanged on a GPU (add e.g. --train-args=--bf16). On a GPU, peak memory is
torch's ``max_memory_allocated`` of each command (run through benchmarks/cuda_peak.py) and the
matmul peak is measured on the GPU in the training precision (bfloat16 for --bf16, float16 for
--fp16 or --amp). ``--size base`` and ``--size big`` give the paper's two models (N, d_model, d_ff,
h of Table 3), for example on one GPU:

    python -m benchmarks.speed --size big --train-args=--bf16 --generate-args=--bf16 \
        --max-tokens 16384 --updates 300 --log-interval 50 --gen-batch-size 256 --out big.md
"""

import argparse
import os
import re
import shlex
import shutil
import statistics
import sys
import time

from benchmarks.common import BIN, PLUGIN, REPO, model_flags, print_table, sh
from transformer_plugin_cli.fairseq_output import log_records, sentence_lines, translation_speed
from transformer_plugin_cli.paper import decoding_flags, training_flags


def prepare_data(work, train_pairs, vocab_size):
    from preprocess.sentencepiece_vocab import encode, train
    from preprocess.synthetic_pair import generate

    bin_dir = os.path.join(work, "data-bin")
    if os.path.exists(os.path.join(bin_dir, "test.src-tgt.tgt.idx")):
        return bin_dir
    data = os.path.join(work, "data")
    generate(data, train=train_pairs, valid=200, test=1000, seed=1)
    model = train([f"{data}/train.src", f"{data}/train.tgt"], f"{data}/spm", vocab_size)
    splits = [f"{data}/{s}.{side}" for s in ("train", "valid", "test") for side in ("src", "tgt")]
    encode(model, splits, [p.replace(".src", ".sp.src").replace(".tgt", ".sp.tgt") for p in splits])
    sh(
        [
            f"{BIN}/fairseq-preprocess",
            "--source-lang",
            "src",
            "--target-lang",
            "tgt",
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
    return bin_dir


SIZES = {  # --size: N, d_model, d_ff, h
    "base": (6, 512, 2048, 8),  # Table 3, base
    "big": (6, 1024, 4096, 16),  # Table 3, big
}


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def tool(name):
    """A fairseq console script; on a GPU through cuda_peak.py, which reports the GPU memory."""
    if on_gpu():
        return [sys.executable, os.path.join(REPO, "benchmarks", "cuda_peak.py"), name]
    return [f"{BIN}/{name}"]


def peak_memory(output, rss):
    """MiB: the GPU's peak (printed by cuda_peak.py) on a GPU, else the process's peak resident memory."""
    m = re.search(r"^cuda peak memory: (\d+) MiB$", output, flags=re.M)
    return float(m.group(1)) if m else rss


def train_args(impl, bin_dir, a):
    """fairseq-train's arguments for ``impl`` (vaswani or fairseq) at ``a``'s sizes, without a save dir."""
    return [
        bin_dir,
        "--user-dir",
        PLUGIN,
        *model_flags(impl, a),
        "--share-all-embeddings",
        "--dropout",
        "0.1",
        "--attention-dropout",
        "0.0",
        *training_flags(warmup_updates=400),
        # the compiled loss is a lever of the plugin's (measured on and off with --plain): fairseq's model keeps the
        # criterion's eager path, as it had before the lever
        *([] if impl == "vaswani" else ["--compile-loss", "off"]),
        "--max-tokens",
        str(a.max_tokens),
        "--max-update",
        str(a.updates),
        "--seed",
        "1",
        "--no-epoch-checkpoints",
        "--disable-validation",
        "--log-format",
        "json",
        "--log-interval",
        str(a.log_interval),
        "--num-workers",
        "0",
        *shlex.split(a.train_args),
    ]


# --plain: the plugin with its speed levers off (the paper's function either way: tests/unit/modules and patches)
PLAIN = "vaswani-plain"
PLAIN_FLAGS = ["--compile-layers", "off", "--compile-loss", "off"]
PLAIN_ENV = {"TRANSFORMER_PLUGIN_MULTI_TENSOR_OPTIMIZER": "0"}


def train(impl, bin_dir, save_dir, a, log):
    plain = impl == PLAIN
    args = train_args("vaswani" if plain else impl, bin_dir, a) + (PLAIN_FLAGS if plain else [])
    cmd = [*tool("fairseq-train"), *args, "--save-dir", save_dir]
    output, rss, seconds = sh(cmd, log, env={**os.environ, **PLAIN_ENV} if plain else None)
    rss = peak_memory(output, rss)
    records = log_records(output, "train_inner")
    if len(records) < 2:
        raise RuntimeError(f"too few train_inner records in {log}; raise --updates")
    return {
        "wps": statistics.mean(float(r["wps"]) for r in records[1:]),
        "loss": float(records[-1]["loss"]),
        "losses": [float(r["loss"]) for r in records],
        "rss": rss,
        "wpb": statistics.mean(float(r["wpb"]) for r in records),
    }


def generate(checkpoint, bin_dir, a, log):
    cmd = [
        *tool("fairseq-generate"),
        bin_dir,
        "--user-dir",
        PLUGIN,
        "--path",
        checkpoint,
        "--gen-subset",
        "test",
        *decoding_flags(),
        *fixed_length_flags(a.gen_length),
        "--batch-size",
        str(a.gen_batch_size),
        *shlex.split(a.generate_args),
    ]
    output, rss, _ = sh(cmd, log)
    rss = peak_memory(output, rss)
    speed = translation_speed(output)
    hyps = {i: "\t".join(fields[1:]) for i, fields in sentence_lines(output, "H").items()}  # fields: score, tokens
    return {"sent_per_s": speed.sentences_per_second, "seconds": speed.seconds, "rss": rss, "hyps": hyps}


def fixed_length_flags(length: int) -> list:
    """fairseq-generate's flags that make every hypothesis ``length`` pieces long (none for 0): no end of sentence
    before it (--min-len), and none longer (--max-len-a 0 --max-len-b). A model trained for a benchmark's few
    updates has not learnt where to stop, so how many steps a batch decodes (as many as its longest hypothesis)
    depends on rounding: on an H100 the two models' hypotheses differed for 93 of 1,000 sentences and the
    sentences/s of the same weights differed threefold."""
    return ["--min-len", str(length), "--max-len-a", "0", "--max-len-b", str(length)] if length else []


def hypothesis_lengths(builtin: dict, vaswani: dict) -> str:
    """How long the two models' hypotheses are (pieces), all and those that differ: where they differ, a
    model that runs on to the length limit decodes more steps, and sentences/s compares unlike work (the
    first GPU run's generation ratio fell from 1.17x on one machine to 0.35x on another, with 907/1000
    identical)."""

    def pieces(hyps, ids):
        return [len(hyps[i].split("\t", 1)[-1].split()) if i in hyps else 0 for i in ids]

    def describe(ids):
        b, v = pieces(builtin, ids), pieces(vaswani, ids)
        return f"mean {statistics.mean(b):.1f} / {statistics.mean(v):.1f}, longest {max(b)} / {max(v)}"

    ids = sorted(builtin)
    differ = [i for i in ids if builtin[i] != vaswani.get(i)]
    line = f"hypothesis length in pieces, builtin / vaswani: {describe(ids)}" if ids else "no hypotheses"
    if differ:
        line += f"; the {len(differ)} that differ: {describe(differ)}"
    return line


def matmul_dtype(train_args: str) -> str:
    """The precision of the training's matrix products: what MFU is measured against."""
    words = shlex.split(train_args)
    if "--bf16" in words or "--memory-efficient-bf16" in words:
        return "bfloat16"
    if any(w in words for w in ("--fp16", "--memory-efficient-fp16", "--amp")):
        return "float16"
    return "float32"


def matmul_peak_flops(n=2048, seconds=3.0, device="cpu", dtype="float32"):
    """FLOP/s of an n x n x n matrix product on ``device`` in ``dtype``, over about ``seconds``."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    a, b = (torch.randn(n, n, device=device).to(getattr(torch, dtype)) for _ in range(2))
    torch.matmul(a, b)
    sync()
    iters, start = 0, time.time()
    while time.time() - start < seconds:
        torch.matmul(a, b)
        iters += 1
        if device == "cuda" and iters % 10 == 0:
            sync()
    sync()
    return 2 * n**3 * iters / (time.time() - start)


def flops_per_target_token(a, vocab, src_per_tgt):
    """6 x parameters touched per token; the output projection counts for target tokens."""
    d, f, N = a.d_model, a.d_ff, a.layers
    attention = 4 * d * d
    encoder_layer, decoder_layer = attention + 2 * d * f, 2 * attention + 2 * d * f
    return 6 * (N * encoder_layer * src_per_tgt + N * decoder_layer + d * vocab)


def spread(values, fmt="{:.0f}"):
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(statistics.stdev(values))}"


def parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default="runs/bench")
    p.add_argument("--repeats", type=int, default=3, help="training rounds")
    p.add_argument("--generate-repeats", type=int, default=6, help="generation rounds (about 25 s each)")
    p.add_argument("--updates", type=int, default=80)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--size", choices=sorted(SIZES), help="the paper's base or big model (sets the four above)")
    p.add_argument("--train-pairs", type=int, default=30000)
    p.add_argument("--vocab-size", type=int, default=2000)
    p.add_argument("--gen-batch-size", type=int, default=64)
    p.add_argument("--train-args", default="", help="extra fairseq-train flags for both, e.g. --bf16")
    p.add_argument("--generate-args", default="", help="extra fairseq-generate flags for both")
    p.add_argument(
        "--gen-length",
        type=int,
        default=0,
        help="decode every hypothesis to this many pieces (--min-len and --max-len-b), so that both models do "
        "the same work whatever they output; 0: as the paper decodes, up to the source's length + 50",
    )
    p.add_argument(
        "--plain",
        action="store_true",
        help=f"also train {PLAIN} each round: the plugin with its speed levers off, for their gain in the same run",
    )
    p.add_argument("--out", help="write the table here (markdown)")
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    if a.size:
        a.layers, a.d_model, a.d_ff, a.heads = SIZES[a.size]
    os.makedirs(a.work, exist_ok=True)
    bin_dir = prepare_data(a.work, a.train_pairs, a.vocab_size)
    with open(os.path.join(bin_dir, "dict.src.txt")) as f:
        vocab = sum(1 for _ in f) + 4
    src_tokens = os.path.getsize(os.path.join(bin_dir, "train.src-tgt.src.bin"))
    tgt_tokens = os.path.getsize(os.path.join(bin_dir, "train.src-tgt.tgt.bin"))

    trained = ["builtin", "vaswani"] + ([PLAIN] if a.plain else [])
    results = {impl: [] for impl in trained}
    for r in range(a.repeats):
        order = trained if r % 2 == 0 else trained[::-1]
        for impl in order:
            save_dir = os.path.join(a.work, f"ckpt_{impl}")
            shutil.rmtree(save_dir, ignore_errors=True)  # every round trains from scratch
            res = train(impl, bin_dir, save_dir, a, os.path.join(a.work, f"train_{impl}_{r}.log"))
            results[impl].append(res)
            print(
                f"round {r + 1} {impl:8s} train {res['wps']:.0f} tok/s, loss {res['loss']:.3f}, peak {res['rss']:.0f} "
                "MiB",
                flush=True,
            )

    builtin_ckpt = os.path.join(a.work, "ckpt_builtin", "checkpoint_last.pt")
    converted = os.path.join(a.work, "ckpt_builtin", "as_vaswani.pt")
    sh([sys.executable, "-m", "transformer_plugin_cli.tools.convert", builtin_ckpt, converted])
    gen = {"builtin": [], "vaswani": []}
    checkpoints = [("builtin", builtin_ckpt), ("vaswani", converted)]
    for r in range(a.generate_repeats):
        for impl, ckpt in checkpoints if r % 2 == 0 else checkpoints[::-1]:
            gen[impl].append(generate(ckpt, bin_dir, a, os.path.join(a.work, f"generate_{impl}_{r}.log")))
            print(f"round {r + 1} {impl:8s} generate {gen[impl][-1]['sent_per_s']:.1f} sentences/s", flush=True)
    same = sum(gen["builtin"][0]["hyps"][i] == gen["vaswani"][0]["hyps"].get(i) for i in gen["builtin"][0]["hyps"])
    total = len(gen["builtin"][0]["hyps"])

    device, dtype = ("cuda", matmul_dtype(a.train_args)) if on_gpu() else ("cpu", "float32")
    n = 8192 if device == "cuda" else 2048
    peak = matmul_peak_flops(n, device=device, dtype=dtype)
    fpt = flops_per_target_token(a, vocab, src_tokens / tgt_tokens)
    rows = []

    def mean(impl, key, table):
        return statistics.mean(x[key] for x in table[impl])

    def curve(impl):
        return [statistics.mean(losses) for losses in zip(*(x["losses"] for x in results[impl]))]

    names = {
        "builtin": "fairseq `transformer`",
        "vaswani": "`vaswani_transformer`",
        PLAIN: "`vaswani_transformer`, levers off (eager layers and loss, per-tensor Adam)",
    }
    for impl in trained:
        rows.append(
            (
                names[impl],
                spread([x["wps"] for x in results[impl]]),
                f"{mean(impl, 'wps', results) * fpt / peak * 100:.1f}%",
                spread([x["loss"] for x in results[impl]], "{:.3f}"),
                spread([x["rss"] for x in results[impl]]),
                spread([x["sent_per_s"] for x in gen[impl]], "{:.1f}") if impl in gen else "-",
                spread([x["rss"] for x in gen[impl]]) if impl in gen else "-",
            )
        )

    def median(impl, key, table):
        return statistics.median(x[key] for x in table[impl])

    def paired(table, key, over="builtin", impl="vaswani"):
        r = [v[key] / b[key] for b, v in zip(table[over], table[impl])]
        return " ".join(f"{x:.2f}" for x in r) + f" (median {statistics.median(r):.2f}x, lowest {min(r):.2f}x)"

    ratios = (
        mean("vaswani", "wps", results) / mean("builtin", "wps", results),
        mean("vaswani", "sent_per_s", gen) / mean("builtin", "sent_per_s", gen),
        mean("vaswani", "rss", results) / mean("builtin", "rss", results),
        mean("vaswani", "rss", gen) / mean("builtin", "rss", gen),
    )
    import torch

    lines = [
        f"N={a.layers}, d_model={a.d_model}, d_ff={a.d_ff}, h={a.heads}, shared vocabulary {vocab}, "
        f"--max-tokens {a.max_tokens}, {a.updates} updates, {a.repeats} training and {a.generate_repeats} "
        f"generation rounds in alternating order; torch {torch.__version__}, "
        + (f"{torch.cuda.get_device_name()}" if device == "cuda" else f"{torch.get_num_threads()} threads")
        + f"; matmul peak {peak / 1e9:.1f} GFLOP/s ({dtype} {n}^3); peak memory: "
        + ("torch.cuda.max_memory_allocated" if device == "cuda" else "resident set of the process"),
        "",
        f"| implementation | train tok/s | MFU | final train loss | train peak MiB | generate sent/s (beam 4"
        f"{f', {a.gen_length} pieces each' if a.gen_length else ''}) | generate peak MiB |",
        "|---|---|---|---|---|---|---|",
        *["| " + " | ".join(row) + " |" for row in rows],
        "",
        f"ratios vaswani/builtin: training {ratios[0]:.2f}x, generation {ratios[1]:.2f}x, "
        f"train memory {ratios[2]:.2f}x, generate memory {ratios[3]:.2f}x; "
        f"identical hypotheses: {same}/{total} (same weights, converted)",
        hypothesis_lengths(gen["builtin"][0]["hyps"], gen["vaswani"][0]["hyps"]),
        f"ratios of the medians (less sensitive to a slow round): training "
        f"{median('vaswani', 'wps', results) / median('builtin', 'wps', results):.2f}x, generation "
        f"{median('vaswani', 'sent_per_s', gen) / median('builtin', 'sent_per_s', gen):.2f}x",
        f"ratio within each round (the two runs of a round are adjacent in time, so a slow phase of the "
        f"machine affects both): training {paired(results, 'wps')}; generation {paired(gen, 'sent_per_s')}",
        *(
            [
                f"the levers, on against off (vaswani/{PLAIN}): training "
                f"{mean('vaswani', 'wps', results) / mean(PLAIN, 'wps', results):.2f}x, train memory "
                f"{mean('vaswani', 'rss', results) / mean(PLAIN, 'rss', results):.2f}x; within each round: "
                f"{paired(results, 'wps', over=PLAIN)}; {PLAIN}/builtin: training "
                f"{mean(PLAIN, 'wps', results) / mean('builtin', 'wps', results):.2f}x"
            ]
            if a.plain
            else []
        ),
        "",
        f"training loss every {a.log_interval} updates (mean of the rounds; the two start from different random "
        "weights):",
        *[f"- {impl}: " + " ".join(f"{x:.2f}" for x in curve(impl)) for impl in ("builtin", "vaswani")],
        f"- largest difference: {max(abs(x - y) for x, y in zip(curve('builtin'), curve('vaswani'))):.2f}",
    ]
    print_table("\n".join(lines), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
