"""What comes after training, decided with the plan: fairseq-generate's flags, and the exports a parent allows."""

from typing import Dict, List, Optional

from recipes.planner.plan import PlanError
from recipes.planner.variables import Variables
from transformer_plugin_cli.paper import DECODING, decoding_flags


def decoding(v: Variables, parent: Optional[Dict[str, str]] = None) -> List[str]:
    """fairseq-generate's flags: the paper's beam search (Section 6.1), BEAM and LENPEN where given; with an NLLB or
    M2M100 parent its first target token forced, the target's code leading each reference (--prefix-size 1)."""
    flags = decoding_flags(v.number("BEAM"), v.decimal("LENPEN"), None, DECODING)
    return flags + (["--prefix-size", "1"] if parent and parent.get("PARENT_TGT_CODE") else [])


def check_export(v: Variables, model_flags: str, kind: str = "") -> None:
    if "ct2" in v.get("EXPORT").split() and kind == "m2m100":
        raise PlanError(
            f"EXPORT={v.get('EXPORT')} and INIT={v.get('INIT')}: an NLLB or M2M100 child goes to CTranslate2 through "
            "its Hugging Face export: EXPORT=hf, then ct2-transformers-converter --model WORK/hf"
        )
    if "ct2" in v.get("EXPORT").split() and "--decoder-start pad" in f" {model_flags} ":
        raise PlanError(
            f"EXPORT={v.get('EXPORT')} and INIT={v.get('INIT')}: the parent decodes from <pad> (MarianMT's start), "
            "which the CTranslate2 export does not hold: EXPORT=hf"
        )
