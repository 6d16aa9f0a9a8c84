"""A speed file: the machine that will train, measured there (``vaswani-speed-probe file``), read by a dry run
anywhere (SPEED_FILE=): seconds an update of each candidate model at a device's share of the batch, and the bandwidth
of the gradients' all-reduce."""

import json
import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from recipes.planner.speed import machine, probe_cache
from recipes.planner.speed.probing import Probe

SPEED_FILE_VERSION = 1


# a device's shares of an update timed (target tokens): the candidates' batches over 1 to 64 devices fall among them
SHARES = (256, 512, 1024, 2048, 4096, 8192, 16384, 25000)


# the gradients' all-reduce, GB/s a device, where not given: NVLink within a machine (NCCL's bus bandwidth on an
# 8-GPU NVLink machine is some hundreds; 100 is a low one), and between machines 100 Gb/s InfiniBand or RoCE
BANDWIDTH_WITHIN_GBS = 100.0


BANDWIDTH_BETWEEN_GBS = 12.5


class SpeedFileError(ValueError):
    pass


@dataclass
class SpeedFile:
    """Seconds an update of each candidate model at a device's share of the batch, measured on the machine that will
    train (``vaswani-speed-probe file``), and the bandwidth its gradients' all-reduce gets."""

    path: str
    device: str  # cuda or cpu
    device_name: str
    devices_here: int
    precision: str
    max_tokens_per_device: int
    vocab_size: int
    bandwidth_within_gbs: float
    bandwidth_between_gbs: float
    bandwidth_said: str  # "given" or "defaulted"
    measured: str
    models: List[Dict]  # {"arch", "model_flags", "seconds": {share: seconds}, "busy": ""}

    @classmethod
    def read(cls, path: str) -> "SpeedFile":
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise SpeedFileError(f"SPEED_FILE={path}: cannot be read ({e.strerror})") from None
        except ValueError:
            raise SpeedFileError(f"SPEED_FILE={path}: not JSON (vaswani-speed-probe file writes it)") from None
        if not isinstance(data, dict) or data.get("version") != SPEED_FILE_VERSION:
            raise SpeedFileError(
                f"SPEED_FILE={path}: not a speed file of version {SPEED_FILE_VERSION}: write it again with "
                "vaswani-speed-probe file"
            )
        try:
            return cls(path, **{k: x for k, x in data.items() if k != "version"})
        except TypeError as e:
            raise SpeedFileError(f"SPEED_FILE={path}: {e}") from None

    def model(self, arch: str, model_flags: str) -> Dict:
        for m in self.models:
            if (m["arch"], m["model_flags"]) == (arch, model_flags):
                return m
        raise SpeedFileError(
            f"SPEED_FILE={self.path} has no figures of {arch} {model_flags}: write it again with vaswani-speed-probe "
            "file (it times every candidate of the budget rule, and INIT='s parent with --parent DIR), or give "
            "MAX_UPDATE"
        )

    def seconds(self, arch: str, model_flags: str, share: float) -> float:
        """A device's seconds an update at ``share`` target tokens: between the shares timed, linearly; below the
        least, the least's (a device given fewer tokens is hardly faster); above the most, per token."""
        table = sorted((int(k), float(x)) for k, x in self.model(arch, model_flags)["seconds"].items())
        if share <= table[0][0]:
            return table[0][1]
        for (a, sa), (b, sb) in zip(table, table[1:]):
            if share <= b:
                return sa + (sb - sa) * (share - a) / (b - a)
        return table[-1][1] * share / table[-1][0]

    def all_reduce_seconds(self, parameters: int, devices: int, nodes: int) -> float:
        """The gradients' ring all-reduce an update: 2 (D - 1) / D of their bytes through each device's link, at the
        bandwidth between machines when there are several (none counted as overlapping the backward pass)."""
        if devices <= 1:
            return 0.0
        gradient_bytes = parameters * (2 if self.precision in ("bf16", "fp16") else 4)
        bandwidth = self.bandwidth_between_gbs if nodes > 1 else self.bandwidth_within_gbs
        return 2 * (devices - 1) / devices * gradient_bytes / (bandwidth * 1e9)

    def said(self, devices: int, nodes: int) -> str:
        where = "between machines" if nodes > 1 else "within the machine"
        bandwidth = self.bandwidth_between_gbs if nodes > 1 else self.bandwidth_within_gbs
        busy = [m["model_flags"] or m["arch"] for m in self.models if m.get("busy")]
        said = f"SPEED_FILE {self.path}: {self.device_name}, measured {self.measured}"
        if devices > 1:
            said += f", the all-reduce over {devices} devices at {bandwidth:g} GB/s {where}, {self.bandwidth_said}"
        if busy:
            said += f"; measured busy: {', '.join(busy)}"
        return said


def write_speed_file(
    path: str,
    models: List[tuple],
    device: str,
    precision: str,
    max_tokens_per_device: int,
    vocab_size: int,
    within_gbs: Optional[float],
    between_gbs: Optional[float],
    shares=SHARES,
    speed: Callable[[Probe], Dict[str, object]] = None,
    progress: Callable[[str], None] = print,
) -> Dict:
    """Time each of ``models`` ((arch, flags) pairs, or (arch, flags, vocabulary): a parent's, at its own) at each of
    ``shares`` on this machine's device and write the speed file at ``path``: what a dry run elsewhere reads
    (SPEED_FILE=) to plan for this machine."""
    speed = speed or (lambda probe: probe_cache.seconds_per_update(probe, fresh=True))
    found = []
    for arch, flags, *own in models:
        vocab = own[0] if own else vocab_size
        seconds, busy_said = {}, ""
        for share in shares:
            if device == "cuda":
                probe = Probe(
                    arch,
                    flags,
                    vocab,
                    share,
                    1,
                    1,
                    "cuda",
                    precision,
                    max_tokens=min(share, max_tokens_per_device),
                )
            else:
                probe = Probe(arch, flags, vocab, share, 1, os.cpu_count() or 1, "cpu", "fp32")
            figure = speed(probe)
            seconds[str(share)] = round(float(figure["seconds"]), 6)
            busy_said = busy_said or str(figure.get("busy") or "")
            progress(f"{arch} {flags}: {share:,} tokens a device, {seconds[str(share)]:.4f} s an update")
        found.append({"arch": arch, "model_flags": flags, "seconds": seconds, "busy": busy_said, "vocab_size": vocab})
    here = machine.machine(device)
    data = {
        "version": SPEED_FILE_VERSION,
        "device": device,
        "device_name": here.get("cuda_device") or here["processor"],
        "devices_here": machine.cuda_devices() if device == "cuda" else 1,
        "precision": precision,
        "max_tokens_per_device": max_tokens_per_device,
        "vocab_size": vocab_size,
        "bandwidth_within_gbs": within_gbs or BANDWIDTH_WITHIN_GBS,
        "bandwidth_between_gbs": between_gbs or BANDWIDTH_BETWEEN_GBS,
        "bandwidth_said": "given" if within_gbs or between_gbs else "defaulted, not measured",
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "models": found,
    }
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)
    return data
