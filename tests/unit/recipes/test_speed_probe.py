"""TIME= and the speed probe (recipes/planner/speed_probe.py): a duration parsed or refused, a probe of
a model's updates on this machine kept and read back, the updates a TIME gives, kept for a resumed run."""

import json
from dataclasses import replace
import re

import pytest

from helpers import known_at

from recipes.planner import probe_arithmetic
from recipes.planner.speed import busy_cores, cli, machine, probe_cache, probing
from recipes.planner.probe_arithmetic import BudgetError, parse_time
from recipes.planner.speed.probing import Probe
from recipes.planner.speed.time_budget import budget

TINY = Probe("vaswani_tiny", "", 200, 600, workers=2, threads=1)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "transformer_plugin" / "speed.json"


def seeded(cache, probe, seconds):
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({probe.key(): {"seconds": seconds, "measured": known_at()}}))


@pytest.mark.parametrize(
    "text, seconds",
    [("90m", 5400), ("8h", 28800), ("1h30m", 5400), ("2d", 172800), ("1.5h", 5400), ("600s", 600), ("1h 30m", 5400)],
)
def test_a_time_is_a_duration_with_units(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize(
    "text, says",
    [
        ("90", "a duration such as 90m"),
        ("8 hours", "a duration such as"),
        ("", "a duration such as"),
        ("1m", "under two minutes"),
    ],
)
def test_anything_else_is_refused_naming_time(text, says):
    with pytest.raises(BudgetError, match=f"TIME={text}: .*{says}"):
        parse_time(text)


def test_the_probe_measures_a_models_updates_here_and_keeps_the_figure(cache, monkeypatch):
    monkeypatch.setattr(busy_cores, "busy", lambda: "")  # a test run keeps this machine busy
    first = probe_cache.seconds_per_update(TINY)
    assert first["cached"] is False and 0 < first["seconds"] < 30
    kept = json.loads(cache.read_text())
    assert list(kept) == [TINY.key()] and json.loads(TINY.key())["machine"]["cores"] >= 1
    again = probe_cache.seconds_per_update(TINY)
    assert again["cached"] is True and again["seconds"] == first["seconds"]
    # another model is another figure, kept beside the first
    other = Probe("vaswani_tiny", "--d-ff 512", 200, 600, workers=1, threads=1)
    assert other.key() != TINY.key()
    measured = []
    sp_measure, probing.measure = probing.measure, lambda probe: measured.append(probe) or 1.5
    try:
        found = probe_cache.seconds_per_update(other)
        assert {k: v for k, v in found.items() if k != "at"} == {
            "seconds": 1.5,
            "measured": probe_cache.time.strftime("%Y-%m-%d %H:%M"),
            "cached": False,
            "tries": 1,
        }
        assert abs(found["at"] - probe_cache.time.time()) < 60
    finally:
        probing.measure = sp_measure
    assert measured == [other] and len(json.loads(cache.read_text())) == 2


def test_a_probe_that_cannot_build_its_model_says_which(cache):
    with pytest.raises(probing.ProbeError, match="the speed probe of vaswani_tiny --no-such-flag 1 failed"):
        probe_cache.seconds_per_update(Probe("vaswani_tiny", "--no-such-flag 1", 200, 600))


def test_a_worker_that_dies_at_exit_after_its_figure_counts_and_one_that_dies_before_does_not(monkeypatch):
    """Under load a CPU worker has aborted at its exit, after printing its figure ("terminate called without an active
    exception", SIGABRT: the probe failed the plan); its figure is whole and counts. A worker that died before its
    figure, or one that failed, still fails the probe, naming the worker."""

    class Worker:
        def __init__(self, out, code):
            self.out, self.returncode = out, code

        def communicate(self):
            return self.out, "terminate called without an active exception\n"

    def run(*outcomes):
        workers = iter([Worker(out, code) for out, code in outcomes])
        monkeypatch.setattr(probing.subprocess, "Popen", lambda *a, **k: next(workers))
        return probing.measure(replace(TINY, workers=len(outcomes)))

    assert run(("1.250000\n", 0), ("1.500000\n", -6)) == 1.5
    with pytest.raises(probing.ProbeError, match=r"failed \(worker 1, exit -6\): terminate called without"):
        run(("1.250000\n", 0), ("", -6))
    with pytest.raises(probing.ProbeError, match=r"failed \(worker 0, exit 1\)"):
        run(("1.250000\n", 1), ("1.500000\n", 0))


def test_a_time_gives_the_updates_that_fit_and_the_stop_time(cache):
    seeded(cache, TINY, 2.0)
    found = budget(TINY, "1h")
    assert found["MAX_UPDATE"] == str(
        int((3600 - probe_arithmetic.TIME_STARTUP_SECONDS) * probe_arithmetic.TIME_TRAINING_SHARE / 2.0)
    )  # 1,681
    assert found["STOP_TIME_HOURS"] == f"{(3600 - probe_arithmetic.TIME_STARTUP_SECONDS) / 3600:.4f}"
    assert abs(int(found["TRAINING_SECONDS"]) - 3600) <= 2  # what fits is about the time given
    assert re.match(
        r"60 min here: 1,681 updates of 2\.00 s \(a probe of this machine, measured \d{4}-\d\d-\d\d \d\d:\d\d",
        found["TRAINING_TIME"],
    ), found["TRAINING_TIME"]
    # a dev set of 6,000 target tokens, 10 updates' worth (of 600): a validation takes 10 x 2 s x VALID_TOKEN_COST,
    # 10 s, and the run of about 1,580 updates validates 20 times (every 79): 100 updates fewer
    validated = budget(TINY, "1h", tokens_per_update=600, valid_tokens=6000)
    assert (
        probe_arithmetic.VALID_TOKEN_COST == 0.5
        and probe_arithmetic.validations(1581) == 20
        and validated["MAX_UPDATE"] == "1581"
    )
    assert 3590 <= int(validated["TRAINING_SECONDS"]) <= 3600
    capped = budget(TINY, "1h", max_update=1000)  # the size class's full run, when more fits
    assert (capped["MAX_UPDATE"], capped["STOP_TIME_HOURS"]) == ("1000", found["STOP_TIME_HOURS"])
    said = budget(TINY, max_update=30000)
    assert "STOP_TIME_HOURS" not in said and said["MAX_UPDATE"] == "30000"
    assert said["TRAINING_TIME"].startswith("17.6 h here: 30,000 updates of 2.00 s")


def test_a_time_too_short_for_100_updates_is_refused_unless_a_lower_cap_fits(cache):
    """Under 100 updates in TIME are refused; a cap below that given beside TIME (a fine-tuning's 10 epochs of 500 pairs
    at 64 sentences an update: 80 updates, recipes/planner/finetuning.py) is trained when it fits, and refused when it
    does not."""
    seeded(cache, TINY, 60.0)
    with pytest.raises(
        BudgetError, match=r"TIME=90m: 84 updates of 60.0 s fit here, too few to learn anything \(100 at least\)"
    ):
        budget(TINY, "90m")
    assert budget(TINY, "90m", max_update=80)["MAX_UPDATE"] == "80"
    with pytest.raises(BudgetError, match=r"TIME=60m: 56 updates of 60.0 s fit here, too few"):
        budget(TINY, "60m", max_update=80)


def test_a_layout_is_probed_as_the_recipes_run_it(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    cpu = probing.layout_probe("vaswani_base", "", 8000, 4096, gpus=0, cpu_workers=2)
    assert (cpu.workers, cpu.threads, cpu.tokens_per_update, cpu.device) == (2, 3, 4096, "cpu")
    two_machines = probing.layout_probe("vaswani_base", "", 8000, 4096, gpus=0, cpu_workers=2, devices=4)
    assert two_machines.tokens_per_update == 2048  # this machine's share
    gpu = probing.layout_probe("vaswani_big", "", 32000, 25000, gpus=8, cpu_workers=2, precision="bf16")
    assert (gpu.workers, gpu.tokens_per_update, gpu.device, gpu.precision) == (1, 3125, "cuda", "bf16")


def test_a_busy_machines_figure_is_measured_again_once_it_is_quiet(cache, monkeypatch):
    """Measured beside other work a probe is slow (4.9 s an update beside a test run, 3.3 s on the quiet machine):
    it is the best of BUSY_TRIES probes (the one the other work disturbed least: a figure four times too slow is not
    kept where one of its tries was not), kept as a busy machine's, read back while the machine is busy, and
    replaced once it is quiet."""
    figures = iter([20.0, 5.0, 11.0, 3.0])
    monkeypatch.setattr(probing, "measure", lambda probe: next(figures))
    monkeypatch.setattr(busy_cores, "busy", lambda: "load 3.8 on 2 cores")
    assert budget(TINY, max_update=1000)["TRAINING_TIME"].startswith(
        "89 min here: 1,000 updates of 5.00 s (a probe of this machine, measured now with the machine busy (load 3.8 "
        "on 2 cores), "
        "so likely too slow: measured again once it is quiet; kept in"
    )
    assert probe_cache.seconds_per_update(TINY)["seconds"] == 5.0  # still busy: read back
    monkeypatch.setattr(busy_cores, "busy", lambda: "")
    quiet = probe_cache.seconds_per_update(TINY)
    assert (quiet["seconds"], quiet["cached"], "busy" in quiet) == (3.0, False, False)
    assert probe_cache.seconds_per_update(TINY)["cached"] is True
    monkeypatch.setattr(
        busy_cores, "busy", lambda: pytest.fail("a quiet figure is read back without watching the cores")
    )
    assert probe_cache.seconds_per_update(TINY)["seconds"] == 3.0


def test_busy_is_other_work_on_this_processs_cores_not_on_the_machine(monkeypatch):
    """A probe pinned to core 0 beside a run pinned to core 1 is not slowed by it (the machine's load average, 1 on 2
    cores and more, called it busy): what counts is how busy its own cores were while it watched them."""
    monkeypatch.setattr(busy_cores, "BUSY_SAMPLE_SECONDS", 0)
    monkeypatch.setattr(busy_cores.os, "sched_getaffinity", lambda pid: {0})

    def watched(core0_busy, core1_busy):
        snapshots = iter([{0: (0, 0), 1: (0, 0)}, {0: (100 - core0_busy, 100), 1: (100 - core1_busy, 100)}])
        monkeypatch.setattr(busy_cores, "core_times", lambda: next(snapshots))
        busy_cores.busy.cache_clear()
        return busy_cores.busy()

    try:
        assert watched(2, 100) == ""  # the other core's run
        assert watched(93, 100) == "core 0 93% busy"
        monkeypatch.setattr(busy_cores.os, "sched_getaffinity", lambda pid: {0, 1})
        assert watched(0, 100) == ""  # half of its cores: one of its two workers' cores free
        assert watched(60, 100) == "cores 0,1 80% busy"
    finally:
        busy_cores.busy.cache_clear()


def test_the_cores_times_are_read_from_proc_stat(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 2 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0 0 0\nintr 1 2\n")
    monkeypatch.setattr(busy_cores, "PROC_STAT", str(stat))
    assert busy_cores.core_times() == {0: (42, 52), 1: (40, 50)}


def test_gpus_where_there_is_no_cuda_device_are_not_measured(cache, monkeypatch):
    """A dry run for GPUs on a login node: the time is said where the GPUs are; a TIME cannot be turned into updates."""
    monkeypatch.setattr(machine, "cuda_here", lambda: False)
    gpus = probing.layout_probe("vaswani_big", "", 32000, 25000, gpus=8, cpu_workers=2)
    said = budget(gpus, max_update=100000)
    assert said["MAX_UPDATE"] == "100000" and "how long, the machine with the GPUs says" in said["TRAINING_TIME"]
    with pytest.raises(BudgetError, match="TIME=8h: this machine has no CUDA device to measure the GPUs' speed on"):
        budget(gpus, "8h")
    assert not cache.exists()


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16", "amp"])
def test_every_precision_of_the_recipes_is_taken(cache, monkeypatch, capsys, precision):
    """PRECISION=amp (fairseq's --amp) stopped every parallel-text run with an argument error; each of the recipes'
    four is taken (amp autocasts to fp16 on a CUDA device, as fairseq's --amp does)."""
    monkeypatch.setattr(machine, "cuda_here", lambda: False)
    assert cli.main(["budget", "--gpus", "1", "--max-update", "1000", "--precision", precision]) == 0
    assert "MAX_UPDATE=1000" in capsys.readouterr().out


def test_a_figure_is_measured_again_when_old_when_asked_or_for_another_fairseq(cache, monkeypatch):
    """A figure is read back for MAX_AGE_DAYS; one measured before FRESH_SINCE (the recipes' REPROBE=1) is measured
    again; the key holds fairseq's and this plugin's versions beside torch's, so another of either measures anew."""
    monkeypatch.setattr(probing, "measure", lambda probe: 9.0)
    monkeypatch.setattr(busy_cores, "busy", lambda: "")

    def kept_at(seconds_ago):
        when = probe_cache.time.strftime(
            "%Y-%m-%d %H:%M", probe_cache.time.localtime(probe_cache.time.time() - seconds_ago)
        )
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({TINY.key(): {"seconds": 2.0, "measured": when}}))

    kept_at(29 * 86400)
    assert probe_cache.seconds_per_update(TINY)["seconds"] == 2.0
    kept_at(31 * 86400)
    assert probe_cache.seconds_per_update(TINY)["seconds"] == 9.0  # older than MAX_AGE_DAYS
    kept_at(3600)
    monkeypatch.setenv(probe_cache.FRESH_SINCE, str(int(probe_cache.time.time())))
    assert probe_cache.seconds_per_update(TINY)["seconds"] == 9.0  # REPROBE=1: measured before this run began
    assert probe_cache.seconds_per_update(TINY) == {
        **probe_cache.seconds_per_update(TINY),
        "cached": True,
    }  # once: then read back
    machine = json.loads(TINY.key())["machine"]
    assert machine["fairseq"] == "0.12.3.1" and machine["plugin"] == "0.1.0" and machine["torch"]


def test_on_a_gpu_the_probe_times_the_real_micro_batches_and_scales_from_them():
    """A stand-in device whose micro-batch takes 0.2 s whatever its size up to 4,096 tokens (a GPU far from full),
    and a step of 0.05 s: an update of 2,048 tokens and one of 4,096 take the same one micro-batch (they used to
    time one micro-batch of 2,048 scaled by the tokens, so 2,048 looked twice as fast); 16,384 tokens are four of
    fairseq's micro-batches of --max-tokens 4,096 (its --update-freq 4). On CPU the time still grows per token."""
    timed = []

    def device(sentences):
        timed.append(sentences)
        return 0.2

    def update(tokens, max_tokens=4096, gpus=1):
        probe = probing.layout_probe(
            "vaswani_big",
            "",
            32000,
            tokens * gpus,
            gpus=gpus,
            cpu_workers=2,
            precision="bf16",
            max_tokens_per_device=max_tokens,
        )
        return probe_arithmetic.seconds_an_update(probe, device, lambda: 0.05)

    assert update(2048) == update(4096) == pytest.approx(0.25)
    assert set(timed) == {2048 // 30, 4096 // 30}  # the micro-batch each update runs, not a capped one
    assert update(16384) == pytest.approx(4 * 0.2 + 0.05) and update(16384, gpus=8) == pytest.approx(
        0.85
    )  # a device's share
    assert update(6000) == pytest.approx(2 * 0.2 + 0.05)  # 4,096 and 1,904: two micro-batches
    cpu = probing.layout_probe("vaswani_base", "", 8000, 4096, gpus=0, cpu_workers=1)
    assert probe_arithmetic.micro_batches(cpu) == (2048, 2.0)
    assert probe_arithmetic.seconds_an_update(cpu, lambda sentences: 0.2, lambda: 0.05) == pytest.approx(
        2 * 0.2 * 2048 / (68 * 30) + 0.05
    )


def test_a_figure_asked_for_as_the_best_of_three_is_the_fastest_of_three_probes(cache, monkeypatch):
    """tries: the fastest of that many probes, kept with their count (the plan reads it back without probing again)."""
    figures = iter([1.7, 1.56, 1.62])
    monkeypatch.setattr(probing, "measure", lambda probe: next(figures))
    monkeypatch.setattr(busy_cores, "busy", lambda: "")
    found = probe_cache.seconds_per_update(TINY, fresh=True, tries=3)
    assert (found["seconds"], found["tries"]) == (1.56, 3)
    assert probe_cache.seconds_per_update(TINY)["tries"] == 3
