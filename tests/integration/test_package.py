"""The packages' layout: the plugin holds what --user-dir registers, registered on import; the data
preparation (preprocess) and the tools on models and outputs (transformer_plugin_cli) are sibling
packages, each module with a main() a console script; those that need no model start without fairseq."""

import ast
import importlib
import importlib.metadata
import os
import pkgutil
import struct
import subprocess
import sys

import pytest

from helpers import BIN, PLUGIN, REPO, TRAIN_FLAGS, user_env

LIGHT_TOOLS = [
    "transformer_plugin_cli.parsing.evalb",
    "transformer_plugin_cli.parsing.trees",
    "transformer_plugin_cli.tools.table3",
    "transformer_plugin_cli.tools.evaluate",
    "transformer_plugin_cli.tools.user_dir",
    "transformer_plugin_cli.paper",
    "transformer_plugin_cli.fairseq_output",
    "transformer_plugin_cli.files",
    "preprocess.wmt14",
    "preprocess.synthetic_pair",
    "preprocess.sentencepiece_vocab",
    "preprocess.debian_l10n",
    "preprocess.ptb",
    "preprocess.parallel_text",
]
PACKAGES = ("recipes", "preprocess", "transformer_plugin_cli")  # the ones with console scripts


def python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("tool", LIGHT_TOOLS)
def test_tools_that_do_not_need_fairseq_do_not_import_it(tool):
    assert python(f"import sys, {tool}; print('fairseq' in sys.modules)") == "False"


@pytest.mark.parametrize("fairseq_first", [False, True])
def test_fairseq_finds_the_plugin_registered_whichever_is_imported_first(fairseq_first):
    imports = ["import transformer_plugin", "import fairseq.models, fairseq.criterions, fairseq.optim.lr_scheduler"]
    code = (
        "; ".join(imports[::-1] if fairseq_first else imports)
        + """
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.optim.lr_scheduler import LR_SCHEDULER_REGISTRY
import fairseq.checkpoint_utils as cu
print('vaswani_big' in ARCH_MODEL_REGISTRY, 'vaswani_label_smoothed_cross_entropy' in CRITERION_REGISTRY,
      'vaswani_inverse_sqrt' in LR_SCHEDULER_REGISTRY,
      bool(getattr(cu.load_checkpoint_to_cpu, '__transformer_plugin_patch__', False)))"""
    )
    assert python(code).splitlines()[-1] == "True True True True"


def test_the_papers_flags_print_without_fairseq():
    """The recipes ask for them while they plan every stage: Table 3's 20 rows, each planned twice."""
    out = python(
        "import sys; from transformer_plugin_cli import paper; paper.main(['decoding']); print('fairseq' in "
        "sys.modules)"
    )
    assert out.splitlines() == ["--beam", "4", "--lenpen", "0.6", "--max-len-a", "1", "--max-len-b", "50", "False"]
    out = python(
        "import sys; from transformer_plugin_cli import paper; paper.main(['training']); print('fairseq' in "
        "sys.modules)"
    )
    assert out.splitlines()[-6:-1] == [
        "4000",
        "--criterion",
        "vaswani_label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
    ]
    assert out.splitlines()[-1] == "False"


def test_the_plugin_holds_what_user_dir_registers_and_nothing_else():
    root = os.path.join(REPO, "transformer_plugin")
    entries = sorted(e for e in os.listdir(root) if not e.startswith((".", "__pycache__")))
    assert entries == [
        "__init__.py",
        "architectures.py",
        "config.py",
        "criterions",
        "lr_scheduler",
        "models",
        "modules",
        "patches",
    ]


def _tool_modules(package):
    """The package's modules that define main(), by their source (nothing imported)."""
    root = os.path.join(REPO, package)
    found = set()
    for info in pkgutil.walk_packages([root], prefix=f"{package}."):
        path = os.path.join(REPO, *info.name.split(".")) + ("/__init__.py" if info.ispkg else ".py")
        tree = ast.parse(open(path, encoding="utf-8").read())
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
            found.add(info.name)
    return found


def test_every_tool_is_a_console_script_named_in_its_package_docstring():
    scripts = {
        e.name: e.value
        for e in importlib.metadata.entry_points(group="console_scripts")
        if e.name.startswith("vaswani-")
    }
    assert {value.split(":")[0] for value in scripts.values()} == set().union(*map(_tool_modules, PACKAGES))
    assert all(value.endswith(":main") for value in scripts.values())
    for package in PACKAGES:
        docstring = importlib.import_module(package).__doc__
        listed = {word for line in docstring.splitlines() for word in line.split() if word.startswith("vaswani-")}
        assert listed == {name for name, value in scripts.items() if value.startswith(f"{package}.")}, package


# the recipes' Python, one job a module (recipes/__init__.py lists them): what a newcomer reads to change a decision
MODULE_LINES, FUNCTION_LINES = 400, 80


def test_the_recipes_python_is_short_modules_of_short_functions():
    """No module of recipes/ over MODULE_LINES lines and no function over FUNCTION_LINES: a module does one job, and
    a decision is read in one screen."""
    long = []
    for directory, _, files in os.walk(os.path.join(REPO, "recipes")):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            where = os.path.relpath(path, REPO)
            if source.count("\n") > MODULE_LINES:
                long.append(f"{where}: {source.count(chr(10))} lines")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > FUNCTION_LINES:
                        long.append(f"{where}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "\n".join(long)


def test_the_top_level_is_the_designs():
    """transformer_plugin/, preprocess/, recipes/ (the scripts and their Python), tests/, setup.py, README.md (and the
    rest beside them); no second folder of the recipes' Python a letter apart from it."""
    for entry in ("transformer_plugin", "preprocess", "recipes", "tests", "setup.py", "README.md"):
        assert os.path.exists(os.path.join(REPO, entry)), entry
    assert not os.path.exists(os.path.join(REPO, "recipe"))
    modules = sorted(f for f in os.listdir(os.path.join(REPO, "preprocess")) if f.endswith(".py"))
    assert modules == [
        "__init__.py",
        "cleaning.py",
        "corpora.py",
        "debian_l10n.py",
        "parallel_text.py",
        "ptb.py",
        "sentencepiece_vocab.py",
        "shards.py",
        "synthetic_pair.py",
        "wmt14.py",
    ]
    tests = sorted(f for f in os.listdir(os.path.join(REPO, "tests", "unit", "preprocess")) if f.endswith(".py"))
    assert tests == [f"test_{m}" for m in modules[1:]]  # mirrored


def test_the_tools_never_import_the_data_preparation():
    root = os.path.join(REPO, "transformer_plugin_cli")
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                tree = ast.parse(open(os.path.join(directory, name), encoding="utf-8").read())
                imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
                imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
                assert not [m for m in imported if m.split(".")[0] == "preprocess"], os.path.join(directory, name)


@pytest.mark.parametrize("script", ["vaswani-user-dir", "vaswani-evalb --help", "vaswani-paper-flags training"])
def test_console_scripts_run(script):
    name, *args = script.split()
    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), name), *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    if name == "vaswani-user-dir":
        assert result.stdout.strip() == os.path.join(REPO, "transformer_plugin")
    if name == "vaswani-paper-flags":
        assert "--warmup-updates\n4000\n" in result.stdout and "--label-smoothing\n0.1" in result.stdout


# ---- the import graph: the contracts of .importlinter, private names, the plugin alone ---------------


def test_the_import_graph_keeps_its_contracts():
    """import-linter's reading of every import (in functions too) against .importlinter: the packages in layers
    (benchmarks, the recipes' Python, preprocess, the tools, the plugin, each importing only those below it), the plugin
    importing none of the others, and no cycle among the modules or subpackages of any package."""
    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "lint-imports"), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in result.stdout


@pytest.mark.parametrize("check", [["format", "--check"], ["check"]], ids=["formatted", "linted"])
def test_the_code_is_as_the_formatter_and_the_linter_leave_it(check):
    """make lint: ``ruff format --check`` and ``ruff check`` over the whole checkout, as pyproject.toml configures them
    (120 columns; pyflakes and pycodestyle): a file the formatter would change, or a warning, fails here."""
    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    result = subprocess.run([ruff, *check, "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"`make format` mends it:\n{result.stdout[-3000:]}{result.stderr[-2000:]}"


def imported_names(path):
    """(module, name) of each ``from module import name`` in the file at ``path``, in functions too, with the
    module of a relative import made absolute."""
    package = os.path.relpath(os.path.dirname(path), REPO).replace(os.sep, ".")
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(module, alias.name) for alias in node.names]
    return found


def test_no_private_name_is_imported_from_another_package():
    """A name with a leading underscore is its package's own: another top-level package that needs it gets a public
    name. (Within one package a private module's names are shared, as patches/_units.py's; tests may reach in.)"""
    crossing = []
    private = lambda name: name.startswith("_") and not (name.endswith("__") and len(name) > 4)  # noqa: E731
    for package in ("transformer_plugin", "transformer_plugin_cli", "preprocess", "recipes", "benchmarks"):
        for directory, _, files in os.walk(os.path.join(REPO, package)):
            for name in (f for f in files if f.endswith(".py")):
                path = os.path.join(directory, name)
                for module, imported in imported_names(path):
                    top = module.split(".")[0]
                    if (
                        top != package
                        and top in PACKAGES + ("transformer_plugin", "benchmarks")
                        and (private(imported) or any(map(private, module.split("."))))
                    ):
                        crossing.append(f"{os.path.relpath(path, REPO)}: from {module} import {imported}")
    assert not crossing, "\n".join(crossing)


# what makes the copy the only transformer_plugin there is: this environment's editable install of the project
# (a finder on sys.meta_path) taken away, and the project's other packages made unimportable
ALONE = """
import importlib.abc, sys
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()

class NotInTheCopy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("transformer_plugin_cli", "preprocess", "recipes", "benchmarks"):
            raise ModuleNotFoundError(f"No module named {name!r} (the plugin was copied alone)", name=name)

sys.meta_path.insert(0, NotInTheCopy())
sys.argv = ["fairseq-train", *sys.argv[1:]]
from fairseq_cli.train import cli_main
cli_main()
print("plugin loaded from", sys.modules["transformer_plugin"].__file__)
"""


def test_the_plugin_copied_alone_trains_with_user_dir(data_bin, tmp_path):
    """``transformer_plugin/`` copied alone into an empty folder, as --user-dir invites, is all fairseq-train
    needs: a few updates of vaswani_tiny with the plugin's criterion and schedule, from the copy."""
    import shutil

    alone = tmp_path / "elsewhere"
    shutil.copytree(PLUGIN, alone / "transformer_plugin", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            ALONE,
            str(data_bin / "bin"),
            "--user-dir",
            str(alone / "transformer_plugin"),
            *TRAIN_FLAGS,
            "--max-update",
            "3",
            "--save-dir",
            str(tmp_path / "ckpt"),
            "--no-epoch-checkpoints",
            "--disable-validation",
        ],
        cwd=alone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"plugin loaded from {alone}/transformer_plugin/__init__.py" in output
    assert "num_updates=3" in output.replace(" ", "") or "done training" in output
    assert (tmp_path / "ckpt" / "checkpoint_last.pt").exists()


# ---- output closed early: every command ends quietly (transformer_plugin_cli/console.py) -----------------


def vaswani_scripts():
    return {
        e.name: e for e in importlib.metadata.entry_points(group="console_scripts") if e.name.startswith("vaswani-")
    }


def test_every_command_is_a_console_script_of_console_py():
    """Each main that a vaswani-* script calls is wrapped by ``@console_script`` (one place for all)."""
    unwrapped = [
        name for name, entry in vaswani_scripts().items() if not getattr(entry.load(), "__console_script__", False)
    ]
    assert not unwrapped


def printing_commands(tmp_path):
    """Commands that print with no input but what is written here: the lists and flags, a synthetic pair, the
    scores of a parse and of fairseq-generate's output. (argparse's --help would not do: argparse itself ignores
    an error writing its help.)"""
    (tmp_path / "gold").write_text("(S (NP (DT a) (NN b)) (VP (VBZ c)))\n" * 3)
    (tmp_path / "generate.out").write_text("".join(f"S-{i}\tein Satz\nD-{i}\t-0.5\ta sentence\n" for i in range(3)))
    (tmp_path / "reference").write_text("a sentence\n" * 3)
    return [
        ["vaswani-user-dir"],
        ["vaswani-paper-flags", "training"],
        ["vaswani-paper-flags", "decoding"],
        ["vaswani-prepare-debian-l10n", "packages"],
        ["vaswani-table3", "rows"],
        ["vaswani-table3", "plan"],
        ["vaswani-synthetic-pair", "--out-dir", str(tmp_path / "pair"), "--train", "50", "--valid", "5", "--test", "5"],
        ["vaswani-evalb", "--gold", str(tmp_path / "gold"), "--test", str(tmp_path / "gold")],
        [
            "vaswani-evaluate",
            "--generate-output",
            str(tmp_path / "generate.out"),
            "--reference",
            str(tmp_path / "reference"),
        ],
    ]


def test_commands_end_quietly_when_their_output_is_closed_early(tmp_path):
    """``vaswani-prepare-debian-l10n packages | head -1`` once head has gone: each command's standard output is
    a pipe whose reading end is closed before it starts, so that its first write fails, whenever it comes:
    status 141 and nothing on standard error. All at once (their start-ups overlap). The commands that need a
    model or a corpus share the same wrapper (the test above)."""
    read, write = os.pipe()
    os.close(read)
    runs = {}
    try:
        for name, *args in printing_commands(tmp_path):
            runs[" ".join([name, *args])] = subprocess.Popen(
                [os.path.join(BIN, name), *args], stdout=write, stderr=subprocess.PIPE, text=True
            )
    finally:
        os.close(write)
    results = {command: (proc.wait(timeout=300), proc.stderr.read()) for command, proc in runs.items()}
    assert {command: result for command, result in results.items() if result != (141, "")} == {}


def test_a_command_piped_into_head_prints_its_first_lines_and_no_error():
    """The same through the shell, as typed: head's lines, and nothing else on the terminal."""
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", "vaswani-prepare-debian-l10n packages | head -2"],
        capture_output=True,
        text=True,
        timeout=120,
        env=user_env(),
    )
    assert len(result.stdout.splitlines()) == 2 and result.stderr == "" and result.returncode in (0, 141)


def elf_section_names(path) -> list:
    """The section names of a 64-bit little-endian ELF file: its section headers and their name table."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x7fELF\x02\x01", f"{path}: not a 64-bit little-endian ELF file"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [
        struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]  # name, type, flags, addr, offset, size
    table = headers[shstrndx][4]
    return [data[table + name : data.index(b"\0", table + name)].decode() for name, *_ in headers]


def test_fairseqs_extensions_built_here_carry_no_debug_information():
    """make install builds fairseq-fixed's six extensions from its sdist with Python's compiler flags and then
    FAIRSEQ_CFLAGS=-g0: the same machine code without the debug information, in 40% less CPU (the Makefile). A
    wheel from the index (PyPI has one for Python 3.12) is as its makers built it; FAIRSEQ_CFLAGS= fails here."""
    dist = importlib.metadata.distribution("fairseq-fixed")
    tags = [line.split(": ", 1)[1] for line in dist.read_text("WHEEL").splitlines() if line.startswith("Tag: ")]
    if not all(tag.split("-")[2].startswith("linux_") for tag in tags):
        pytest.skip(f"fairseq-fixed was installed from a wheel built elsewhere ({', '.join(tags)})")
    extensions = [f for f in dist.files if f.name.endswith(".so")]
    assert len(extensions) == 6, extensions
    for extension in extensions:
        names = elf_section_names(dist.locate_file(extension))
        debug = [n for n in names if n.startswith(".debug")]
        assert ".text" in names and not debug, (
            f"{dist.locate_file(extension)} has {', '.join(debug)}: fairseq was built with FAIRSEQ_CFLAGS= or before "
            "the "
            f"Makefile added -g0 (2026-11-29); `{sys.executable} -m pip uninstall -y fairseq-fixed && rm "
            f"{sys.prefix}/.installed`, "
            "then make install, builds it again"
        )
