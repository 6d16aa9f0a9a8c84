"""What importing the package does: tools start without fairseq, and fairseq always finds the plugin registered."""

import subprocess
import sys

import pytest

LIGHT_TOOLS = ["transformer_plugin.evalb", "transformer_plugin.trees", "transformer_plugin.table3",
               "transformer_plugin.evaluate", "transformer_plugin.__main__"]  # fmt: skip


def python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("tool", LIGHT_TOOLS)
def test_tools_that_do_not_need_fairseq_do_not_import_it(tool):
    assert python(f"import sys, {tool}; print('fairseq' in sys.modules)") == "False"


@pytest.mark.parametrize("fairseq_first", [False, True])
def test_fairseq_finds_the_plugin_registered_whichever_is_imported_first(fairseq_first):
    imports = ["import transformer_plugin", "import fairseq.models, fairseq.criterions, fairseq.optim.lr_scheduler"]
    code = "; ".join(imports[::-1] if fairseq_first else imports) + """
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.optim.lr_scheduler import LR_SCHEDULER_REGISTRY
import fairseq.checkpoint_utils as cu
print('vaswani_big' in ARCH_MODEL_REGISTRY, 'vaswani_label_smoothed_cross_entropy' in CRITERION_REGISTRY,
      'vaswani_inverse_sqrt' in LR_SCHEDULER_REGISTRY, getattr(cu.load_checkpoint_to_cpu, '__transformer_plugin_patch__', False))"""
    assert python(code).splitlines()[-1] == "True True True True"
