"""The recipes' engine (recipes/engine/) as functions: what a stage makes, stamps old and
new, what changed, the decision for every stage, the layout and batch of a training, and why a training
stopped. Through the shell, with processes: tests/integration/test_recipes_lib.py."""

import json
import os
import subprocess
import time

import pytest

from helpers import corpus as write_corpus
from recipes import engine as recipe
from recipes.engine import Context, Stage


def context(tmp_path, **kw):
    kw.setdefault("python", "/envs/a/bin/python")
    return Context(str(tmp_path / "work"), str(tmp_path / "repo"), **kw)


# ---- what a stage makes --------------------------------------------------------------------------------


def test_where_the_checkout_environment_and_work_lie_is_not_part_of_a_stage(tmp_path):
    a = Context("/runs/a", "/src/one", python="/envs/a/bin/python")
    b = Context("/data/b", "/home/u/two", python="/opt/venv/bin/python")

    def stage(ctx, work, repo):
        return Stage(
            "4",
            "t",
            "run",
            "",
            [
                "launch_training",
                f"{work}/train.log",
                "torchrun",
                "--master-addr",
                "node0",
                "--master-port",
                "29500",
                f"{os.path.dirname(ctx.python)}/fairseq-train",
                f"{work}/data-bin",
                "--user-dir",
                f"{repo}/transformer_plugin",
                "--heartbeat-timeout",
                "600",
                "--max-update",
                "100",
                "--label",
                f"scores={work}/x.json",
            ],
        )

    one, two = (
        recipe.identity(stage(a, "/runs/a", "/src/one"), a),
        recipe.identity(stage(b, "/data/b", "/home/u/two"), b),
    )
    assert one == two
    assert one["command"] == [
        "launch_training",
        "$WORK/train.log",
        "torchrun",
        "fairseq-train",
        "$WORK/data-bin",
        "--user-dir",
        "$REPO/transformer_plugin",
        "--max-update",
        "100",
        "--label",
        "scores=$WORK/x.json",
    ]


def test_which_epoch_checkpoints_a_training_keeps_is_not_what_it_makes(tmp_path):
    """Which epochs' checkpoints a training keeps (--keep-last-epochs, --no-epoch-checkpoints) changes how it runs,
    not what it makes: a training done with either is the same stage."""
    ctx = context(tmp_path)
    before = Stage(
        "4",
        "t",
        "run",
        "",
        [
            "train_workers",
            "2",
            "log",
            "fairseq-train",
            "--keep-interval-updates",
            "5",
            "--keep-last-epochs",
            "5",
            "--max-update",
            "100",
        ],
    )
    now = Stage(
        "4",
        "t",
        "run",
        "",
        [
            "train_workers",
            "2",
            "log",
            "fairseq-train",
            "--keep-interval-updates",
            "5",
            "--no-epoch-checkpoints",
            "--max-update",
            "100",
        ],
    )
    assert recipe.identity(before, ctx) == recipe.identity(now, ctx)


def test_torchrun_as_the_environments_python_is_the_stage_torchrun_ran(tmp_path):
    """The recipes run torchrun as `$PY -m torch.distributed.run` (a torchrun of another environment starts
    workers without fairseq): a training's identity is the same whichever way its command names it."""
    ctx = context(tmp_path)
    tail = ["--nnodes", "1", "--master-addr", "n0", "/envs/a/bin/fairseq-train", "--max-update", "100"]
    before = Stage("4", "t", "run", "", ["launch_training", "log", "torchrun", *tail])
    now = Stage(
        "4", "t", "run", "", ["launch_training", "log", "/envs/a/bin/python", "-m", "torch.distributed.run", *tail]
    )
    assert recipe.identity(before, ctx) == recipe.identity(now, ctx)
    other = Stage("4", "t", "run", "", ["launch_training", "log", "/envs/a/bin/python", "-m", "other.module", *tail])
    assert recipe.identity(other, ctx) != recipe.identity(before, ctx)


def test_the_python_and_work_inside_the_checkout_are_placed():
    ctx = Context("runs/demo", os.getcwd(), python="python")
    words = recipe.identity(
        Stage(
            "1",
            "t",
            "run",
            "",
            ["python", "-m", "x", "--out", "runs/demo/data", os.path.join(os.getcwd(), "runs/demo/spm"), "runs/demo2"],
        ),
        ctx,
    )
    assert words["command"] == ["python", "-m", "x", "--out", "$WORK/data", "$WORK/spm", "runs/demo2"]


def test_an_input_is_its_content_not_its_path_or_times(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text("one\n")
    (corpus / "sub" / "b.txt").write_text("two\n")
    ctx = context(tmp_path)
    first = recipe.identity(Stage("1", "t", "run", "", ["prep", "--from", str(corpus), "--workers", "8"]), ctx)
    assert first["command"] == ["prep", "--from", "$INPUT1"] and first["inputs"][0]["path"] == str(corpus)
    copy = tmp_path / "copy"
    time.sleep(0.01)
    subprocess.run(["cp", "-r", str(corpus), str(copy)], check=True)
    assert recipe.digest(str(copy)) == first["inputs"][0]["digest"]
    (copy / "sub" / "b.txt").write_text("two!\n")
    assert recipe.digest(str(copy)) != first["inputs"][0]["digest"]
    (copy / "sub" / "b.txt").write_text("two\n")
    (copy / "sub" / "b.txt").rename(copy / "sub" / "c.txt")  # the same bytes under another name
    assert recipe.digest(str(copy)) != first["inputs"][0]["digest"]


def test_digests_are_kept_by_size_and_time(tmp_path):
    archive = tmp_path / "a.tgz"
    archive.write_bytes(b"x" * 1000)
    cache = recipe.DigestCache(str(tmp_path / "digests.json"))
    first = recipe.digest(str(archive), cache)
    cache.save()
    kept = json.loads((tmp_path / "digests.json").read_text())
    kept[str(archive)][2] = "0" * 32  # a digest read from the cache, not from the file: the file is not read again
    (tmp_path / "digests.json").write_text(json.dumps(kept))
    assert recipe.digest(str(archive), recipe.DigestCache(str(tmp_path / "digests.json"))) != first
    os.utime(archive, ns=(1, 1))  # touched: read again
    assert recipe.digest(str(archive), recipe.DigestCache(str(tmp_path / "digests.json"))) == first


def test_words_that_are_not_paths_are_not_inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "test").mkdir()  # a directory named like fairseq's split
    ctx = context(tmp_path)
    assert (
        recipe.identity(Stage("6", "t", "run", "", ["fairseq-generate", "--gen-subset", "test"]), ctx)["inputs"] == []
    )


# ---- stamps ---------------------------------------------------------------------------------------------


def test_setting_names_are_the_variables_the_environment_may_set(tmp_path):
    source = tmp_path / "r.sh"
    source.write_text('VOCAB=${VOCAB:-300}; ARCH=${TOY_ARCH:-tiny}\nX=$(pwd)\nDATA="$WORK/data"\n  STEPS=${STEPS:-1}\n')
    assert recipe.setting_names([str(source)]) == ["ARCH", "STEPS", "VOCAB"]


# ---- what changed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old, new, says",
    [
        # GPUS is not on the command line, although its new value is a word of the line that changed
        ({"VOCAB": "300", "GPUS": "0"}, {"VOCAB": "1", "GPUS": "1"}, "VOCAB was 300, now 1"),
        ({"EXTRA": ""}, {"EXTRA": "--dropout 0.3"}, "EXTRA was (empty), now --dropout 0.3"),
        ({"MAX_UPDATE": "30"}, {"MAX_UPDATE": "40"}, "MAX_UPDATE was 30, now 40"),  # inside the --note of a report
    ],
)
def test_a_change_is_named_by_the_variables_that_explain_it(old, new, says):
    before = ["prep", "--vocab", "300", "--note", "3000 pairs, 30 updates"]
    after = [
        "prep",
        "--vocab",
        "1" if new.get("VOCAB") == "1" else "300",
        "--note",
        "3000 pairs, 40 updates" if "MAX_UPDATE" in new else "3000 pairs, 30 updates",
        *new.get("EXTRA", "").split(),
    ]
    assert recipe.changed_settings(before, after, old, new) == says


def test_a_value_that_is_a_word_elsewhere_too_is_found_where_it_changed():
    """--max-update 10 -> 12 with --log-interval 10 unchanged: 10 is still a word of the new line."""
    before = ["fairseq-train", "--max-update", "10", "--log-interval", "10"]
    after = ["fairseq-train", "--max-update", "12", "--log-interval", "10"]
    assert (
        recipe.changed_settings(before, after, {"MAX_UPDATE": "10"}, {"MAX_UPDATE": "12"})
        == "MAX_UPDATE was 10, now 12"
    )
    assert recipe.changed_words(before, after) == "was 10, now 12"


def stages():
    return [
        Stage("1", "data", "data", "", ["prep", "--vocab", "300"]),
        Stage("2", "bin", "data", "", ["bin"]),
        Stage("3", "train", "run", "", ["train_workers", "2", "/w/log", "fairseq-train", "--steps", "10"]),
        Stage("4", "score", "run", "", ["score"]),
    ]


def mark_done(ctx, plan):
    for stage in plan:
        recipe.write_stamp(os.path.join(ctx.stamp_dir, stage.id), stage, recipe.identity(stage, ctx), ctx)


def test_every_stage_is_decided_before_any_work(tmp_path):
    ctx = context(tmp_path, settings={"VOCAB": "300", "STEPS": "10"})
    assert [d.action for d in recipe.decide(stages(), ctx)] == ["run"] * 4
    mark_done(ctx, stages())
    assert [d.action for d in recipe.decide(stages(), ctx)] == ["skip"] * 4
    changed = stages()
    changed[0].argv[-1] = "400"
    ctx.settings = {"VOCAB": "400", "STEPS": "10"}
    decisions = recipe.decide(changed, ctx)
    assert [d.action for d in decisions] == ["redo", "redo", "stop", "redo"]
    assert decisions[0].why == "its settings changed since it was done: VOCAB was 300, now 400"
    assert (
        decisions[2].why == "stage 1, whose outputs it may read (it declares none), is redone (VOCAB was 300, now 400)"
    )
    assert (
        decisions[3].why == "stage 1, whose outputs it may read (it declares none), is redone (VOCAB was 300, now 400)"
    )
    message = recipe.stop_message(changed[2], decisions[2].why, ctx)
    assert message.startswith(
        "stage 3 (training) was done, but stage 1, whose outputs it may read (it declares none), is redone"
    )
    assert f"delete checkpoints and {ctx.stamp_dir}/3;" in message  # fairseq's default --save-dir


def test_a_stage_never_done_redoes_the_stages_after_it(tmp_path):
    ctx = context(tmp_path)
    mark_done(ctx, stages())
    os.remove(os.path.join(ctx.stamp_dir, "2"))
    assert [(d.action, d.why) for d in recipe.decide(stages(), ctx)] == [
        ("skip", ""),
        ("run", ""),
        ("stop", "stage 2, whose outputs it may read (it declares none), is redone (it was never done)"),
        ("redo", "stage 2, whose outputs it may read (it declares none), is redone (it was never done)"),
    ]


def test_on_another_node_data_stages_wait_and_stamps_are_the_nodes_own(tmp_path):
    ctx = context(tmp_path, launch="torchrun", node_rank="1")
    assert ctx.stamp_dir.endswith(os.path.join(".done", "node1"))
    assert [d.action for d in recipe.decide(stages(), ctx)] == ["wait", "wait", "run", "run"]


def test_an_unreadable_stamp_redoes_its_stage(tmp_path):
    ctx = context(tmp_path)
    os.makedirs(ctx.stamp_dir)
    with open(os.path.join(ctx.stamp_dir, "4"), "w") as f:
        f.write("{ not json")
    decision = recipe.decide(stages()[3:], ctx)[0]
    assert (
        decision.action == "redo"
        and "its stamp could not be read: it is not the JSON object a stamp holds" in decision.why
    )


def test_the_plan_as_lib_sh_writes_it():
    data = (
        b"\0".join(
            [
                b"stage",
                b"3",
                b"train it",
                b"run",
                b"",
                b"1",
                b"c d.en",
                b"0",
                b"2",
                b"a b",
                b"",
                b"var",
                b"VOCAB",
                b"300",
                b"source",
                b"/r.sh",
            ]
        )
        + b"\0"
    )
    plan, variables, sources = recipe.read_plan(data)
    assert plan == [Stage("3", "train it", "run", "", ["a b", ""], reads=["c d.en"], writes=[])]
    assert variables == {"VOCAB": "300"} and sources == ["/r.sh"]


# ---- what reads what ---------------------------------------------------------------------------------------


def pipeline(tmp_path, corpus, export=("hf",)):
    """A recipe's stages as the recipes declare them: a corpus given as a prefix, read through --reads."""
    w = str(tmp_path / "work")
    plan = [
        Stage(
            "1",
            "clean",
            "data",
            "",
            ["prep", "--train", corpus, "--out", f"{w}/data"],
            reads=[f"{corpus}.en", f"{corpus}.de"],
        ),
        Stage("2", "spm", "data", "", ["spm", "--inputs", f"{w}/data/train.en", "--model-prefix", f"{w}/spm/spm"]),
        Stage("3", "bin", "data", f"{w}/bin", ["bin", "--trainpref", f"{w}/data/train", "--spm", f"{w}/spm/spm.model"]),
        Stage(
            "4",
            "train",
            "run",
            "",
            ["train_workers", "1", f"{w}/train.log", "fairseq-train", f"{w}/bin", "--save-dir", f"{w}/ckpt"],
        ),
        Stage("5", "average", "run", "", ["avg", "--inputs", f"{w}/ckpt", "--output", f"{w}/ckpt/average.pt"]),
        Stage(
            "6",
            "generate",
            "run",
            "",
            ["capture", f"{w}/gen.out", "generate", f"{w}/bin", "--path", f"{w}/ckpt/average.pt", "--beam", "4"],
        ),
        Stage("7", "score", "run", "", ["score", "--generate-output", f"{w}/gen.out", "--json", f"{w}/scores.json"]),
    ]
    plan += [
        Stage(f"9-{e}", e, "run", "", [f"export-{e}", "--model", f"{w}/ckpt/average.pt", "--output-dir", f"{w}/{e}"])
        for e in export
    ]
    return plan


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "in").mkdir()
    return write_corpus(tmp_path / "in", [(f"en line {i}", f"de line {i}") for i in range(1000)], name="c")


def test_an_edited_corpus_given_as_a_prefix_redoes_what_reads_it_and_stops_before_training(tmp_path, corpus):
    """The prefix (c for c.en and c.de) is no file: only the declared reads digest it. The same line count."""
    ctx = context(tmp_path)
    mark_done(ctx, pipeline(tmp_path, corpus))
    assert {d.action for d in recipe.decide(pipeline(tmp_path, corpus), ctx)} == {"skip"}
    with open(f"{corpus}.de", "r+") as f:
        text = f.read().replace("de line 999", "de Zeile 99")
        f.seek(0), f.truncate(), f.write(text)
    decisions = recipe.decide(pipeline(tmp_path, corpus), ctx)
    assert [d.action for d in decisions] == ["redo", "redo", "redo", "stop", "redo", "redo", "redo", "redo"]
    assert decisions[0].why == f"its inputs changed since it was done: the content of {corpus}.de changed"
    assert decisions[3].why == (
        f"stage 3, whose outputs it reads ($WORK/bin), is redone (the content of {corpus}.de changed, in stage 1)"
    )
    message = recipe.stop_message(pipeline(tmp_path, corpus)[3], decisions[3].why, ctx)
    assert message.startswith("stage 4 (training) was done, but stage 3") and f"{corpus}.de" in message


def test_a_training_stopped_before_it_was_done_continues_only_under_its_own_settings(tmp_path, corpus):
    """A training that was stopped (a signal, a session that ended) left checkpoints and no stamp: run again the same,
    it continues them; run with another MAX_UPDATE (and so another warm-up), it stops rather than continue them under
    settings they were not trained with, and says how to go on."""
    ctx = context(tmp_path, settings={"MAX_UPDATE": "1873"})
    plan = pipeline(tmp_path, corpus)
    plan[3].argv += ["--max-update", "1873"]
    mark_done(ctx, plan[:3])
    begun = os.path.join(ctx.stamp_dir, "4" + recipe.decisions.BEGUN)
    recipe.write_stamp(begun, plan[3], recipe.identity(plan[3], ctx), ctx)  # as the runner writes it as it starts
    assert recipe.decide(plan, ctx)[3].action == "run"  # no checkpoint yet: nothing to continue
    os.makedirs(tmp_path / "work" / "ckpt")
    (tmp_path / "work" / "ckpt" / "checkpoint_last.pt").write_bytes(b"x")
    assert recipe.decide(plan, ctx)[3].action == "run"  # the same settings: it continues them
    plan[3].argv[-1], ctx.settings = "2019", {"MAX_UPDATE": "2019"}
    decision = recipe.decide(plan, ctx)[3]
    assert (decision.action, decision.begun) == ("stop", True)
    assert decision.why == "its settings changed since it was begun: MAX_UPDATE was 1873, now 2019"
    message = recipe.stop_message(plan[3], decision.why, ctx, decision.begun)
    assert message.startswith("stage 4 (training) was begun and stopped before it was done, but its settings changed")
    assert f"delete {begun} only" in message
    os.remove(begun)  # continued deliberately, as the message says
    assert recipe.decide(plan, ctx)[3].action == "run"


def test_a_change_redoes_what_reads_it_and_nothing_else(tmp_path, corpus):
    ctx = context(tmp_path)
    mark_done(ctx, pipeline(tmp_path, corpus, export=("hf",)))
    # EXPORT="ct2 hf" after EXPORT=hf: the new export runs, the one done is kept
    decisions = recipe.decide(pipeline(tmp_path, corpus, export=("ct2", "hf")), ctx)
    assert [d.action for d in decisions] == ["skip"] * 7 + ["run", "skip"]
    # another beam: generation and its score, not the export of the model
    changed = pipeline(tmp_path, corpus)
    changed[5].argv[-1] = "5"
    assert [d.action for d in recipe.decide(changed, ctx)] == ["skip"] * 5 + ["redo", "redo", "skip"]


def test_paths_are_read_in_every_form_a_command_names_them():
    stage = Stage(
        "8",
        "report",
        "run",
        "",
        [
            "report",
            "--scores",
            "average of the last 5=/w/scores.json",
            "--data",
            "/w/bin/shard0:/w/bin/shard1",
            "--from=/c/in,/c/other",
            "--n",
            "5",
        ],
    )
    assert set(stage.names()) >= {"/w/scores.json", "/w/bin/shard0", "/w/bin/shard1", "/c/in", "/c/other"}
    assert (
        recipe.reads_from(stage, Stage("7", "score", "run", "", ["score", "--json", "/w/scores.json"]), "/w")
        == "/w/scores.json"
    )
    assert recipe.reads_from(stage, Stage("6", "gen", "run", "", ["capture", "/w/gen.out", "generate"]), "/w") is None


def test_a_stamp_from_before_the_declared_reads_holds_and_is_rewritten(tmp_path, corpus):
    ctx = context(tmp_path)
    plan = pipeline(tmp_path, corpus)
    mark_done(ctx, plan)
    path = os.path.join(ctx.stamp_dir, "1")
    with open(path) as f:
        stamp = json.load(f)
    del stamp["reads"]
    stamp["stamp"] = 2
    with open(path, "w") as f:
        json.dump(stamp, f)
    decision = recipe.decide(plan, ctx)[0]
    assert (decision.action, decision.upgrade) == ("skip", True)


def test_the_stop_advice_quotes_its_paths(tmp_path):
    ctx = context(tmp_path / "my runs")
    stage = Stage("4", "train", "run", "", ["train_workers", "1", "log", "fairseq-train", "--save-dir", "my ckpt"])
    message = recipe.stop_message(stage, "why", ctx)
    assert "delete 'my ckpt' and '" in message and "/my runs/work/.done/4' only" in message


# ---- the layout of a training ----------------------------------------------------------------------------

LAYOUT = dict(
    launch="local",
    nnodes="1",
    node_rank="0",
    master_addr="",
    master_port="",
    gpus="8",
    cpu_workers="2",
    dist_timeout="600",
    tokens=25000,
    cap=4096,
)


@pytest.mark.parametrize(
    "gpus, nnodes, launch, max_tokens, update_freq, summary",
    [
        ("8", "1", "local", "3125", "1", "8 GPUs x --max-tokens 3125 x --update-freq 1 = 25000 tokens per update"),
        ("1", "1", "local", "3572", "7", "1 GPUs x --max-tokens 3572 x --update-freq 7 = 25004 tokens per update"),
        (
            "8",
            "4",
            "slurm",
            "782",
            "1",
            "32 GPUs (4 machines x 8) x --max-tokens 782 x --update-freq 1 = 25024 tokens per update",
        ),
        (
            "0",
            "1",
            "local",
            "3125",
            "4",
            "2 CPU workers x --max-tokens 3125 x --update-freq 4 = 25000 tokens per update",
        ),
    ],
)
def test_the_batch_is_about_the_papers_for_any_number_of_devices(
    gpus, nnodes, launch, max_tokens, update_freq, summary
):
    found = recipe.layout(**dict(LAYOUT, gpus=gpus, nnodes=nnodes, launch=launch))
    assert (found["MAX_TOKENS"], found["UPDATE_FREQ"], found["BATCH_SUMMARY"]) == (max_tokens, update_freq, summary)
    assert found["MASTER_ADDR"] == "127.0.0.1" and found["MASTER_PORT"] == "29500"


def test_under_slurm_the_port_comes_from_the_job():
    assert recipe.layout(**dict(LAYOUT, launch="slurm"), slurm_job_id="12345")["MASTER_PORT"] == str(
        10000 + 12345 % 50000
    )


@pytest.mark.parametrize(
    "changes, real, says",
    [
        (
            dict(launch="local", nnodes="2"),
            {},
            "NNODES=2: training on several machines needs LAUNCH=torchrun or LAUNCH=slurm",
        ),
        (dict(launch="mpirun"), {}, "LAUNCH=mpirun: use local, torchrun or slurm"),
        (
            dict(node_rank="1"),
            {},
            "NODE_RANK=1 with LAUNCH=local: only LAUNCH=torchrun runs the recipe on every machine",
        ),
        (
            dict(launch="torchrun", nnodes="2", node_rank="2", master_addr="n0"),
            {},
            "NODE_RANK=2: with NNODES=2, each machine's number, 0 to 1",
        ),
        (dict(launch="torchrun", nnodes="2"), {}, "LAUNCH=torchrun NNODES=2 needs MASTER_ADDR: node 0's address"),
        (dict(gpus="0", cpu_workers="0"), {}, "CPU_WORKERS=0: processes per machine, 1 or more"),
        (dict(gpus="eight"), {}, "GPUS=eight: GPUs per machine, or 0 for CPU workers"),
        (dict(dist_timeout="soon"), {}, "DIST_TIMEOUT=soon: seconds, 1 or more"),
        (
            dict(launch="slurm"),
            dict(real=True),
            "LAUNCH=slurm runs inside a SLURM allocation (sbatch or salloc): SLURM_JOB_ID is not set",
        ),
        (
            dict(launch="slurm", nnodes="2"),
            dict(real=True, slurm_job_id="7", slurm_job_num_nodes="4"),
            "NNODES=2, but this SLURM allocation has 4 nodes (sbatch --nodes)",
        ),
        (
            dict(gpus="8"),
            dict(real=True, cuda_devices=lambda: 2, hostname="gpu7"),
            "GPUS=8, but torch sees 2 CUDA devices on gpu7",
        ),
    ],
)
def test_a_layout_that_cannot_work_is_named(changes, real, says):
    with pytest.raises(recipe.LayoutError, match=None) as error:
        recipe.layout(**dict(LAYOUT, **changes), **real)
    assert str(error.value).startswith(says)


def test_what_only_the_machine_tells_is_asked_only_in_a_real_run():
    asked = []
    recipe.layout(**dict(LAYOUT, gpus="8"), cuda_devices=lambda: asked.append(1) or 0)
    assert asked == []


# ---- why a training stopped: the cases, as data ------------------------------------------------------------

FAILURES = [
    (
        "RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [10.213.0.2]:10903: Connection reset by peer.",
        "the connection to the worker at 10.213.0.2 was lost",
    ),
    (
        "RuntimeError: [pair.cc:589] Connection closed by peer [10.1.2.3]:62134",
        "the connection to the worker at 10.1.2.3 was lost",
    ),
    (
        "RuntimeError: [unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete",
        "no word from the other machines for DIST_TIMEOUT=20 s",
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 1/2 clients joined.",
        "not every machine joined torchrun's rendezvous at node0:29500 within DIST_TIMEOUT=20 s (start the recipe on "
        "every "
        "machine, NODE_RANK=0 to 1)",
    ),
    (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
        "(10.0.0.1, 29500)",
        "node 0's rendezvous at node0:29500 did not answer within DIST_TIMEOUT=20 s",
    ),
    (
        "srun: error: node1: task 1: Killed\nsrun: Terminating StepId=12.0",
        "a task failed (node1: task 1: Killed), and srun ended the others",
    ),
    # the killed task's peer saw its connection close before srun ended it: the death is the cause, in either order
    (
        "[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [10.213.0.2]:17562\nsrun: error: node0: task "
        "0: Terminated\n"
        "srun: error: node1: task 1: Killed",
        "a task failed (node1: task 1: Killed), and srun ended the others",
    ),
    # a task that exited on an error of its own (here a timeout) is no signal death: its message says why
    (
        "RuntimeError: Timed out waiting 20000ms for recv\nsrun: error: node0: task 0: Exited with exit code 1",
        "no word from the other machines for DIST_TIMEOUT=20 s",
    ),
    (
        "srun: error: node1: task 1: Exited with exit code 1\nsrun: error: node0: task 0: Terminated",
        "a task failed (node1: task 1: Exited with exit code 1), and srun ended the others",
    ),
    (
        "  exitcode  : -9 (pid: 5303)\n  error_file: <N/A>",
        "a training process on this machine failed (exitcode : -9 (pid: 5303))",
    ),
    ("Traceback: ValueError: something else", "fairseq-train failed"),
]


@pytest.mark.parametrize("output, says", FAILURES)
def test_a_failed_training_says_why(output, says):
    layout = {"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "DIST_TIMEOUT": "20", "NNODES": "2"}
    assert recipe.training_failure(output, layout).startswith(says)
