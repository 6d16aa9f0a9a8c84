"""transformer_plugin: "Attention Is All You Need" as a fairseq --user-dir plugin.

Install with ``make install`` (see the README): it installs a CPU torch first, then fairseq-fixed
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
    python_requires=">=3.9",
    packages=find_packages(include=["transformer_plugin", "transformer_plugin.*", "preprocess", "preprocess.*"]),
    # Versions and reasons: requirements.txt. torch is not pinned here so that a GPU user keeps theirs.
    install_requires=[
        "torch>=2.6",
        "fairseq-fixed==0.12.3.1",
        "sentencepiece>=0.2.0",
        "sacrebleu>=2.4",
        "sacremoses>=0.1",
        "matplotlib>=3.8",
    ],
    extras_require={"test": ["pytest>=8"]},
    entry_points={
        "console_scripts": [
            "transformer-plugin-dir = transformer_plugin.__main__:main",
            "transformer-average-checkpoints = transformer_plugin.average_checkpoints:main",
        ]
    },
)
