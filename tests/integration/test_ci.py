"""CI's own plumbing: `.ci/run` runs every tier the README says it runs, and `make test-kernels`, whose two kernel
paths run side by side, fails when either fails and shows both, and leaves out the tests marked kernel_free and
compiles."""

import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ci_runs_every_tier_the_readme_names_and_each_is_a_make_target():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        [line] = [line for line in f if line.startswith("CI (`.ci/run`) runs")]
    named = re.findall(r"`(?:make )?(test[\w-]*)`", line.split(": ")[0])
    assert {"test", "test-e2e", "test-kernels", "test-pythons", "test-cluster"} <= set(named)
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as f:
        script = "".join(line for line in f if not line.lstrip().startswith("#"))
    called = re.findall(r"\bmake (?:-\S+ )*([\w-]+)", script)
    assert set(named) <= set(called), (named, called)
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([\w-]+):", f.read(), flags=re.M))
    assert set(called) <= targets


def run_kernel_paths(tmp_path, tests: str, *variables: str, timeout: int = 300):
    """make test-kernels over ``tests`` (a test file's text) with this environment and nothing installed: (the
    process, whether a failed run said it kept its files, which are removed)."""
    test = tmp_path / "test_path.py"
    test.write_text(tests)
    stamp = tmp_path / "installed"  # newer than setup.py and requirements.txt: make installs nothing
    stamp.touch()
    proc = subprocess.run(
        ["make", "-s", "test-kernels", f"KERNEL_TESTS={test}", f"STAMP={stamp}", f"VENV={sys.prefix}"]
        + [f"PYTHON={sys.executable}", "TEST_WORKERS=0", "PYTEST_ARGS=-p no:cacheprovider", *variables],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    kept = re.search(r"each path's files are kept under (\S+)", proc.stderr)
    if kept:
        shutil.rmtree(kept.group(1))
    return proc, bool(kept)


@pytest.mark.parametrize("failing", [None, "avx2"])
def test_the_kernel_paths_side_by_side_fail_when_one_fails_and_show_both(tmp_path, failing):
    proc, kept = run_kernel_paths(
        tmp_path,
        "import os\n\nimport pytest\n\n\ndef test_path():\n    assert os.environ.get('ATEN_CPU_CAPABILITY') != "
        f"{failing!r}\n"
        "\n\n@pytest.mark.kernel_free\ndef test_a_count():\n    assert False, 'the kernel paths ran a kernel_free "
        "test'\n"
        "\n\n@pytest.mark.compiles\ndef test_a_compilation():\n    assert False, 'the kernel paths ran a compiles "
        "test'\n",
    )
    default, avx2 = proc.stdout.split("==== ATEN_CPU_CAPABILITY=default")[1].split("==== ATEN_CPU_CAPABILITY=avx2")
    assert "1 passed, 2 deselected" in default
    if failing:
        assert proc.returncode != 0 and "1 failed, 2 deselected" in avx2 and kept, (
            proc.stdout[-2000:] + proc.stderr[-2000:]
        )
    else:
        assert proc.returncode == 0 and "1 passed, 2 deselected" in avx2 and not kept, (
            proc.stdout[-2000:] + proc.stderr[-2000:]
        )


def test_install_pythons_makes_the_environments_test_pythons_uses():
    """CI installs Python 3.12 ahead, beside make test's own install (make install-pythons): test-pythons must find
    that environment made, so both must name the same interpreter and environment for each version."""

    def chosen(target):
        # -n: make prints the installs; a line that calls make runs, so test-pythons' pytest runs: --version only
        proc = subprocess.run(
            ["make", "-n", target, "PYTHONS=3.11 3.12 3.13 3.99", f"VENV={sys.prefix}", "PYTHON_TESTS=--version"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return re.findall(r"^==== (Python .*)$", proc.stdout, flags=re.M), proc.stdout + proc.stderr

    installed, out = chosen("install-pythons")
    tested, _ = chosen("test-pythons")
    assert installed and installed == tested, out[-2000:]
    ours = "%d.%d" % sys.version_info[:2]
    assert [
        line for line in installed if line.startswith(f"Python {ours} (") and line.endswith(f"environment {sys.prefix}")
    ]
    assert "Python 3.99: skipped, not on this machine" in out


def test_a_kernel_path_that_hangs_is_ended_and_fails(tmp_path):
    """A path still running after KERNEL_PATH_TIMEOUT is ended and fails test-kernels, saying which (a crashed
    pytest-xdist worker once left a path waiting until CI's own limit)."""
    proc, kept = run_kernel_paths(
        tmp_path,
        "import os\nimport time\n\n\ndef test_path():\n"
        "    if os.environ.get('ATEN_CPU_CAPABILITY') == 'avx2':\n        time.sleep(60)\n",
        "KERNEL_PATH_TIMEOUT=8s",
        timeout=60,
    )
    assert proc.returncode != 0 and kept, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AVX2,ONEDNN_MAX_CPU_ISA=AVX2: ended after KERNEL_PATH_TIMEOUT=8s" in (
        proc.stdout
    )
    assert "1 passed" in proc.stdout.split("==== ATEN_CPU_CAPABILITY=avx2")[0]
