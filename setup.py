"""transformer_plugin: "Attention Is All You Need" as a fairseq --user-dir plugin, the data preparation of
its recipes (preprocess) and its tools (transformer_plugin_cli), the last two as vaswani-* console scripts.

Install with ``make install`` (see the README): it installs torch first, then fairseq-fixed
built against that torch, then this package. A plain ``pip install .`` on a machine without torch
would let pip pick a CUDA build of torch; a GPU user who already has torch keeps it.
"""

from setuptools import find_packages, setup

setup(
    name="transformer_plugin",
    version="0.1.0",
    description='"Attention Is All You Need" (Vaswani et al., 2017) as a fairseq user-dir plugin',
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.14",  # what is tested: the Makefile's SUPPORTED_PYTHONS (make test-pythons)
    packages=find_packages(
        include=[
            "transformer_plugin",
            "transformer_plugin.*",
            "preprocess",
            "transformer_plugin_cli",
            "transformer_plugin_cli.*",
            "recipes",
            "recipes.*",
        ]
    ),
    # Versions and reasons: requirements.txt. torch is not pinned here so that a GPU user keeps theirs.
    install_requires=[
        "torch>=2.6",
        "fairseq-fixed==0.12.3.1",
        "sentencepiece>=0.2.0",
        "sacrebleu>=2.4",
        "sacremoses>=0.1",
        "matplotlib>=3.8",
        "transformers>=5.0",
        "py3langid>=0.3",
        "pycountry>=24.6",
    ],
    extras_require={"test": ["pytest>=8"]},
    # preprocess/__init__.py and transformer_plugin_cli/__init__.py list them by job;
    # tests/integration/test_package.py checks the lists
    entry_points={
        "console_scripts": [
            "vaswani-user-dir = transformer_plugin_cli.tools.user_dir:main",
            "vaswani-average-checkpoints = transformer_plugin_cli.tools.average_checkpoints:main",
            "vaswani-evaluate = transformer_plugin_cli.tools.evaluate:main",
            "vaswani-report = transformer_plugin_cli.tools.report:main",
            "vaswani-table3 = transformer_plugin_cli.tools.table3:main",
            "vaswani-convert = transformer_plugin_cli.tools.convert:main",
            "vaswani-speed-probe = recipes.planner.speed.cli:main",
            "vaswani-export-ct2 = transformer_plugin_cli.serving.export_ctranslate2:main",
            "vaswani-translate = transformer_plugin_cli.serving.translate:main",
            "vaswani-export-hf = transformer_plugin_cli.serving.export_transformers:main",
            "vaswani-import-marian = transformer_plugin_cli.serving.import_marian:main",
            "vaswani-import-m2m100 = transformer_plugin_cli.serving.import_m2m100:main",
            "vaswani-parent = recipes.planner.parent:main",
            "vaswani-evalb = transformer_plugin_cli.parsing.evalb:main",
            "vaswani-prepare-ptb = preprocess.ptb:main",
            "vaswani-prepare-wmt14 = preprocess.wmt14:main",
            "vaswani-sentencepiece = preprocess.sentencepiece_vocab:main",
            "vaswani-synthetic-pair = preprocess.synthetic_pair:main",
            "vaswani-prepare-debian-l10n = preprocess.debian_l10n:main",
            "vaswani-prepare-parallel-text = preprocess.parallel_text:main",
            "vaswani-shard-text = preprocess.shards:main",
            "vaswani-paper-flags = transformer_plugin_cli.paper:main",
        ]
    },
)
