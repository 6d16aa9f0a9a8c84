"""The packages' layout: the plugin holds what --user-dir registers, registered on import; the data
preparation (preprocess) and the tools on models and outputs (transformer_plugin_cli) are sibling
packages, each module with a main() a console script; those that need no model start without fairseq."""

import ast
import importlib
import importlib.metadata
import os
import pkgutil
import subprocess
import sys

import pytest

from helpers import REPO

LIGHT_TOOLS = [
    "transformer_plugin_cli.parsing.evalb", "transformer_plugin_cli.parsing.trees",
    "transformer_plugin_cli.tools.table3", "transformer_plugin_cli.tools.evaluate", "transformer_plugin_cli.tools.user_dir",
    "transformer_plugin_cli.paper", "transformer_plugin_cli.fairseq_output", "transformer_plugin_cli.files",
    "preprocess.wmt14", "preprocess.synthetic_pair", "preprocess.sentencepiece_vocab", "preprocess.debian_l10n",
    "preprocess.ptb", "preprocess.parallel_text",
]  # fmt: skip
PACKAGES = ("preprocess", "transformer_plugin_cli")  # the ones with console scripts


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
    code = "; ".join(imports[::-1] if fairseq_first else imports) + """
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.optim.lr_scheduler import LR_SCHEDULER_REGISTRY
import fairseq.checkpoint_utils as cu
print('vaswani_big' in ARCH_MODEL_REGISTRY, 'vaswani_label_smoothed_cross_entropy' in CRITERION_REGISTRY,
      'vaswani_inverse_sqrt' in LR_SCHEDULER_REGISTRY, bool(getattr(cu.load_checkpoint_to_cpu, '__transformer_plugin_patch__', False)))"""
    assert python(code).splitlines()[-1] == "True True True True"


def test_the_papers_flags_print_without_fairseq():
    """The recipes ask for them while they plan every stage: Table 3's 20 rows, each planned twice."""
    out = python("import sys; from transformer_plugin_cli import paper; paper.main(['decoding']); print('fairseq' in sys.modules)")
    assert out.splitlines() == ["--beam", "4", "--lenpen", "0.6", "--max-len-a", "1", "--max-len-b", "50", "False"]
    out = python("import sys; from transformer_plugin_cli import paper; paper.main(['training']); print('fairseq' in sys.modules)")
    assert out.splitlines()[-6:-1] == ["4000", "--criterion", "vaswani_label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
    assert out.splitlines()[-1] == "False"


def test_the_plugin_holds_what_user_dir_registers_and_nothing_else():
    root = os.path.join(REPO, "transformer_plugin")
    entries = sorted(e for e in os.listdir(root) if not e.startswith((".", "__pycache__")))
    assert entries == ["__init__.py", "architectures.py", "config.py", "criterions", "lr_scheduler", "models", "modules", "patches"]


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
    scripts = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts") if e.name.startswith("vaswani-")}
    assert {value.split(":")[0] for value in scripts.values()} == set().union(*map(_tool_modules, PACKAGES))
    assert all(value.endswith(":main") for value in scripts.values())
    for package in PACKAGES:
        docstring = importlib.import_module(package).__doc__
        listed = {word for line in docstring.splitlines() for word in line.split() if word.startswith("vaswani-")}
        assert listed == {name for name, value in scripts.items() if value.startswith(f"{package}.")}, package


def test_the_top_level_is_the_designs():
    """transformer_plugin/, preprocess/, recipes/, tests/, setup.py, README.md (and the rest beside them)."""
    for entry in ("transformer_plugin", "preprocess", "recipes", "tests", "setup.py", "README.md"):
        assert os.path.exists(os.path.join(REPO, entry)), entry
    modules = sorted(f for f in os.listdir(os.path.join(REPO, "preprocess")) if f.endswith(".py"))
    assert modules == ["__init__.py", "debian_l10n.py", "parallel_text.py", "ptb.py", "sentencepiece_vocab.py",
                       "shards.py", "synthetic_pair.py", "wmt14.py"]  # fmt: skip
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
    result = subprocess.run([os.path.join(os.path.dirname(sys.executable), name), *args], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    if name == "vaswani-user-dir":
        assert result.stdout.strip() == os.path.join(REPO, "transformer_plugin")
    if name == "vaswani-paper-flags":
        assert "--warmup-updates\n4000\n" in result.stdout and "--label-smoothing\n0.1" in result.stdout
