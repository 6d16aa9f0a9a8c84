"""What the plugin changes in fairseq, one module per defect, applied by ``register()``.

Each module names the defect, the upstream issue where there is one, and the fairseq version it was
checked against (``CHECKED_AGAINST``), and has ``apply()``. ``apply_all()`` applies them in the order
below and logs once which are active. They apply to every model in the process, fairseq's own
``transformer`` too (the speed benchmark's baseline runs under them).
"""

import importlib
import logging

logger = logging.getLogger(__name__)

PATCHES = [
    "debug_logging_at_import",  # first: it notes the root logger's handlers before anything imports fairseq
    "third_party_warnings",
    "training_progress",
    "time_repick",
    "shared_cores",
    "checkpoint_allowlist",  # before fairseq loads any checkpoint
    "last_batch",
    "atomic_checkpoint_copy",
    "interval_checkpoints",
    "resumed_batches",
    "finetune_clock",
    "bf16_is_not_tpu",
    "bf16_inference",
    "replace_unk",
    "no_repeat_ngram_on_cpu",
    "aligning_generator",
    "beam_search_in_tensors",
    "process_group_teardown",
    "cpu_launchers",
    "process_group_timeout",
    "foreach_grad_norm",
    "multi_tensor_adam",
    "multi_tensor_master_weights",
    "master_weights_in_checkpoints",
    "full_disk",  # last: around every other patch of checkpoint_utils.save_checkpoint
]

_applied = []


def apply_all() -> list:
    """Apply every patch (once per process) and log the list the first time; returns it."""
    if not _applied:
        for name in PATCHES:
            module = importlib.import_module(f"{__name__}.{name}")
            module.apply()
            _applied.append(f"{name} ({module.UPSTREAM})" if module.UPSTREAM else name)
        logger.info("transformer_plugin patches fairseq: %s", ", ".join(_applied))
    return list(_applied)
