"""recipes/planner/ (decide, saved, fields, cli): a run's plan decided once and held in WORK, handed to the recipe as
data; budgets refused, a validation's cost, a vocabulary per side."""

import json

import pytest
from helpers import ENGLISH, corpus, many, speeds

from preprocess.corpora import CorpusError, find_corpus, held_out_size
from recipes.planner.budget import corpus_tokens, rule
from recipes.planner import cli, plan, saved
from recipes.planner.fields import encode_fields
from recipes.planner.fields import fields as plan_fields
from recipes.planner.variables import Variables


def test_a_time_for_gpus_where_there_is_none_is_refused(tmp_path, capsys, monkeypatch):
    from recipes.planner.speed import machine

    monkeypatch.setattr(machine, "cuda_here", lambda: False)
    prefix = corpus(tmp_path, many(100))
    assert (
        cli.command_line(["rule", "--train", prefix, "--src", "en", "--tgt", "de", "--time", "8h", "--gpus", "8"]) == 2
    )
    assert "error: TIME=8h: this machine has no CUDA device to measure the GPUs' speed on" in capsys.readouterr().err


def test_time_and_max_update_together_are_refused(tmp_path):
    prefix = corpus(tmp_path, many(100))
    with pytest.raises(CorpusError, match="TIME=8h and MAX_UPDATE=1200: give one budget"):
        rule.settings([prefix], "en", "de", 1200, "8h", speeds(4.0, 1.5))
    with pytest.raises(CorpusError, match="TIME=8 hours: a duration such as 90m"):
        rule.settings([prefix], "en", "de", None, "8 hours", speeds(4.0, 1.5))


def test_a_validations_cost_is_counted_from_the_dev_sets_size(tmp_path):
    """The dev set's target tokens (what each validation costs a TIME) are estimated before any work: a given dev
    set's target words, or the pairs held out times a training target line's words; in pieces, PIECES_PER_WORD a
    word (a character in scripts without spaces)."""
    (tmp_path / "given").mkdir()
    prefix = corpus(tmp_path, many(3000))  # German lines of 4 to 9 words
    dev = corpus(tmp_path / "given", [("One two three.", "eins zwei drei vier")] * 50, name="dev")
    assert corpus_tokens.PIECES_PER_WORD == 2.0
    assert rule.settings([prefix], "en", "de", valid=[dev]).valid_tokens == 50 * 4 * 2
    words = sum(len(g.split()) for _, g in many(3000)) / 3000
    held = rule.settings([prefix], "en", "de")
    assert held_out_size(3000, None) == 200 and held.valid_tokens == int(200 * words * 2)
    cjk = corpus(tmp_path / "given", [("Open the file.", "打开文件")] * 50, name="zh")
    assert corpus_tokens.dev_tokens([], [find_corpus(cjk, "en", "de")], 3000, "CJK") == 50 * 4 * 2
    assert rule.settings([prefix], "en", "de", 1200).valid_tokens == held.valid_tokens  # MAX_UPDATE's time, too


def test_a_vocabulary_per_side_where_the_scripts_differ(tmp_path):
    prefix = corpus(tmp_path, [(e, "Документ номер %d." % i) for i, e in enumerate(ENGLISH * 30)])
    tsv = tmp_path / "p.tsv"
    tsv.write_text("".join(f"{e}\tDatei {i}\n" for i, e in enumerate(ENGLISH * 30)))
    assert rule.settings([prefix], "en", "de").joint is False and rule.settings([str(tsv)], "en", "de").joint is True
    assert rule.settings([prefix, str(tsv)], "en", "de").pairs == 600


def variables(tmp_path, prefix, **given):
    return Variables(
        {
            "TRAIN": prefix,
            "SRC": "en",
            "TGT": "de",
            "WORK": str(tmp_path / "w"),
            "GPUS": "0",
            "CPU_WORKERS": "1",
            "MIN_PAIRS": "100",
            "AVERAGE_LAST": "5",
            "DRY_RUN": "0",
            **given,
        }
    )


@pytest.fixture
def slower(monkeypatch):
    """This machine's speed, as the probe measures it: ``slower["by"]`` times a fixed figure."""
    from recipes.planner.speed import probe_cache

    slower = {"by": 1.0}

    def seconds_per_update(probe, fresh=False, tries=1):
        seconds = (2 if "--d-model 256" not in probe.model_flags else 1) * probe.tokens_per_update / 2048
        return {"seconds": seconds * slower["by"], "measured": "now", "cached": False}

    monkeypatch.setattr(probe_cache, "seconds_per_update", seconds_per_update)
    return slower


def test_a_time_is_decided_once_and_the_run_begun_keeps_its_plan_however_the_speed_is_measured(tmp_path, slower):
    """TIME's pick and the updates fairseq-train is given come from one figure of the speed; once a run has begun in
    WORK (a stage done), the same settings read its plan back from WORK/plan.json though the machine now measures
    four times slower; another TIME, a grown corpus or REPROBE=1 decide again."""
    prefix = corpus(tmp_path, many(3000))
    work = tmp_path / "w"
    first = saved.plan_for(variables(tmp_path, prefix, TIME="3h"), str(work), dry_run=False, fresh=False)
    picked = [o for o in first.choice["options"] if o["picked"]][0]
    assert first.budget["max_update"] == picked["updates"]  # the rule's updates are fairseq-train's
    assert plan_fields(first, variables(tmp_path, prefix))["MAX_UPDATE"] == str(picked["updates"])
    assert json.loads((work / "plan.json").read_text())["budget"]["max_update"] == picked["updates"]
    (work / ".done").mkdir()
    (work / ".done" / "1").write_text("{}")  # the run has begun
    slower["by"] = 4.0
    again = saved.plan_for(variables(tmp_path, prefix, TIME="3h"), str(work), dry_run=False, fresh=False)
    assert (again.model, again.budget, again.batch) == (first.model, first.budget, first.batch)
    assert again.lines[-1].startswith(f"plan: the plan this run holds ({work}/plan.json, decided ")
    other = saved.plan_for(variables(tmp_path, prefix, TIME="4h"), str(work), dry_run=False, fresh=False)
    assert other.budget["time"] == "4h" and "plan this run holds" not in other.lines[-1]
    back = saved.plan_for(variables(tmp_path, prefix, TIME="3h"), str(work), dry_run=False, fresh=False)
    assert back.budget == first.budget  # the settings it began with find its own plan again, after another's
    assert json.loads((work / "plan.json").read_text())["budget"]["time"] == "3h"
    assert saved.plan_for(variables(tmp_path, prefix, TIME="3h"), str(work), False, fresh=True).budget != first.budget
    with open(prefix + ".en", "a") as f, open(prefix + ".de", "a") as g:  # the corpus grew: decided again
        f.write("One more.\n"), g.write("Noch einer.\n")
    grown = saved.plan_for(variables(tmp_path, prefix, TIME="4h"), str(work), dry_run=False, fresh=False)
    assert grown.corpus["pairs"] == 3001 and "plan this run holds" not in grown.lines[-1]


def test_a_time_too_short_for_the_rules_pick_is_refused_as_too_short(tmp_path, slower):
    """The rule's own updates for a TIME are the time's: where they are under time_budget.MIN_UPDATES, the TIME is
    refused as too short (before, the rule's count passed as a cap beside TIME: TIME=2m on one core gave 3 updates
    and "AVERAGE_LAST=5 checkpoints to average, but MAX_UPDATE=3 saves only 3")."""
    prefix = corpus(tmp_path, many(3000))
    slower["by"] = 20.0
    with pytest.raises(plan.PlanError, match=r"TIME=3m: \d+ updates of [\d.]+ s fit here, too few to learn anything"):
        saved.plan_for(variables(tmp_path, prefix, TIME="3m"), str(tmp_path / "w"), dry_run=True, fresh=False)


def test_a_dry_run_leaves_the_plan_of_a_run_begun_and_says_what_would_change(tmp_path, slower):
    prefix = corpus(tmp_path, many(300))
    work = tmp_path / "w"
    first = saved.plan_for(variables(tmp_path, prefix, MAX_UPDATE="1200"), str(work), dry_run=True, fresh=False)
    assert (work / "plan.json").exists()  # no run has begun: a dry run writes it
    held = (work / "plan.json").read_text()
    (work / ".done").mkdir()
    (work / ".done" / "2a").write_text("{}")
    shown = saved.plan_for(variables(tmp_path, prefix, MAX_UPDATE="2400", DROPOUT="0.2"), str(work), True, False)
    assert (work / "plan.json").read_text() == held
    assert shown.lines[-1].startswith(
        f"plan: {work}/plan.json holds the plan of the run begun in {work}, left as it is"
    )
    assert f"model.dropout: {first.model['dropout']!r} -> '0.2'" in shown.lines[-1]
    assert "budget.max_update: 1200 -> 2400" in shown.lines[-1]
    real = saved.plan_for(variables(tmp_path, prefix, MAX_UPDATE="2400", DROPOUT="0.2"), str(work), False, False)
    assert json.loads((work / "plan.json").read_text())["model"]["dropout"] == "0.2" == real.model["dropout"]


def test_the_recipe_reads_the_plan_as_data_never_as_code(tmp_path):
    """lib.sh's plan_read sets each field as a PLAN_* variable, arrays as arrays, and leaves the user's variables as
    they were; a value that is shell code stays a value, and a record that names no field of the plan (PLAN_*: a user's
    variable, say, or no name at all) stops the recipe."""
    import subprocess

    from helpers import REPO

    fields = {"MODEL_FLAGS": "--d-model 256 $(touch pwned)", "MODEL_ARGS": ["--d-model", "256", "a b", ""], "X": "`id`"}
    path = tmp_path / "fields"
    path.write_bytes(encode_fields(fields))
    script = (
        f'source "{REPO}/recipes/lib.sh"; MODEL_FLAGS=mine; plan_read "$1"; '
        'printf "%s|" "$PLAN_MODEL_FLAGS" "${#PLAN_MODEL_ARGS[@]}" "${PLAN_MODEL_ARGS[2]}" "$PLAN_X" "$MODEL_FLAGS"'
    )
    done = subprocess.run(["bash", "-c", script, "s", str(path)], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout == "--d-model 256 $(touch pwned)|4|a b|`id`|mine|" and not (tmp_path / "pwned").exists()
    for name in ("PATH; rm", "MAX_UPDATE"):
        path.write_bytes(b"s\0" + name.encode() + b"\0x\0")
        done = subprocess.run(["bash", "-c", script, "s", str(path)], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 2 and f"'{name}' is not a field of the plan (PLAN_*)" in done.stderr


def test_what_comes_after_training_is_read_afresh_from_a_plan_held(tmp_path, slower):
    """BEAM, LENPEN and EXPORT change no training: a run begun keeps its plan under them (its TIME's updates), with
    their new values; a value that is no number is refused naming the variable."""
    prefix = corpus(tmp_path, many(3000))
    work = tmp_path / "w"
    first = saved.plan_for(variables(tmp_path, prefix, TIME="3h"), str(work), dry_run=False, fresh=False)
    (work / ".done").mkdir()
    (work / ".done" / "1").write_text("{}")
    slower["by"] = 4.0
    wider = saved.plan_for(variables(tmp_path, prefix, TIME="3h", BEAM="6", LENPEN="1.0"), str(work), False, False)
    assert wider.budget == first.budget and wider.flags["decoding"][:4] == ["--beam", "6", "--lenpen", "1.0"]
    with pytest.raises(plan.PlanError, match="LENPEN=long: a number"):
        saved.plan_for(variables(tmp_path, prefix, TIME="3h", LENPEN="long"), str(work), False, False)
