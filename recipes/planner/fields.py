"""The plan as the recipe reads it back: its fields, scalars and arrays, as NUL-separated records (lib.sh's
``plan_read``), never as shell code. Each reaches the recipe as ``PLAN_<NAME>`` (``PLAN_MAX_UPDATE``, ``PLAN_ARCH``):
what the plan decided has names of its own, and the variables the user set keep the values the user gave them."""

import json
from typing import Dict

from recipes.planner.plan import Plan
from recipes.planner.settings import precision_args
from recipes.planner.variables import Variables


PREFIX = "PLAN_"  # every field's, as the recipe reads it


def fields(plan: Plan, v: Variables) -> Dict[str, object]:
    """The plan's fields: a name (``PREFIX`` added as the recipe reads it) and a string, or a list of words (a bash
    array)."""
    m, b, s, budget = plan.model, plan.batch, plan.schedule, plan.budget
    p = plan.parent or {}
    found: Dict[str, object] = {
        "VOCAB_SIZE": str(m["vocab_size"]),
        "JOINT_VOCAB": "1" if m["joint"] else "0",
        "SPM_TYPE": v.get("SPM_TYPE", "bpe"),
        "ARCH": m["arch"],
        "MODEL_FLAGS": m["model_flags"],
        "MODEL_ARGS": m["model_flags"].split(),
        "SHARE_ARGS": m["share"],
        "DROPOUT": m["dropout"],
        "TOKENS_PER_UPDATE": str(b["tokens_per_update"]),
        "MAX_TOKENS_PER_DEVICE": str(b["max_tokens_per_device"]),
        "MAX_UPDATE": str(budget["max_update"]),
        "STOP_TIME_ARGS": budget["stop"],
        "TIME_FILLS": budget.get("time_fills", "0"),
        "REPICK": json.dumps(budget["repick"]) if budget.get("repick") else "",
        "PRECISION_ARGS": precision_args(v.get("PRECISION")),
        "WARMUP": str(s["warmup"]),
        "PEAK_WARMUP_ARGS": ["--peak-warmup-updates", str(s["peak_warmup"])] if s["peak_warmup"] else [],
        "SAVE_INTERVAL_UPDATES": str(s["save_interval_updates"]),
        "AVERAGE_LAST": str(s["average_last"]),
        "PATIENCE": str(s["patience"]),
        "EVAL_BLEU": "1" if s["eval_bleu"] else "0",
        "HANDED_OVER": s.get("handed_over", "average"),
        "HELD_OUT_ARGS": [
            w for split, n in (s.get("held_out") or {}).items() if n for w in (f"--{split}-size", str(n))
        ],
        "PAIRS": str(plan.corpus["pairs"]),
        "SIZE_CLASS": plan.corpus["size_class"],
        "INPUT_FILES": plan.corpus["input_files"],
        "TRAINING": plan.flags["training"],
        "DECODING": plan.flags["decoding"],
        **{name.upper(): str(b[name]) for name in ("per_node", "devices", "update_freq", "max_tokens")},
        "BATCH_SUMMARY": b["batch_summary"],
        "MASTER_ADDR": b["master_addr"],
        "MASTER_PORT": b["master_port"],
        **p,
    }
    return found


def encode_fields(found: Dict[str, object]) -> bytes:
    """``s PLAN_NAME VALUE`` and ``a PLAN_NAME COUNT WORD...`` records, NUL-separated: what lib.sh's plan_run reads."""
    out = []
    for name, value in found.items():
        if isinstance(value, list):
            out += ["a", PREFIX + name, str(len(value)), *value]
        else:
            out += ["s", PREFIX + name, str(value)]
    return b"".join(w.encode("utf-8", "surrogateescape") + b"\0" for w in out)
