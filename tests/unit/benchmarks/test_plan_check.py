"""benchmarks.plan_check: a TIME's plan (WORK/plan.json) beside what fairseq-train did (WORK/train.log)."""

import json

import pytest

from benchmarks import plan_check


def run(tmp_path, name, planned, walls, stopped):
    work = tmp_path / name
    work.mkdir()
    budget = {
        "time": "2m",
        "max_update": planned,
        "seconds_per_update": "0.1000",
        "training_seconds": "118",
        "training_time": "2 min here: ... (the speed file speeds.json, NVIDIA H200)",
    }
    (work / "plan.json").write_text(json.dumps({"budget": budget}))
    log = [f'| train_inner | {{"num_updates": "{u}", "wall": "{w}", "wpb": "2000"}}' for u, w in walls]
    if stopped:
        log.append("INFO | fairseq_cli.train | Stopping training due to cumulative_training_time: 0.034 > stop_time")
    log.append(f'| train | {{"num_updates": "{walls[-1][0] + 7}"}}')
    (work / "train.log").write_text("\n".join(log) + "\n")
    return str(work)


def test_the_plan_beside_the_training_and_what_ended_it(tmp_path, capsys):
    """Updates planned and trained (the epoch's last record counts), seconds an update after the first interval,
    fairseq's clock, their ratio, and whether the time stop ended it; the speed's source under the table."""
    slow = run(tmp_path, "slow", 1200, [(100, 20.0), (200, 32.0), (300, 44.0)], stopped=True)
    exact = run(tmp_path, "exact", 300, [(100, 12.0), (200, 22.0), (293, 31.3)], stopped=False)
    assert plan_check.main([slow, exact, "--out", str(tmp_path / "t.md")]) == 0
    lines = (tmp_path / "t.md").read_text().splitlines()
    assert lines[2] == (
        f"| {slow} | 2m | 1,200 | 307 | 0.1000 | 0.1200 | 118 | 44 | 0.26 | the time (--stop-time-hours) |"
    )
    assert lines[3] == f"| {exact} | 2m | 300 | 300 | 0.1000 | 0.1000 | 118 | 31 | 1.00 | the updates planned |"
    assert lines[-1] == f"- {exact}: 2 min here: ... (the speed file speeds.json, NVIDIA H200)"


def test_a_run_without_its_plan_or_a_time_is_refused_naming_the_file(tmp_path):
    with pytest.raises(SystemExit, match=r"nowhere/plan.json: no such file \(a finished run"):
        plan_check.check(str(tmp_path / "nowhere"))
    work = run(tmp_path, "updates", 300, [(100, 1.0), (200, 2.0), (300, 3.0)], stopped=False)
    plan = json.loads(open(f"{work}/plan.json").read())
    plan["budget"]["time"] = ""
    open(f"{work}/plan.json", "w").write(json.dumps(plan))
    with pytest.raises(SystemExit, match=r"plan.json: not planned for a TIME \(budget: 300 updates\)"):
        plan_check.check(work)
