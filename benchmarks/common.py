"""What the benchmarks share: where things are, running a command while measuring it, running the parallel-text
recipe as a user would, printing a result table, scoring a model on a test set as the recipes score it, and the
fairseq flags that give fairseq's ``transformer`` and ``vaswani_transformer`` the same sizes."""

import json
import os
import shlex
import subprocess
import sys
import time
from typing import Dict, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
BIN = os.path.dirname(sys.executable)
PLUGIN = os.path.join(REPO, "transformer_plugin")
PARALLEL_TEXT = os.path.join(REPO, "recipes", "parallel_text.sh")
FINETUNE = os.path.join(REPO, "recipes", "finetune.sh")


def sh(cmd, log=None, env=None):
    """Run ``cmd`` (in ``env``, else this environment); return (output, peak RSS in MiB of that process, seconds).
    ``log`` fills as it runs."""
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    with open(log or os.devnull, "w") as f:
        for line in proc.stdout:
            lines.append(line)
            f.write(line)
            f.flush()
    output = "".join(lines)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(shlex.quote, cmd))} failed ({proc.returncode}):\n{output[-3000:]}")
    return output, usage.ru_maxrss / 1024, time.time() - start


def recipe_env(*settings: Dict[str, str], unset: Sequence[str] = ("TIME",)) -> Dict[str, str]:
    """The environment a benchmark runs recipes/parallel_text.sh in: this one, with each of ``settings`` laid over
    it in turn, no export (``EXPORT=``), output unbuffered, this Python's fairseq first on PATH; the variables in
    ``unset`` (a budget the caller's shell may hold) removed unless a setting gives them."""
    env = {**os.environ, "EXPORT": "", "PYTHONUNBUFFERED": "1", "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    for name in unset:
        env.pop(name, None)
    for given in settings:
        env.update(given)
    return env


def start_recipe(
    env: Dict[str, str], log: str, header: str, core: Optional[int] = None, recipe: Optional[str] = None
) -> subprocess.Popen:
    """``recipe`` run from the repository with ``env``, its output appended to ``log`` after a dated line saying
    ``header``; pinned to ``core`` where one is given (a run beside another, one core each). No ``recipe``: the
    parallel-text recipe, or the fine-tuning one where ``env`` names a parent (INIT)."""
    recipe = recipe or (FINETUNE if env.get("INIT") else PARALLEL_TEXT)
    with open(log, "a") as f:
        f.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')}{f' core {core}' if core is not None else ''}: {header}\n")
        f.flush()
        return subprocess.Popen(
            ["bash", recipe],
            env=env,
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if core is not None else None,
        )


def print_table(text: str, out=None) -> None:
    """A benchmark's result: printed, and written to ``out`` (markdown) when given."""
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def model_flags(impl, a):
    if impl == "vaswani":
        return [
            "--arch",
            "vaswani_base",
            "--encoder-layers",
            str(a.layers),
            "--decoder-layers",
            str(a.layers),
            "--d-model",
            str(a.d_model),
            "--d-ff",
            str(a.d_ff),
            "--attention-heads",
            str(a.heads),
        ]
    return [
        "--arch",
        "transformer",
        "--d-model",
        str(a.d_model),  # --d-model: for Eq. (3) only
        "--encoder-layers",
        str(a.layers),
        "--decoder-layers",
        str(a.layers),
        "--encoder-embed-dim",
        str(a.d_model),
        "--decoder-embed-dim",
        str(a.d_model),
        "--encoder-ffn-embed-dim",
        str(a.d_ff),
        "--decoder-ffn-embed-dim",
        str(a.d_ff),
        "--encoder-attention-heads",
        str(a.heads),
        "--decoder-attention-heads",
        str(a.heads),
    ]


def decode_and_score(data_bin: str, model: str, reference: str, prefix: str, label: str) -> dict:
    """``model`` on ``data_bin``'s test set, decoded and scored as the parallel-text recipe's stages 6-7 do (beam 4,
    lenpen 0.6, sacreBLEU and chrF against ``reference``): PREFIX.generate.txt, PREFIX.hyp.txt and PREFIX.json
    written; the scores returned."""
    generated, scores = prefix + ".generate.txt", prefix + ".json"
    with open(generated, "w") as f:
        subprocess.run(
            [
                os.path.join(BIN, "fairseq-generate"),
                data_bin,
                "--user-dir",
                PLUGIN,
                "--path",
                model,
                "--gen-subset",
                "test",
                "--beam",
                "4",
                "--lenpen",
                "0.6",
                "--max-len-a",
                "1",
                "--max-len-b",
                "50",
                "--post-process",
                "sentencepiece",
                "--batch-size",
                "128",
            ],
            check=True,
            stdout=f,
            stderr=subprocess.DEVNULL,
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_plugin_cli.tools.evaluate",
            "--generate-output",
            generated,
            "--reference",
            reference,
            "--hypotheses-out",
            prefix + ".hyp.txt",
            "--json",
            scores,
            "--label",
            label,
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    with open(scores) as f:
        return json.load(f)
