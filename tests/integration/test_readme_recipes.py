"""The documentation's recipe commands as a user types them: every ``bash recipes/...`` line of the code
blocks of the README and of the reference pages under docs/ (also inside ``sbatch --wrap "..."``), with
only the variables that line shows, run with ``--dry-run``
from a fresh copy of the repository; every recipe's ``--dry-run`` and ``--help``; and a recipe that
fails always says where."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

import pytest

from helpers import (
    REPO,
    copy_repository,
    corpus,
    documented_commands,
    documents,
    known_speed_figures,
    m2m100_directory,
    marian_directory,
    speed_file,
    user_env,
)


def readme_recipe_lines():
    """(line, [VAR=value ...], [script and its arguments]) for each recipe command of the README and the
    reference pages under docs/ (helpers.documented_commands)."""
    found = []
    for _, command in documented_commands():
        wrapped = re.search(r'--wrap\s+"([^"]*)"', command)  # sbatch: the command it submits
        words = shlex.split(wrapped.group(1) if wrapped else command)
        if (
            "bash" in words
            and words.index("bash") + 1 < len(words)
            and words[words.index("bash") + 1].startswith("recipes/")
        ):
            i = words.index("bash")
            args = words[i + 1 :]
            for j, word in enumerate(args):  # `nohup bash recipes/x.sh > x.log 2>&1 &`: the recipe and its arguments
                if word.startswith((">", "&", "2>")):
                    args = args[:j]
                    break
            found.append((command, [w for w in words[:i] if "=" in w], args))
    return found


LINES = readme_recipe_lines()
README_LINES = {command for page, command in documented_commands() if page == "README.md"}


@pytest.fixture(scope="module")
def fresh_copy(tmp_path_factory):
    """The repository as ``git clone`` gives it (no runs/, nothing built), and a user's own parallel text where
    the documentation's lines for recipes/parallel_text.sh name it: corpus/train.{en,de} and corpus/pairs.tsv,
    12,000 pairs; the published models they fine-tune, opus-mt-en-de, nllb-200-distilled-600M and m2m100_418M; and a
    GPU machine's speed file, speeds.json."""
    copy = copy_repository(tmp_path_factory.mktemp("fresh"))
    (copy / "corpus").mkdir()
    pairs = [
        (f"This is sentence number {i} of the corpus.", f"Das ist Satz Nummer {i} des Korpus.") for i in range(12000)
    ]
    corpus(copy / "corpus", pairs, tsv="pairs.tsv")
    marian_directory(copy / "opus-mt-en-de")  # INIT=opus-mt-en-de: a MarianMT directory, tiny, as the hub's would be
    m2m100_directory(copy / "nllb-200-distilled-600M", "nllb")  # NLLB's and M2M100's, tiny, in their shapes
    m2m100_directory(copy / "m2m100_418M", "m2m100")
    # SPEED_FILE=speeds.json: as vaswani-speed-probe file --parent nllb-200-distilled-600M writes it on a GPU machine
    speed_file(copy / "speeds.json", parents=[copy / "nllb-200-distilled-600M"])
    return copy


@pytest.fixture(scope="module", autouse=True)
def speed_figures(tmp_path_factory, fresh_copy):
    """The speed probe's figures (recipes/parallel_text.sh's dry runs say how long training takes here) kept for
    this module, as a machine that probed the full-size models and the parent opus-mt-en-de before keeps them
    (helpers.known_speed_figures: the dry runs read them back, where each would time a model for 15 to 30 seconds),
    and nothing is written to the user's ~/.cache."""
    cache = tmp_path_factory.mktemp("cache")
    known_speed_figures(cache, vocab=8000, parents=[fresh_copy / "opus-mt-en-de"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        yield cache / "transformer_plugin" / "speed.json"


def run(args, cwd, env, timeout=300):
    """subprocess.run that, on a timeout, stops the recipe's whole process group (workers included)."""
    with subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("line, assignments, words", LINES, ids=[line for line, _, _ in LINES])
def test_readme_recipe_line_dry_runs_as_typed(fresh_copy, speed_figures, line, assignments, words):
    dry = [] if "--dry-run" in words else ["--dry-run"]
    before, figures = set(os.listdir(fresh_copy)), speed_figures.read_text()
    proc = run(["bash", *words, *dry], fresh_copy, user_env(assignments))
    assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert re.search(r"^\+ ", proc.stdout, flags=re.M), f"{line}: --dry-run printed no command"
    assert "FAILED" not in proc.stderr
    # it read the figures the fixture gave and timed no model (15 to 30 s a line, on every Python CI tries)
    assert speed_figures.read_text() == figures, (
        f"{line}: the dry run timed a model: give helpers.known_speed_figures its figure"
    )
    written = set(os.listdir(fresh_copy)) - before
    if written == {"runs"} and any(
        w.endswith(("parallel_text.sh", "finetune.sh")) for w in words
    ):  # its plan (WORK/plan.json), as the dry run promises; no more
        files = [
            os.path.relpath(os.path.join(d, f), fresh_copy) for d, _, fs in os.walk(fresh_copy / "runs") for f in fs
        ]
        assert [os.path.basename(f) for f in files] == ["plan.json"], f"{line}: --dry-run wrote {files}"
        shutil.rmtree(fresh_copy / "runs")
        written = set()
    assert not written, f"{line}: --dry-run wrote {written}"


RECIPES = sorted(
    name
    for name in os.listdir(os.path.join(REPO, "recipes"))
    if name.endswith(".sh") and name not in ("lib.sh", "wmt14.sh", "parallel_text_common.sh")
)  # those three are sourced; the rest of recipes/ is their Python


@pytest.mark.parametrize("script", RECIPES)
def test_every_recipe_dry_runs_with_no_variables_set(fresh_copy, script):
    """``bash recipes/NAME.sh --dry-run`` with nothing set but what the recipe cannot guess (the licensed treebank, your
    corpus, the parent to fine-tune)."""
    needs = {
        "wsj_parsing.sh": ["TREEBANK=/data/treebank_3/parsed/mrg"],
        "parallel_text.sh": ["TRAIN=corpus/train", "SRC=en", "TGT=de"],
        "finetune.sh": ["INIT=opus-mt-en-de", "TRAIN=corpus/train", "SRC=en", "TGT=de"],
    }.get(script, [])
    proc = run(["bash", f"recipes/{script}", "--dry-run"], fresh_copy, user_env(needs))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^\+ ", proc.stdout, flags=re.M)
    # every stage says what it writes, so that a change redoes only the stages that read it
    assert "it declares no outputs" not in proc.stdout
    help_text = run(["bash", f"recipes/{script}", "--help"], fresh_copy, user_env([]), timeout=60)
    assert help_text.returncode == 0 and "--dry-run" in help_text.stdout


@pytest.mark.parametrize(
    "script, variables, says",
    [
        ("wmt14_en_de_big.sh", {"PRECISION": "fp8"}, "FAILED: recipes/wmt14_en_de_big.sh (exit 2)"),
        ("wmt14_table3.sh", {"ROWS": "base F-nonsense"}, "FAILED: recipes/wmt14_table3.sh line "),
        ("wsj_parsing.sh", {}, "FAILED: recipes/wsj_parsing.sh (exit 2)"),  # no TREEBANK
        # a parent given to the recipe that trains from nothing: the recipe that fine-tunes, named at once
        (
            "parallel_text.sh",
            {"INIT": "opus-mt-en-de", "TRAIN": "corpus/train", "SRC": "en", "TGT": "de"},
            "fine-tuning a published model is recipes/finetune.sh, which takes the same variables: INIT=opus-mt-en-de",
        ),
    ],
)
def test_a_failing_recipe_says_where(fresh_copy, script, variables, says):
    proc = run(
        ["bash", f"recipes/{script}", "--dry-run"], fresh_copy, user_env(f"{k}={v}" for k, v in variables.items())
    )
    assert proc.returncode != 0
    assert says in proc.stderr, proc.stderr


@pytest.mark.parametrize("part", ["wmt14.sh", "parallel_text_common.sh"])
def test_a_part_of_recipes_run_alone_names_the_recipes_to_run(fresh_copy, part):
    """The files the recipes source, run as a recipe is, stop and say which recipes they are part of."""
    proc = run(["bash", f"recipes/{part}", "--dry-run"], fresh_copy, user_env([]), timeout=60)
    assert proc.returncode == 2 and f"recipes/{part} is " in proc.stderr and "run one" in proc.stderr, proc.stderr


def test_finetune_without_its_variables_names_them_and_a_dry_run_shows_what_it_reads(fresh_copy):
    dry = run(["bash", "recipes/finetune.sh", "--dry-run"], fresh_copy, user_env([]), timeout=60)
    assert dry.returncode == 0 and "INIT, TRAIN, SRC and TGT are needed" in dry.stdout
    assert re.search(r"^  REPLAY_RATIO +\[1\] ", dry.stdout, flags=re.M), dry.stdout
    real = run(["bash", "recipes/finetune.sh"], fresh_copy, user_env([]), timeout=60)
    assert real.returncode == 2 and "INIT, TRAIN, SRC and TGT are needed" in real.stderr


# ---- the README's fairseq commands, on the data of the En-De recipe at toy size ------------------------------

# the only changes made to the README's lines: toy size for what takes days
TOY_SIZE = {
    "--arch": "vaswani_tiny",
    "--max-update": "20",
    "--warmup-updates": "10",
    "--save-interval-updates": "4",
    "--max-tokens": "1500",
}


def readme_tool_lines():
    """The README's commands that run fairseq's or this project's tools, in order."""
    return [
        command
        for page, command in documented_commands()
        if page == "README.md" and command.split()[0].startswith(("fairseq-", "vaswani-"))
    ]


def at_toy_size(line):
    words = shlex.split(line, posix=True)
    for i, word in enumerate(words[:-1]):
        if word in TOY_SIZE:
            words[i + 1] = TOY_SIZE[word]
    # the words back into a shell line, keeping its redirections
    return " ".join(w if w in ("<", ">") else shlex.quote(w) for w in words)


@pytest.mark.e2e
def test_the_readmes_fairseq_commands_run_on_the_recipes_data(tmp_path):
    """The README's DATA_ONLY line at toy size (WORK as at full size), then each of its fairseq and vaswani-*
    lines as typed but for TOY_SIZE, from a fresh copy of the repository: the paths they name are the ones
    the recipe writes, and each works on the output of the one before."""
    copy = copy_repository(tmp_path)
    [(_, assignments, words)] = [found for found in LINES if "DATA_ONLY=1" in found[1] and found[0] in README_LINES]
    data = run(
        ["bash", *words], copy, user_env([*assignments, "TOY=1", "IGNORE_PINNED_MD5=1", "WORK=runs/wmt14_en_de"])
    )
    assert data.returncode == 0 and "DATA_ONLY=1: the data is ready in runs/wmt14_en_de/data-bin" in data.stdout, (
        data.stderr[-2000:]
    )
    lines = readme_tool_lines()
    assert [line.split()[0] for line in lines] == [
        "fairseq-train",
        "vaswani-average-checkpoints",
        "fairseq-generate",
        "vaswani-evaluate",
        "vaswani-export-ct2",
        "vaswani-translate",
        "vaswani-export-hf",
    ]
    (copy / "runs" / "mine").mkdir()
    for line in lines:
        proc = run(["bash", "-c", at_toy_size(line)], copy, user_env([]), timeout=600)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        if line.startswith("vaswani-evaluate"):
            assert "BLEU" in proc.stdout
    test_en = (copy / "runs" / "wmt14_en_de" / "data" / "test.en").read_text().splitlines()
    assert len((copy / "runs" / "mine" / "test.de").read_text().splitlines()) == len(test_en)
    assert (copy / "runs" / "mine" / "hf" / "config.json").exists()


# ---- the README as a front page -------------------------------------------------------------------


def heading_anchors(path):
    """GitHub's anchors of a markdown page's headings."""
    with open(path, encoding="utf-8") as f:
        headings = re.findall(r"^#+ (.*)$", f.read(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_a_front_page_whose_links_lead_somewhere():
    """At most 200 lines (the reference material is under docs/); every relative link of the README and of
    the reference pages names a file that exists, and a heading of it where it names one."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 200
    for page in documents():
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            links = re.findall(r"\]\(([^)\s]+)\)", f.read())
        for link in links:
            if re.match(r"^[a-z]+://", link):
                continue
            target, _, anchor = link.partition("#")
            path = (
                os.path.normpath(os.path.join(REPO, os.path.dirname(page), target))
                if target
                else os.path.join(REPO, page)
            )
            assert os.path.exists(path), f"{page}: {link} leads nowhere"
            if anchor:
                assert anchor in heading_anchors(path), f"{page}: {link}: no such heading"


def test_the_tested_pythons_are_the_ones_setup_py_allows():
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
        supported = re.search(r"^SUPPORTED_PYTHONS := (.*)$", f.read(), flags=re.M).group(1).split()
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
        allowed = re.search(r'python_requires="([^"]*)"', f.read()).group(1)
    low, high = re.fullmatch(r">=(3\.\d+),<(3\.\d+)", allowed).groups()
    assert supported == [f"3.{m}" for m in range(int(low.split(".")[1]), int(high.split(".")[1]))]
    assert sys.version_info[:2] >= (3, int(low.split(".")[1]))


def test_the_docs_are_reference_pages_and_history_is_the_changelogs():
    """A page under docs/ says what is true now: none is a dated page of how it was found (that is git's and
    CHANGELOG.md's), and CHANGELOG.md names the commits that hold the detail, each one of this repository."""
    dated = [f for f in os.listdir(os.path.join(REPO, "docs")) if re.match(r"\d{4}-\d\d-\d\d", f)]
    assert not dated, f"dated pages under docs/: {dated}; fold them into CHANGELOG.md"
    changelog = open(os.path.join(REPO, "CHANGELOG.md"), encoding="utf-8").read()
    commits = set(re.findall(r"\(([0-9a-f]{7})[,)]", changelog))
    assert len(commits) >= 10
    if os.path.isdir(os.path.join(REPO, ".git")):
        known = subprocess.run(
            ["git", "cat-file", "--batch-check"], input="\n".join(commits), cwd=REPO, capture_output=True, text=True
        ).stdout
        assert "missing" not in known, known


def test_each_reference_page_is_short_and_undated():
    """A page under docs/ has at most 250 lines and says what holds: a date only in a table whose column says
    "measured" (when a figure was measured); history is git's and CHANGELOG.md's."""
    for name in sorted(os.listdir(os.path.join(REPO, "docs"))):
        if not name.endswith(".md"):
            continue
        with open(os.path.join(REPO, "docs", name), encoding="utf-8") as f:
            lines = f.read().splitlines()
        assert len(lines) <= 250, f"docs/{name}: {len(lines)} lines; split it"
        header = ""
        for number, line in enumerate(lines, 1):
            header = (
                line if line.startswith("|") and not header.startswith("|") else header if line.startswith("|") else ""
            )
            dated = re.search(r"\b20\d\d-[01]\d-[0-3]\d\b", line)
            assert not dated or "measured" in header.lower(), (
                f"docs/{name}:{number}: a date, {dated[0]}, outside a measured column"
            )
