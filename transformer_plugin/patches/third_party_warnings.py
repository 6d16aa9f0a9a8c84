"""The warnings fairseq's own calls raise in the libraries it uses, which tell a fairseq user nothing, silenced
by name; any other warning still shows.

A 1,200-update run of the parallel-text recipe printed about 60 such lines of its 491: hydra's deprecation
warnings for the API fairseq calls (``hydra.experimental.initialize`` and ``compose``, ``version_base``, the
``# @package _group_`` headers, schema matching, ``strict``), each twice (fairseq-train and fairseq-generate);
torch's FutureWarning for ``torch.cuda.amp.autocast`` in ``FairseqTask.train_step``; and torch's
``pin_memory`` warning on a machine without a GPU, where fairseq's iterators always ask for pinned memory.
(fairseq's "Please install tensorboardX" line, logged when ``import fairseq`` imports ``tasks/text_to_speech``,
comes before any plugin is loaded: requirements.txt installs tensorboardX instead.)
"""

import warnings

UPSTREAM = ""
CHECKED_AGAINST = "fairseq-fixed 0.12.3.1, hydra-core 1.3.2, torch 2.13.0"

# (category, the message's start as a regular expression, where it comes from)
SILENCED = [
    (UserWarning, r"hydra\.experimental\.initialize\(\) is no longer experimental", "fairseq.dataclass.utils"),
    (UserWarning, r"\s*The version_base parameter is not specified", "fairseq.dataclass.utils"),
    (UserWarning, r"hydra\.experimental\.compose\(\) is no longer experimental", "fairseq.dataclass.utils"),
    (UserWarning, r"In '[^']*': Usage of deprecated keyword in package header", "fairseq/config/*.yaml"),
    (UserWarning, r"\s*'[^']*' is validated against ConfigStore schema with the same name", "fairseq.dataclass.utils"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated", "fairseq.dataclass.utils"),
    (FutureWarning, r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated", "fairseq.tasks.fairseq_task"),
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found", "fairseq.data.iterators"),
]


def apply() -> None:
    for category, message, _ in SILENCED:
        warnings.filterwarnings("ignore", message=message, category=category)
