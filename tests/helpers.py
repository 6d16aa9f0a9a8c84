"""Helpers shared by the tests: small fairseq objects and models, and running fairseq's tools and the recipes."""

import gzip
import math
import os
import re
import shlex
import subprocess
import sys
from argparse import Namespace

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import transformer_plugin  # noqa: E402,F401  (registers the plugin's parts with fairseq)
from fairseq.data import Dictionary  # noqa: E402
from transformer_plugin_cli.paper import training_flags  # noqa: E402

BIN = os.path.dirname(sys.executable)
PLUGIN = os.path.join(REPO, "transformer_plugin")
PYTHON = os.path.basename(sys.executable)
WORDS = [f"w{i}" for i in range(24)]


# ---- models ------------------------------------------------------------------------------------


def make_dictionary(num_words: int) -> Dictionary:
    d = Dictionary()
    for i in range(num_words):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=1)
    return d


class DummyTask:
    """What build_model needs from a translation task."""

    def __init__(self, src_dict, tgt_dict=None):
        self.source_dictionary = src_dict
        self.target_dictionary = tgt_dict if tgt_dict is not None else src_dict


def vaswani_args(arch: str = "vaswani_tiny", **overrides) -> Namespace:
    """A namespace with the settings fairseq-train uses for ``--arch arch`` plus the given flags: the
    architecture's dataclass defaults, then ``overrides``."""
    from fairseq.models import MODEL_DATACLASS_REGISTRY

    config = MODEL_DATACLASS_REGISTRY[arch]()
    defaults = {name: getattr(config, name) for name in config.__dataclass_fields__ if not name.startswith("_")}
    return Namespace(arch=arch, **{**defaults, **overrides})


def build_vaswani(dictionary, arch="vaswani_tiny", **overrides):
    from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel

    overrides.setdefault("share_all_embeddings", True)
    return VaswaniTransformerModel.build_model(vaswani_args(arch, **overrides), DummyTask(dictionary))


# The sizes at which the model is compared with fairseq's built-in transformer.
SIZES = dict(d_model=32, d_ff=64, attention_heads=4, encoder_layers=2, decoder_layers=2)


def fairseq_transformer(dictionary, sizes=SIZES):
    """fairseq's built-in ``transformer`` at ``sizes``, dropout off: the model the parity tests compare with."""
    from fairseq.models.transformer import TransformerModel, base_architecture

    args = vaswani_args("vaswani_tiny")  # the fairseq namespace, then fairseq's own names
    args.arch = "transformer"
    args.encoder_embed_dim = args.decoder_embed_dim = sizes["d_model"]
    args.encoder_ffn_embed_dim = args.decoder_ffn_embed_dim = sizes["d_ff"]
    args.encoder_attention_heads = args.decoder_attention_heads = sizes["attention_heads"]
    args.encoder_layers, args.decoder_layers = sizes["encoder_layers"], sizes["decoder_layers"]
    args.share_all_embeddings = True
    args.dropout = args.attention_dropout = args.activation_dropout = 0.0
    args.max_source_positions = args.max_target_positions = 64
    base_architecture(args)
    return TransformerModel.build_model(args, DummyTask(dictionary))


def random_batch(dictionary, batch_size=3, src_len=7, tgt_len=6, seed=0, left_pad_source=True):
    """src_tokens (B, S) with different lengths and padding; prev_output_tokens (B, T) right-padded."""
    g = torch.Generator().manual_seed(seed)
    nspecial, V = dictionary.nspecial, len(dictionary)
    pad, eos = dictionary.pad(), dictionary.eos()
    src = torch.full((batch_size, src_len), pad)
    tgt = torch.full((batch_size, tgt_len), pad)
    src_lengths = torch.tensor([src_len - (i % 3) for i in range(batch_size)])
    for i in range(batch_size):
        n = int(src_lengths[i])
        words = torch.randint(nspecial, V, (n - 1,), generator=g).tolist() + [eos]
        if left_pad_source:
            src[i, src_len - n :] = torch.tensor(words)
        else:
            src[i, :n] = torch.tensor(words)
        m = tgt_len - (i % 2)
        tgt[i, :m] = torch.tensor([eos] + torch.randint(nspecial, V, (m - 1,), generator=g).tolist())
    return src, src_lengths, tgt


# ---- made once a run ---------------------------------------------------------------------------------


def made_once(tmp_path_factory, name, make):
    """The directory ``name``, made by ``make(directory)`` once for the whole test run, whichever test file and
    pytest-xdist worker asks first: the others wait for it (a lock file) and get the same directory. For what
    several test files read and none changes (a binarized corpus, a trained toy model). A ``make`` that fails
    leaves nothing behind, and the next to ask tries again."""
    import fcntl
    import shutil

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's own directory, which every worker's basetemp is under
    where = root / "made-once" / name
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{where}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / ".made").exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            try:
                make(where)
            except BaseException:
                shutil.rmtree(where, ignore_errors=True)
                raise
            (where / ".made").write_text("")
    return where


# ---- fairseq's command-line tools ----------------------------------------------------------------

TRAIN_FLAGS = [
    "--arch",
    "vaswani_tiny",
    "--share-all-embeddings",
    *training_flags(warmup_updates=20),
    "--max-tokens",
    "600",
    "--seed",
    "1",
    "--num-workers",
    "0",
    "--no-progress-bar",
    "--log-interval",
    "1",
    "--log-format",
    "simple",
]


def run_tool(tool, *args, cwd=None, expect_ok=True, stdin=None):
    """Run a fairseq console script of this environment; return its combined output."""
    proc = subprocess.run(
        [os.path.join(BIN, tool), *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=600
    )
    output = proc.stdout + proc.stderr
    if expect_ok and proc.returncode != 0:
        pytest.fail(f"{tool} failed ({proc.returncode}):\n{output[-4000:]}")
    return output if expect_ok else (proc.returncode, output)


DATA_LOADING_TOOLS = ("fairseq-train", "fairseq-generate", "fairseq-interactive", "fairseq-validate")


def run_in_process(tool, *args, stdin="", expect_ok=True):
    """Run the fairseq console script ``tool`` in this process: the function its installed script
    calls, with ``sys.argv`` as the shell would set it, so the same code runs as for ``tool ARGS``,
    without several seconds of start-up. Returns what it printed and logged, or (exit code,
    output) with ``expect_ok=False``."""
    import contextlib
    import importlib.metadata
    import io
    import logging
    import traceback

    from fairseq import checkpoint_utils
    from fairseq.logging import progress_bar

    if tool in DATA_LOADING_TOOLS and "--num-workers" not in args:
        # no data-loader worker processes in this process: a loader's workers left to the garbage
        # collector hold up whatever runs next for 5 s (torch's shutdown timeout)
        args = (*args, "--num-workers", "0")
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name=tool)
    main = entry.load()
    # what fairseq keeps for the life of its process, which a second run must not inherit here: the
    # best validation score so far, and one tensorboard writer per log name (whatever the directory)
    if hasattr(checkpoint_utils.save_checkpoint, "best"):
        del checkpoint_utils.save_checkpoint.best
    writers = getattr(progress_bar, "_tensorboard_writers", {})
    for writer in writers.values():
        writer.close()
    writers.clear()
    output, root = io.StringIO(), logging.getLogger()
    handler = logging.StreamHandler(output)
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    saved = sys.argv, sys.stdin, root.level
    sys.argv, sys.stdin = [tool, *args], io.StringIO(stdin)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    code = 0
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            main()
    except SystemExit as e:  # argparse errors, and tools that exit
        code = e.code if isinstance(e.code, int) else 1
    except Exception:
        code = 1
        output.write(traceback.format_exc())
    finally:
        root.removeHandler(handler)
        sys.argv, sys.stdin, _ = saved
        root.setLevel(saved[2])
    text = output.getvalue()
    if expect_ok and code != 0:
        pytest.fail(f"{tool} failed ({code}):\n{text[-4000:]}")
    return text if expect_ok else (code, text)


def trained_updates(data_bin, save_dir, *flags):
    """fairseq-train in this process (run_in_process) on ``data_bin``'s reversal task, without validation or epoch
    checkpoints, with ``flags``: the updates its checkpoint_last.pt holds, and its log."""
    log = run_in_process(
        "fairseq-train",
        str(data_bin / "bin"),
        "--user-dir",
        PLUGIN,
        *TRAIN_FLAGS,
        "--save-dir",
        str(save_dir),
        "--no-epoch-checkpoints",
        "--disable-validation",
        *flags,
    )
    state = torch.load(os.path.join(save_dir, "checkpoint_last.pt"), weights_only=False)
    return int(state["optimizer_history"][-1]["num_updates"]), log


def logged_losses(log):
    """The training losses fairseq-train logs with ``--log-format simple``, one per logged interval."""
    return [float(m.group(1)) for m in re.finditer(r" loss=([0-9.]+), nll_loss", log)]


def free_port():
    """A TCP port free on 127.0.0.1 now (the engine of the recipes picks its workers' the same way)."""
    from recipes.engine import free_port as engine_free_port

    return engine_free_port()


# ---- the recipes --------------------------------------------------------------------------------

# the variables the recipes read, none of which a user's shell has unless the command sets it
RECIPE_VARIABLES = (
    "WORK",
    "TOY",
    "FROM",
    "GPUS",
    "LAUNCH",
    "NNODES",
    "NODE_RANK",
    "DRY_RUN",
    "TREEBANK",
    "ROWS",
    "CPU_WORKERS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "DIST_TIMEOUT",
    "DATA_ONLY",
    "CONFIG",
    "PRECISION",
    "VENV_PYTHON",
    "GLOO_SOCKET_IFNAME",
    "MAX_UPDATE",
    "EXTRA_TRAIN_ARGS",
)


def user_env(assignments=(), **variables) -> dict:
    """The environment of a user who ran ``make install``, activated the environment and typed a command:
    its bin directory first on PATH, none of the recipes' variables (RECIPE_VARIABLES, TOY_*) but those
    the command sets: ``VAR=value`` words, or keywords."""
    env = {k: v for k, v in os.environ.items() if k not in RECIPE_VARIABLES and not k.startswith("TOY_")}
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    env.update(a.split("=", 1) for a in assignments)
    env.update({k: str(v) for k, v in variables.items()})
    return env


def run_recipe(script, work, *args, **variables):
    """bash recipes/SCRIPT ARGS with WORK=work and the given variables, from the repository root."""
    return subprocess.run(
        ["bash", os.path.join(REPO, "recipes", script), *args],
        cwd=REPO,
        env=user_env(WORK=work, **variables),
        capture_output=True,
        text=True,
        timeout=1200,
    )


ONE_STAGE = """set -euo pipefail
source "$REPO/recipes/lib.sh"
stage 1 "one stage" "$@"
run_stages
"""


def one_stage(directory, *command, **variables):
    """``bash`` running COMMAND as the one stage of a recipe (recipes/lib.sh) whose WORK is
    directory/work, in a session of its own (os.killpg(proc.pid, ...) reaches what a terminal's Ctrl-C
    would): the Popen."""
    script = os.path.join(directory, "one_stage.sh")
    with open(script, "w") as f:
        f.write(ONE_STAGE)
    env = user_env(REPO=REPO, WORK=os.path.join(directory, "work"), **variables)
    return subprocess.Popen(
        ["bash", script, *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def processes_naming(text):
    """The PIDs of this machine's processes whose command line holds ``text`` (a run's own directory)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def commands(output, program):
    """The arguments of ``program`` on every dry-run line that runs it (directly, or through env/srun/torchrun)."""
    found = []
    for line in output.splitlines():
        if line.startswith("+ "):
            words = shlex.split(line[2:])
            starts = [i for i, w in enumerate(words) if os.path.basename(w) == program]
            if starts:
                found.append(words[starts[0] :])
    return found


def flag(words, name):
    return words[words.index(name) + 1]


def copy_repository(directory):
    """The repository's files as a clone of it gives them (tracked files, and new ones git does not
    ignore: nothing built, no runs/) copied into directory."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    tar = subprocess.Popen(
        ["tar", "-cf", "-", "--null", "-T", "-"], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    untar = subprocess.Popen(["tar", "-xf", "-"], cwd=directory, stdin=tar.stdout)
    tar.stdin.write(b"\0".join(f for f in files if f and os.path.exists(os.path.join(REPO, f.decode()))))
    tar.stdin.close()
    assert untar.wait() == 0 and tar.wait() == 0
    return directory


def known_at() -> str:
    """A speed figure's "measured", an hour ago: young enough to be read back (probe_cache.MAX_AGE_DAYS)."""
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(time.time() - 3600))


def known_speed_figures(cache, vocab: int, parents=(), toy_vocab=None, parent_seconds=0.5) -> None:
    """Speed figures (recipes/planner/speed/) written into ``cache`` (an XDG_CACHE_HOME) as
    if this machine had probed the full-size models of recipes/parallel_text.sh's dry runs before, on 2 CPU workers,
    with the corpus's vocabulary of ``vocab`` pieces, each at 4,096 tokens (the plan scales a CPU's figure per token):
    the small class's model (4 s an update), 3 and 2 layers a side of d_model 256 (1.5 s), the paper's base (6 s) and
    big (20 s), and the class's with --d-ff 512 and 4,000 pieces (1.5 s); and for each of ``parents`` (a directory
    INIT= names, en-de), its model at 4,096 tokens (``parent_seconds``); with ``toy_vocab``, the toy model (TOY=1's
    vaswani_tiny) at that vocabulary (0.25 s). A dry run then reads them back rather than time
    a model for about 15 seconds of 2 cores, each as the best of REMEASURE_TRIES probes (so that two close predictions
    are not measured again); the probe
    itself is timed for real by tests/unit/recipes/test_speed_probe.py, in a recipe by test_parallel_text_recipe.py's
    REPROBE test (e2e) and, for a parent, by test_parallel_text_init.py. Each real probe beside the other tests
    is a busy machine's, three times over (recipes/planner/speed/busy_cores.py): seconds of the suite each."""
    import json

    from recipes.planner.budget.candidates import SHORT_FLAGS
    from recipes.planner.parent import read_parent
    from recipes.planner.speeds import REMEASURE_TRIES
    from recipes.planner.speed.probing import layout_probe

    def d256(layers, tokens):
        return layout_probe("vaswani_base", SHORT_FLAGS.format(n=layers), vocab, tokens, 0, 2)

    known = {
        layout_probe("vaswani_base", "--d-ff 1024 --attention-heads 4", vocab, 4096, 0, 2): 4.0,
        d256(3, 4096): 1.5,
        d256(2, 4096): 1.5,
        layout_probe("vaswani_base", "", vocab, 4096, 0, 2): 6.0,
        layout_probe("vaswani_big", "", vocab, 4096, 0, 2): 20.0,
        layout_probe("vaswani_base", "--d-ff 512", 4000, 4096, 0, 2): 1.5,
    }
    for (
        init
    ) in parents:  # the parent's model and vocabulary, as the recipe's plan reads them (recipes/planner/parent.py)
        parent = read_parent(str(init), "en", "de", "runs").assignments("en", "de")
        known[
            layout_probe("vaswani_base", parent["PARENT_MODEL_FLAGS"], int(parent["PARENT_VOCAB_SIZE"]), 4096, 0, 2)
        ] = parent_seconds
    if toy_vocab:
        known[layout_probe("vaswani_tiny", "", toy_vocab, 4096, 0, 2)] = 0.25
    (cache / "transformer_plugin").mkdir(parents=True, exist_ok=True)
    (cache / "transformer_plugin" / "speed.json").write_text(
        json.dumps(
            {
                probe.key(): {"seconds": seconds, "measured": known_at(), "tries": REMEASURE_TRIES}
                for probe, seconds in known.items()
            }
        )
    )


def speed_file(path, busy="", parents=()):
    """A speed file (recipes/planner/speed/speed_file.py, ``vaswani-speed-probe file``) as a GPU machine might write it,
    of made-up figures that grow slowly with a device's share of the batch, and the bandwidth defaulted: what a dry run
    given SPEED_FILE reads. ``parents``: directories INIT= names, their models timed too (``--parent``)."""
    from recipes.planner.parent import parent_model

    from recipes.planner.budget import candidates
    from recipes.planner.model import Model
    from recipes.planner.speed.speed_file import write_speed_file

    def speed(probe):
        p = Model.from_flags(probe.arch, probe.model_flags).parameters(probe.vocab_size) / 1e6
        return {"seconds": 0.02 + p * 1e-5 * probe.tokens_per_update / 1000 + 0.01 * (p / 60), "busy": busy}

    models = [(arch, flags) for arch, flags, _ in candidates.MODELS]
    models += [("vaswani_base", *parent_model(str(init))) for init in parents]
    return write_speed_file(
        str(path), models, "cuda", "bf16", 4096, 32000, None, None, speed=speed, progress=lambda line: None
    )


def flops_speed_file(path, device="cuda", **kw):
    """A speed file from FLOPs (benchmarks/flops_speed.py): an H100 in bf16, or ``device="cpu"`` of ``peak_flops``."""
    from benchmarks import flops_speed

    return flops_speed.write(str(path), device, **kw)


# ---- the budget rule's properties ------------------------------------------------------------------------


class Sweep:
    """The properties of the picks as one budget grows on one corpus and machine: the lowest prediction of the pick's
    model never rises and its parameters never fall; the pick is that lowest, or a tie within the rule's own error
    broken and said, or the batch of the smaller budgets' picks kept and said; no device gets less than its least
    share (``least``), nor the batch falls (TIME: ``batch_never_falls``); no prediction goes below the floor; the
    lines stay under 120 characters and the picked line names what its prediction rests on."""

    def __init__(self, pairs, devices=1, least=None, batch_never_falls=True):
        self.pairs, self.devices, self.least, self.batch_never_falls = pairs, devices, least, batch_never_falls
        self.lowest, self.size, self.tokens, self.loss = math.inf, 0.0, 0, math.inf

    def holds(self, found, budget):
        from recipes.planner.budget.evidence import ranking_error

        pick = next(o for o in found.plan["options"] if o["picked"])
        loss, said = pick["predicted_valid_loss_bits"], (self.pairs, budget, found.budget, found.notes)
        mine = [  # a candidate of which no update fits has no prediction (None)
            o["predicted_valid_loss_bits"]
            for o in found.plan["options"]
            if o["limited"] != "not probed" and (o["arch"], o["model_flags"]) == (found.arch, found.model_flags)
        ]
        lowest = min(x for x in mine if x is not None)
        assert lowest <= self.lowest + 1e-9 and pick["parameters_millions"] >= self.size - 1e-9, said
        tie = loss <= lowest + ranking_error(self.pairs) + 1e-9 and any(n.startswith("tie: ") for n in found.notes)
        kept = any(n.endswith(f"kept the smaller budgets' batch, {found.tokens_per_update:,}") for n in found.notes)
        assert loss == lowest or tie or kept, said
        if self.least:
            assert found.tokens_per_update // self.devices >= self.least(found.arch, found.model_flags), said
        assert found.tokens_per_update >= self.tokens or not self.batch_never_falls, said
        floor = found.plan["floor_bits"]
        assert all(
            o["predicted_valid_loss_bits"] is None or o["predicted_valid_loss_bits"] > floor
            for o in found.plan["options"]
        )
        assert len(f"picked: {found.budget}") < 120 and all(len(f"note: {n}") < 120 for n in found.notes), said
        assert pick["evidence"] in ("measured", "from the paper", "extrapolated")
        assert found.budget.endswith(f" bits, {pick['evidence']})")
        self.lowest, self.size, self.tokens = lowest, pick["parameters_millions"], found.tokens_per_update
        self.loss = loss


# ---- real text -----------------------------------------------------------------------------------------

CATALOGUES = "/usr/share/locale/de/LC_MESSAGES"


def real_english_german(n=None):
    """English-German pairs of real text, offline: the messages of the German gettext catalogues this machine's
    installed programs ship (preprocess.debian_l10n reads them), untranslated ones left out; the first n. Skips
    the test, saying why, where the machine has too few."""
    import glob

    from preprocess import debian_l10n

    pairs, rules = [], debian_l10n.RULES("en", "de")
    for path in sorted(glob.glob(os.path.join(CATALOGUES, "*.mo"))):
        with open(path, "rb") as f:
            data = f.read()
        try:
            pairs += [(rules.normalise(en), rules.normalise(de)) for en, de in debian_l10n.messages(data, path)]
        except debian_l10n.DataError:
            continue  # a catalogue in another encoding
    pairs = [(en, de) for en, de in pairs if en and de and en != de]
    if len(pairs) < (n or 3000):
        pytest.skip(
            f"{CATALOGUES} holds {len(pairs)} translated messages; the test needs {n or 3000} (install more "
            "programs' German translations, e.g. apt-get install git coreutils)"
        )
    return pairs[:n] if n else pairs


# ---- the documentation's commands ---------------------------------------------------------------


def documents():
    """The pages a user reads for commands: README.md and the reference pages under docs/."""
    docs = os.path.join(REPO, "docs")
    pages = sorted(f for f in os.listdir(docs) if f.endswith(".md"))
    return ["README.md"] + [f"docs/{f}" for f in pages]


def documented_commands():
    """(page, line) for every command of the pages' ```bash blocks: continuation lines joined, a
    trailing ``# comment`` dropped."""
    found = []
    for page in documents():
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            blocks = re.findall(r"```bash\n(.*?)```", f.read(), flags=re.S)
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():
                command = line.split(" #")[0].strip()
                if command and not command.startswith("#"):
                    found.append((page, command))
    return found


# ---- MarianMT models, for the import -----------------------------------------------------------------

MARIAN_V = 40  # </s>, <unk>, 37 pieces, <pad>: marian_directory's vocabulary


# the tiny shape of the published models built here (MarianMT's, NLLB's, M2M100's): 2+2 layers of 32, 4 heads
TINY_SHAPE = dict(
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
)


def randomise_layer_norms(model) -> None:
    """Every LayerNorm's weight about 1 and bias about 0, not exactly: a LayerNorm mapped to the wrong place shows."""
    for name, p in model.named_parameters():
        if "layer_norm" in name:
            p.normal_(1.0 if name.endswith("weight") else 0.0, 0.2)


def marian_directory(path, separate=False, seed=0, language_tokens=(), languages=("en", "de"), **overrides):
    """A MarianMT directory as save_pretrained writes it, random weights in OPUS-MT's shape (swish, tied embeddings,
    <pad> last and the start of decoding), tiny, with LayerNorms, final_logits_bias and the padding row randomised
    so that a wrong mapping shows; vocab.json, tokenizer_config.json and a sentencepiece model of those pieces
    (marian_sentencepiece) as source.spm and target.spm beside it.
    ``language_tokens``: a multilingual model's ``>>xx<<`` pieces, after ``<unk>``; ``languages``: the
    tokenizer_config's source_lang and target_lang. ``overrides``: MarianConfig's settings."""
    import json

    import transformers

    torch.manual_seed(seed)
    spm_model, ordinary = marian_sentencepiece()
    pieces = ["</s>", "<unk>", *language_tokens] + ordinary + ["<pad>"]
    target = ["</s>", "<unk>"] + ordinary[::-1] + ["<pad>"] if separate else pieces  # other ids for the same pieces
    V = len(pieces)
    shape = dict(
        vocab_size=V,
        decoder_vocab_size=len(target),
        **TINY_SHAPE,
        activation_function="swish",
        max_position_embeddings=64,
        pad_token_id=V - 1,
        eos_token_id=0,
        decoder_start_token_id=V - 1,
        share_encoder_decoder_embeddings=not separate,
        scale_embedding=True,
    )
    config = transformers.MarianConfig(**{**shape, **overrides})
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        randomise_layer_norms(model)
        model.final_logits_bias.normal_(0, 1)
        model.model.encoder.embed_tokens.weight[V - 1].normal_(0, 0.1)
    model.save_pretrained(path)
    with open(os.path.join(path, "vocab.json"), "w") as f:
        json.dump({p: i for i, p in enumerate(pieces)}, f)
    if separate:
        with open(os.path.join(path, "target_vocab.json"), "w") as f:
            json.dump({p: i for i, p in enumerate(target)}, f)
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"source_lang": languages[0], "target_lang": languages[1], "separate_vocabs": separate}, f)
    for name in ("source.spm", "target.spm"):
        (path / name).write_bytes(spm_model)
    return model.eval()


def marian_sentencepiece():
    """(a sentencepiece BPE model of MARIAN_V pieces trained on random words, its MARIAN_V - 3 pieces that are not
    <unk>, <s> or </s>), the same every time."""
    import io
    import random

    import sentencepiece

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 4))) for _ in range(300)]
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(" ".join(rng.choice(words) for _ in range(8)) for _ in range(2000)),
        model_writer=model,
        vocab_size=MARIAN_V,
        model_type="bpe",
        minloglevel=2,
    )
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    return model.getvalue(), [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]


NLLB_CODES = ("eng_Latn", "deu_Latn", "fra_Latn", "zho_Hans", "zho_Hant")
M2M100_CODES = ("__en__", "__de__", "__fr__", "__ru__")


def m2m100_directory(path, family="nllb", codes=None, seed=0, safetensors=True, languages=None, **overrides):
    """An NLLB-200 or M2M100 directory as save_pretrained writes them: M2M100ForConditionalGeneration with random
    weights in their shape (pre-norm with a LayerNorm after each stack, ReLU, fairseq's sinusoids, one embedding
    matrix scaled by sqrt(d_model)), tiny, the LayerNorms randomised so that a wrong mapping shows; the tokenizer's
    files and its sentencepiece model (marian_sentencepiece's pieces) as sentencepiece.bpe.model. ``codes``: the
    language codes (NLLB's after the pieces, as its tokenizer adds them; M2M100's from the tokenizer's own table);
    ``languages``: the tokenizer's src_lang and tgt_lang. Returns (the model, the tokenizer)."""
    import json

    import transformers

    torch.manual_seed(seed)
    spm_model, ordinary = marian_sentencepiece()
    os.makedirs(path, exist_ok=True)
    (path / "sentencepiece.bpe.model").write_bytes(spm_model)
    if family == "nllb":
        codes = list(codes or NLLB_CODES)
        src, tgt = languages or codes[:2]
        with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "NllbTokenizer", "src_lang": src, "tgt_lang": tgt}, f)
        tokenizer = transformers.NllbTokenizer.from_pretrained(str(path), extra_special_tokens=codes)
        tokenizer.src_lang, tokenizer.tgt_lang = src, tgt
    else:
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, **{p: 4 + i for i, p in enumerate(ordinary)}}
        with open(os.path.join(path, "vocab.json"), "w") as f:
            json.dump(vocab, f)
        src, tgt = languages or ("en", "de")
        tokenizer = transformers.M2M100Tokenizer(
            vocab_file=str(path / "vocab.json"),
            spm_file=str(path / "sentencepiece.bpe.model"),
            src_lang=src,
            tgt_lang=tgt,
            **({"language_codes": codes} if isinstance(codes, str) else {}),
        )
    tokenizer.save_pretrained(str(path))
    size = max(tokenizer.get_vocab().values()) + 1
    size = max(size, max(getattr(tokenizer, "lang_token_to_id", {0: 0}).values()) + 1)
    size = -(-(size + (8 if family != "nllb" else 0)) // 8) * 8  # fairseq's madeup words: a multiple of 8
    shape = dict(
        vocab_size=size,
        **TINY_SHAPE,
        activation_function="relu",
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        scale_embedding=True,
        init_std=0.2,
    )
    config = transformers.M2M100Config(**{**shape, **overrides})
    model = transformers.M2M100ForConditionalGeneration(config)
    with torch.no_grad():
        randomise_layer_norms(model)
    model.save_pretrained(str(path))
    if not safetensors:  # the older hub format (transformers 5 writes safetensors only)
        torch.save(model.state_dict(), path / "pytorch_model.bin")
        (path / "model.safetensors").unlink()
    return model.eval(), tokenizer


# ---- parallel text: a corpus of distinct pairs, and a speed for each candidate of the budget rule ----
ENGLISH = [
    "The file could not be opened.",
    "Save the document before you close it.",
    "Open a new window.",
    "The printer is not ready.",
    "Delete the selected files?",
    "Check your network connection.",
    "The password is wrong.",
    "Select a folder to import.",
    "Your changes were saved.",
    "Quit the program.",
]
GERMAN = [
    "Die Datei konnte nicht geöffnet werden.",
    "Speichern Sie das Dokument, bevor Sie es schließen.",
    "Ein neues Fenster öffnen.",
    "Der Drucker ist nicht bereit.",
    "Die ausgewählten Dateien löschen?",
    "Prüfen Sie Ihre Netzwerkverbindung.",
    "Das Passwort ist falsch.",
    "Wählen Sie einen Ordner zum Importieren.",
    "Ihre Änderungen wurden gespeichert.",
    "Das Programm beenden.",
]


def corpus(directory, pairs, name="train", gz=False, tsv=""):
    """PREFIX.en and PREFIX.de in directory (bytes lines, written as given): PREFIX. ``tsv``: the same pairs also as
    directory/tsv, source<TAB>target a line."""
    for lang, side in (("en", [p[0] for p in pairs]), ("de", [p[1] for p in pairs])):
        data = b"".join((s if isinstance(s, bytes) else s.encode()) + b"\n" for s in side)
        path = directory / f"{name}.{lang}{'.gz' if gz else ''}"
        path.write_bytes(gzip.compress(data) if gz else data)
    if tsv:
        (directory / tsv).write_text("".join(f"{en}\t{de}\n" for en, de in pairs), encoding="utf-8")
    return str(directory / name)


def parameters(path):
    """A checkpoint's parameters (its "model"), loaded as the plugin's checkpoint allowlist loads it."""
    from transformer_plugin.patches.checkpoint_allowlist import load_checked

    return load_checked(str(path))["model"]


def many(n, start=0):
    """n distinct sentence pairs."""
    return [(f"{ENGLISH[i % 10]} Number {i}.", f"{GERMAN[i % 10]} Nummer {i}.") for i in range(start, start + n)]


def speeds(full: float, short: float, halved: float = 1.0):
    """A candidate's seconds per update: the size class's model, or one of d_model 256 at 4,096 tokens an update,
    ``halved`` times that at 2,048."""

    def seconds(candidate, vocab_size):
        if "--d-model 256" not in candidate.model_flags:
            return full
        return short * (halved if candidate.tokens_per_update == 2048 else 1.0)

    return seconds
