"""The run report's curve of Eq. (3) takes d_model, warmup_steps and the multiplier from the checkpoint."""

import pytest
import torch

from transformer_plugin_cli.files import duration
from transformer_plugin_cli.tools.report import main, schedule_of, write_report


def checkpoint(path, lr_scheduler):
    torch.save({"model": {}, "cfg": {"lr_scheduler": lr_scheduler}}, path)
    return str(path)


def test_the_schedule_is_the_one_the_run_used(tmp_path):
    ckpt = checkpoint(
        tmp_path / "a.pt",
        {"_name": "vaswani_inverse_sqrt", "d_model": 256, "warmup_updates": 200, "lr_multiplier": 0.2263},
    )
    assert schedule_of(ckpt) == {"d_model": 256, "warmup": 200, "multiplier": 0.2263}


def test_a_peak_held_over_a_shorter_warmup_is_in_the_curve(tmp_path):
    ckpt = checkpoint(
        tmp_path / "p.pt",
        {
            "_name": "vaswani_inverse_sqrt",
            "d_model": 512,
            "warmup_updates": 200,
            "lr_multiplier": 1.0,
            "peak_warmup_updates": 4000,
        },
    )
    assert schedule_of(ckpt) == {"d_model": 512, "warmup": 200, "multiplier": pytest.approx((200 / 4000) ** 0.5)}


def test_fine_tunings_schedule_is_read_with_its_peak_and_ramp(tmp_path):
    """fairseq's inverse_sqrt (INIT='s, recipes/planner/finetuning.py): the peak is the optimizer's --lr."""
    path = tmp_path / "f.pt"
    lr_scheduler = {"_name": "inverse_sqrt", "warmup_updates": 30, "warmup_init_lr": -1}
    torch.save({"model": {}, "cfg": {"lr_scheduler": lr_scheduler, "optimization": {"lr": [3e-4]}}}, path)
    assert schedule_of(str(path)) == {"kind": "inverse_sqrt", "peak": 3e-4, "warmup": 30, "start": 0.0}


def test_another_schedule_is_named_and_the_flags_asked_for(tmp_path, capsys):
    ckpt = checkpoint(tmp_path / "b.pt", {"_name": "cosine", "warmup_updates": 4000})
    with pytest.raises(
        ValueError, match=r"b\.pt: not trained with --lr-scheduler vaswani_inverse_sqrt or inverse_sqrt; give --d-model"
    ):
        schedule_of(ckpt)
    log = tmp_path / "train.log"
    log.write_text('2026-01-01 | INFO | train_inner | {"epoch": 1, "update": 0.1, "loss": "5.0", "num_updates": "1"}\n')
    assert main(["--train-log", str(log), "--out-dir", str(tmp_path / "out")]) == 1
    assert "give --checkpoint, or --d-model and --warmup-updates" in capsys.readouterr().err


def test_the_report_says_how_long_training_took(tmp_path):
    """fairseq's wall clock at the last logged interval."""
    records = {
        "train_inner": [{"num_updates": 1200, "loss": 5.0, "nll_loss": 4.5, "lr": 1e-3, "wall": 2940.0}],
        "valid": [],
        "train": [],
    }
    schedule = {"d_model": 256, "warmup": 200, "multiplier": 1.0}
    path = write_report(str(tmp_path / "out"), records, {}, schedule, None, None, "a run", [])
    assert "- training took 49 min (fairseq's wall clock at update 1200)" in open(path).read()
    assert [duration(s) for s in (2940, 5400, 12240)] == ["49 min", "1.5 h", "3.4 h"]


def test_a_resumed_run_that_stopped_early_says_so_and_its_whole_time(tmp_path):
    """fairseq starts its wall clock again in a resumed run's process: the report said 79 min for a run of 95 (the
    EN-RU pick at TIME=200m), and nothing of the early stop that ended it at 5,728 of 7,053 updates."""
    lines = [
        "x | INFO | train_inner | "
        f'{{"num_updates": "{n}", "loss": "5.0", "nll_loss": "4.5", "lr": "0.001", "wall": "{w}"}}'
        for n, w in ((900, 875), (1000, 968), (900, 188), (5700, 4743))
    ]
    lines += [
        'x | INFO | valid | {"valid_loss": "6.708", "valid_nll_loss": "5.369", "valid_num_updates": "5728"}',
        "x | INFO | fairseq_cli.train | early stop since valid performance hasn't improved for last 10 runs",
    ]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    assert (
        main(
            ["--train-log", str(log), "--out-dir", str(tmp_path / "out"), "--d-model", "256", "--warmup-updates", "200"]
        )
        == 0
    )
    text = (tmp_path / "out" / "report.md").read_text()
    assert (
        "- training took 1.6 h (fairseq's wall clock at update 5700, added over its 2 processes: the run was resumed)"
        in text
    )
    assert (
        "- stopped early at update 5728: no better validation in the last --patience validations (fairseq-train's: "
        "the dev "
        "BLEU with --eval-bleu, else the loss)"
    ) in text
    log.write_text("\n".join(lines[2:-1]) + "\n")
    assert (
        main(
            ["--train-log", str(log), "--out-dir", str(tmp_path / "two"), "--d-model", "256", "--warmup-updates", "200"]
        )
        == 0
    )
    text = (tmp_path / "two" / "report.md").read_text()
    assert "- training took 79 min (fairseq's wall clock at update 5700)" in text and "stopped early" not in text
