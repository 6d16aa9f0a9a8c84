"""The machine a figure is measured on: its processor, cores, torch, fairseq and this plugin, and its CUDA devices;
what decides the speed besides the probe's settings (a figure is kept under it)."""

import contextlib
import importlib.metadata
import os
import platform
from typing import Dict


def cuda_here() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def cuda_devices() -> int:
    import torch

    return torch.cuda.device_count()


def machine(device: str = "cpu") -> Dict[str, object]:
    """What decides the speed besides the probe's settings: processor, cores, torch and the CUDA device. torch's
    version is read from its metadata: a recipe's start imports torch only for a CUDA device's name."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    found = {
        "processor": model,
        "cores": os.cpu_count(),
        "torch": importlib.metadata.version("torch"),
        "fairseq": _version("fairseq-fixed", "fairseq"),
        "plugin": _version("transformer_plugin"),
    }
    if device == "cuda":
        import torch

        found["cuda_device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return found


def _version(*names: str) -> str:
    """The installed version of the first of ``names`` installed, else ''."""
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
    return ""
