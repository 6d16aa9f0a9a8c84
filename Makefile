# Set-up and entry points. On a fresh machine:
#   make test    create .venv, install everything (CPU torch by default), run the default test suite:
#                the unit tier (tests/unit, in-process, about a minute) and the integration tier
#                (tests/integration: fairseq's CLIs and the recipes at toy size)
#   make test-unit   only the unit tier
#   make test-gpu    only the GPU tier (tests/gpu: half precision, fused attention; skipped without CUDA)
#   make test-cluster    the cluster tier (tests/cluster): two hosts made here, torchrun and SLURM (root)
#   make test-transformers4   the Transformers export through transformers 4.57's pipeline("translation")
#   make demo    same set-up, then the end-to-end demo (recipes/demo.sh)
#   make bench   same set-up, then the speed benchmark against fairseq's transformer (benchmarks/speed.py)
#   make bench-learning   same set-up, then how fast both learn per update on real text (benchmarks/learning.py)
#   make bench-serving    after `make demo`: fairseq-generate against CTranslate2 fp32/int8 on the demo's model
#   make bench-cluster    two hosts made here against one host at the same world size (root)
#
# Variables:
#   PYTHON=python3            interpreter that creates the virtual environment
#   VENV=.venv                where the environment lives
#   TORCH=torch==2.13.0       torch to install (the CPU build on this kind of machine). A GPU user who
#                             has torch already: `make test TORCH= VENV_FLAGS=--system-site-packages`
#                             keeps that torch (fairseq's extensions are then built against it).
#   VENV_FLAGS=               extra flags for `python -m venv`
#   PYTEST_ARGS=              extra pytest arguments, e.g. PYTEST_ARGS="-k parity -x"

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
VENV_FLAGS ?=
PYTEST_ARGS ?=
FAIRSEQ := fairseq-fixed==0.12.3.1

PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install test test-unit test-slow test-gpu test-cluster cluster-packages test-transformers4 demo bench \
	bench-learning bench-serving bench-cluster clean

install: $(STAMP)

$(STAMP): setup.py requirements.txt
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	@if [ -n "$(TORCH)" ]; then $(PIP) install "$(TORCH)"; \
	else $(PY) -c "import torch" || { echo "TORCH= given but no torch is importable in $(VENV)" >&2; exit 1; }; fi
	$(PIP) install -r requirements.txt
	@# fairseq-fixed is an sdist: build its extensions against the torch above, without pip's
	@# isolated build environment (which would pull another torch) and without its torchaudio pin.
	$(PY) -c "import importlib.metadata as m, sys; sys.exit(m.version('fairseq-fixed') != '0.12.3.1')" 2>/dev/null || \
		MAX_JOBS=2 $(PIP) install --no-build-isolation --no-deps "$(FAIRSEQ)"
	$(PIP) install --no-deps --no-build-isolation -e .
	$(PY) -c "import transformer_plugin, fairseq; print('fairseq', fairseq.__version__, 'plugin', transformer_plugin.__version__)"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest tests $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The Transformers export through transformers 4.57, whose pipeline("translation") transformers 5 removed:
# that version goes into .transformers4 (pip --target, beside the pinned 5.x), and the test puts it first
# on the path of a subprocess.
test-transformers4: $(STAMP)
	$(PIP) install -q --target .transformers4 "transformers==4.57.1"
	TRANSFORMERS4=.transformers4 $(PY) -m pytest tests/integration/test_export_transformers.py -m transformers4 $(PYTEST_ARGS)

# The slow tier (tests/slow and the tests marked slow elsewhere: learnability, the demo's BLEU bar, a
# Table 3 row at toy size); not part of `make test`.
test-slow: $(STAMP)
	$(PY) -m pytest tests -m slow $(PYTEST_ARGS)

# The cluster tier (tests/cluster): two hosts made on this machine as network namespaces, and a SLURM cluster
# of them (munged, slurmctld, a slurmd per host, started and ended by the tests), running the multi-machine
# commands of docs/several-machines.md at toy size, faults included (~6 min on 2 cores). Needs root, ip netns,
# and Debian's slurm-wlm and munge (`make cluster-packages`); skipped, naming what is missing, without them.
test-cluster: $(STAMP)
	$(PY) -m pytest tests/cluster -m cluster $(PYTEST_ARGS)

# Two hosts against one at the same world size (updates/s under torchrun; root and ip netns; ~4 min).
bench-cluster: $(STAMP)
	$(PY) -m benchmarks.cluster --work runs/cluster --rounds 3 --out runs/cluster/cluster.md

cluster-packages:
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge

# The GPU tier (tests/gpu; skipped by `make test` where torch sees no CUDA device).
test-gpu: $(STAMP)
	$(PY) -m pytest tests/gpu $(PYTEST_ARGS)

# Speed against fairseq's built-in transformer (issue "Speed"); prints a table, ~15 min on 2 cores.
bench: $(STAMP)
	$(PY) -m benchmarks.speed --work runs/bench --repeats 3 --out runs/bench/speed.md

# Learning per update against fairseq's built-in transformer on a real English-German corpus from Debian's
# translation catalogues (downloaded with apt-get); both models, two seeds, 1,200 updates: ~3.5 hours on 2 cores.
bench-learning: $(STAMP)
	$(PY) -m benchmarks.learning --work runs/learning --out runs/learning/learning.md

# Serving the demo's averaged model: fairseq-generate with the plugin against CTranslate2 fp32 and int8 (~2 min).
bench-serving: $(STAMP)
	$(PY) -m benchmarks.serving --checkpoint runs/demo/checkpoints/average.pt --data-bin runs/demo/data-bin \
		--spm runs/demo/data/spm.model --reference runs/demo/data/test.tgt --out runs/demo/serving.md

demo: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" bash recipes/demo.sh

clean:
	rm -rf $(VENV) build *.egg-info
