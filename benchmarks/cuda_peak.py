"""Run one of fairseq's console scripts in this process, then print the CUDA memory it peaked at.

    python benchmarks/cuda_peak.py fairseq-train data-bin ...

The last line of the output is ``cuda peak memory: N MiB`` (torch.cuda.max_memory_allocated: the
tensors' memory, without the caching allocator's reserve). benchmarks/speed.py runs the training and
generation commands through this on a GPU, where the process's resident memory says nothing.
"""

import atexit
import sys
from importlib.metadata import entry_points


def main() -> None:
    tool, *args = sys.argv[1:]
    found = [script for script in entry_points(group="console_scripts") if script.name == tool]
    if not found:
        sys.exit(f"cuda_peak: no console script {tool} in this environment")
    import torch

    atexit.register(lambda: print(f"cuda peak memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB", flush=True))
    sys.argv = [tool, *args]
    sys.exit(found[0].load()())


if __name__ == "__main__":
    main()
