"""benchmarks.common: the environment and the start of the parallel-text recipe that the benchmarks share."""

import os

from benchmarks.common import BIN, recipe_env, start_recipe


def test_the_environment_lays_settings_in_turn_and_drops_a_budget_from_the_shell(monkeypatch):
    monkeypatch.setenv("TIME", "8h")
    monkeypatch.setenv("MAX_UPDATE", "7")
    env = recipe_env({"WORK": "/a", "SRC": "en"}, {"WORK": "/b"})
    assert (env["WORK"], env["SRC"], env["EXPORT"], env["PYTHONUNBUFFERED"]) == ("/b", "en", "", "1")
    assert "TIME" not in env and env["MAX_UPDATE"] == "7" and env["PATH"].split(os.pathsep)[0] == BIN
    given = recipe_env({"TIME": "10m"}, unset=("TIME", "MAX_UPDATE"))
    assert given["TIME"] == "10m" and "MAX_UPDATE" not in given


def test_the_recipe_runs_with_its_environment_on_its_core_and_appends_to_its_log(tmp_path):
    recipe = tmp_path / "recipe.sh"
    recipe.write_text('echo "WORK=$WORK"; taskset -cp $$ | sed "s/.*: //"\n')
    log = tmp_path / "run.log"
    log.write_text("before\n")
    core = sorted(os.sched_getaffinity(0))[-1]
    assert start_recipe(recipe_env({"WORK": "/w"}), str(log), "a run", core, str(recipe)).wait() == 0
    lines = log.read_text().splitlines()
    assert lines[0] == "before" and lines[1].startswith("==== ") and lines[1].endswith(f" core {core}: a run")
    assert lines[2:] == ["WORK=/w", str(core)]
