"""benchmarks/process_memory.py: the memory of a process tree counts its children."""

import os
import subprocess
import sys

from benchmarks.process_memory import TreeMemory


def test_the_memory_of_a_process_tree_counts_its_children(tmp_path):
    script = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"
    child = subprocess.Popen([sys.executable, "-c", script])
    memory = TreeMemory(os.getpid(), interval=0.1)
    memory.start()
    child.wait()
    memory.stopped.set()
    memory.join()
    assert memory.take() > 200 * 2**20 and memory.take(anon=True) > 200 * 2**20  # the bytearray is anonymous memory
