"""transformer_plugin_cli/tools/table3.py: the rows of Table 3 as flags, and the collected table."""

import pytest

from transformer_plugin_cli.tools import table3


def test_rows_follow_the_paper():
    rows = table3.ROWS_BY_ID
    assert len(table3.ROWS) == 20
    assert rows["A-h1"].flags == {"--attention-heads": "1", "--d-k": "512", "--d-v": "512"}
    assert rows["B-dk16"].flags == {"--d-k": "16"}  # row (B) changes d_k only; d_v stays 64
    assert rows["C-dmodel256"].flags == {"--d-model": "256", "--d-k": "32", "--d-v": "32"}
    assert rows["D-ls0.2"].flags == {"--label-smoothing": "0.2"}
    assert rows["E-learned"].flags == {"--positional-encoding": "learned"}
    assert (rows["base"].ppl, rows["base"].bleu, rows["big"].ppl, rows["big"].bleu) == (4.92, 25.8, 4.33, 26.4)
    assert rows["big"].big and not any(r.big for r in table3.ROWS if r.id != "big")


@pytest.mark.parametrize("row", [r for r in table3.ROWS if not r.big], ids=lambda r: r.id)
def test_every_rows_flags_parse_and_change_the_model(row, tmp_path):
    """fairseq-train's own parser takes each row's flags, and the model built from the configuration
    fairseq makes of them has the row's sizes."""
    from fairseq import models, options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from helpers import REPO, DummyTask, make_dictionary

    argv = [
        str(tmp_path),
        "--user-dir",
        f"{REPO}/transformer_plugin",
        "--task",
        "translation",
        "--arch",
        "vaswani_base",
        "--criterion",
        "vaswani_label_smoothed_cross_entropy",
        "--share-all-embeddings",
        *[word for item in row.flags.items() for word in item],
    ]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    settings = {**cfg.model, "label_smoothing": cfg.criterion.label_smoothing}
    expected = dict(
        encoder_layers=6,
        d_model=512,
        d_ff=2048,
        attention_heads=8,
        dropout=0.1,
        label_smoothing=0.1,
        positional_encoding="sinusoidal",
    )
    for name, value in row.flags.items():
        key = name[2:].replace("-", "_")
        expected[key] = type(expected.get(key, 0))(value) if key in expected else int(value)
    assert {k: settings[k] for k in expected} == expected
    if "--d-model" in row.flags or "--encoder-layers" in row.flags:
        return  # sizes checked above; building the large ones is slow
    model = models.build_model(cfg.model, DummyTask(make_dictionary(100)))
    h = int(row.flags.get("--attention-heads", 8))
    d_k, d_v = (int(row.flags.get(f, 512 // h)) for f in ("--d-k", "--d-v"))
    attention = model.encoder.layers[0].self_attn
    assert (attention.h, attention.d_k, attention.d_v) == (h, d_k, d_v)
    assert attention.in_proj.weight.shape == (h * (2 * d_k + d_v), 512)
    learned = [n for n, _ in model.named_parameters() if "position" in n]
    assert bool(learned) == (row.id == "E-learned")


def test_read_valid_ppl(tmp_path):
    log = tmp_path / "validate.log"
    log.write_text('INFO | valid | {"valid_loss": "5.4", "valid_nll_loss": "4.7", "valid_ppl": "26.2", "x": "1"}\n')
    assert table3.read_valid_ppl(str(log)) == 26.2
    assert table3.read_valid_ppl(str(tmp_path / "missing.log")) is None


def test_collect_marks_rows_not_run(tmp_path):
    table = table3.collect(str(tmp_path), ["base", "C-N2"])
    lines = table.splitlines()
    assert lines[2].startswith("| base base | N=6") and "| - | 4.92 | - | 25.8 | - | 65 |" in lines[2]
    assert "| (C) C-N2 | N=2 | - | 6.11 | - | 23.7 | - | 36 |" in lines[3]
    with pytest.raises(KeyError, match="unknown Table 3 row 'Z'"):
        table3.collect(str(tmp_path), ["Z"])
