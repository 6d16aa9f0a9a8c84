"""recipes/planner/settings.py and paper_settings.py, the one home of the recipes' variables: each default a recipe
shows at its top is the one declared for it, each declared variable is read by the recipes it names, the stamps' list
of settings is the declared list, --help lists them, and the parallel-text recipes' plan reads its defaults and checks
there."""

import os
import re
import subprocess

import pytest
from helpers import REPO, user_env

from recipes.engine.__main__ import recipe_settings
from recipes.engine.stamps import setting_names
from recipes.planner.plan import PlanError
from recipes.planner.declarations import declared, help_table
from recipes.planner.settings import BY_NAME, PRECISIONS, precision_args
from recipes.planner.variables import SETTINGS, Variables, check_choices, check_settings

COMMON = os.path.join(REPO, "recipes", "parallel_text_common.sh")
WMT14 = os.path.join(REPO, "recipes", "wmt14.sh")
FILES = {
    "parallel_text": [COMMON, os.path.join(REPO, "recipes", "parallel_text.sh")],
    "finetune": [COMMON, os.path.join(REPO, "recipes", "finetune.sh")],
    **{
        name: [os.path.join(REPO, "recipes", f"{name}.sh"), WMT14]
        for name in ("wmt14_en_de_base", "wmt14_en_de_big", "wmt14_en_fr_base", "wmt14_en_fr_big")
    },
    "wsj_parsing": [os.path.join(REPO, "recipes", "wsj_parsing.sh")],
}


def shown(path):
    """{NAME: default} of each ``NAME=${NAME:-default}`` (at toy size ``NAME=${TOY_NAME:-default}``, TOY_NAME's) of a
    recipe's file, the default as the shell sees it; of two, the last (the one that holds once both have run)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = re.findall(r"(?<![\w$])([A-Z][A-Z0-9_]*)=\$\{((?:TOY_)?\1):-(.*?)\}(?=[\s;]|$)", text, flags=re.M)
    return {variable: default for _, variable, default in found}


@pytest.mark.parametrize("recipe", sorted(FILES))
def test_the_recipes_top_shows_the_declared_defaults(recipe):
    mine = {s.name: s for s in declared(recipe)}
    assert len(mine) == len(declared(recipe)), f"{recipe}: a variable declared twice for it"
    seen = {}
    for path in FILES[recipe]:
        for name, default in shown(path).items():
            assert name in mine, f"{os.path.relpath(path, REPO)}: {name} is not declared for {recipe}"
            assert default == (mine[name].shell or mine[name].default), f"{os.path.relpath(path, REPO)}: {name}"
            seen[name] = default
    assert set(seen) == set(mine)


@pytest.mark.parametrize("recipe", sorted(FILES))
def test_the_stamps_list_of_settings_is_the_declared_one(recipe):
    assert recipe_settings(recipe, FILES[recipe]) == sorted({s.name for s in declared(recipe)})
    assert set(setting_names(FILES[recipe])) <= set(recipe_settings(recipe, FILES[recipe]))  # the top's, and TOY_*
    assert recipe_settings("my_recipe", FILES[recipe]) == setting_names(FILES[recipe])  # a recipe not declared


def test_precision_names_give_fairseq_train_flags():
    assert [precision_args(p) for p in PRECISIONS] == [[], ["--fp16"], ["--bf16"], ["--amp"]]
    with pytest.raises(PlanError, match=r"PRECISION=fp8: use fp32, fp16, bf16 or amp"):
        check_choices(Variables({"PRECISION": "fp8"}), declared("wsj_parsing"))
    check_choices(Variables({"PRECISION": ""}), declared("wsj_parsing"))  # unset: fp32


@pytest.mark.parametrize("recipe", sorted(FILES))
def test_help_lists_every_variable_with_its_default(recipe):
    proc = subprocess.run(
        ["bash", f"recipes/{recipe}.sh", "--help"], cwd=REPO, env=user_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert help_table(recipe) in proc.stdout
    for s in declared(recipe):
        assert re.search(rf"^  {s.name} ", proc.stdout, flags=re.M), s.name
    average = {"wmt14_en_de_big": "20", "wmt14_en_fr_big": "20"}.get(recipe, "5")  # each recipe's own default
    assert re.search(rf"^  AVERAGE_LAST +\[{average}\] ", proc.stdout, flags=re.M)


def test_the_plan_reads_its_defaults_and_checks_where_they_are_declared(monkeypatch):
    v = Variables({"TOY": "1"})
    assert v.get("PRECISION") == "fp32" and v.number("AVERAGE_LAST") == 5 and v.number("TOY_MAX_UPDATE") == 300
    assert v.number("MAX_UPDATE") is None and v.given("TOY_MAX_UPDATE") == ""
    with pytest.raises(PlanError, match=r"AVERAGE_LAST=0: a whole number of 1 or more"):
        Variables({"AVERAGE_LAST": "0"}).number("AVERAGE_LAST")
    with pytest.raises(PlanError, match=r"PRECISION=fp8: use fp32, fp16, bf16 or amp"):
        check_settings(Variables({"PRECISION": "fp8"}))
    monkeypatch.setitem(BY_NAME, "AVERAGE_LAST", BY_NAME["AVERAGE_LAST"].__class__("AVERAGE_LAST", "7", "h"))
    assert Variables({}).number("AVERAGE_LAST") == 7  # read where it is declared, nowhere else
    assert "TIME" in SETTINGS and "SEED" not in SETTINGS  # what decides another plan, and what goes to the stages
