"""What importing a BART-family model (MarianMT's, M2M100's and NLLB's dense ones, as transformers saves them) into a
``vaswani_transformer`` shares, whichever the family: its config read, its shape as this model's flags, the model
built through fairseq's parser, its layers copied (their coordinates renamed back where the family permutes them),
and the import written, whole or not at all, and said. import_marian.py and import_m2m100.py each add their own
family's vocabulary, embeddings and checks."""

import hashlib
import json
import operator
import os
import shutil
from typing import Dict, Iterator, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ImportRefused(ValueError):
    """HF_DIR is not a model this model can hold exactly, or a file is missing: the message names it."""


def file_digest(path: str) -> str:
    """sha256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ImportRefused(f"{path}: no such file") from None
    except ValueError as e:
        raise ImportRefused(f"{path}: not JSON ({e})") from None


def shape_flags(config: dict) -> List:
    """The ``vaswani_transformer`` flags of a BART-family config.json's shape (MarianMT's, M2M100's): its layers,
    widths, heads and dropouts."""
    return [
        "--encoder-layers",
        config["encoder_layers"],
        "--decoder-layers",
        config["decoder_layers"],
        "--d-model",
        config["d_model"],
        "--d-ff",
        config["encoder_ffn_dim"],
        "--attention-heads",
        config["encoder_attention_heads"],
        "--dropout",
        config.get("dropout", 0.1),
        "--attention-dropout",
        config.get("attention_dropout", 0.0),
        "--activation-dropout",
        config.get("activation_dropout", 0.0),
    ]


def build_model(flags: List[str], src_dict, tgt_dict):
    """The ``vaswani_transformer`` of these flags, through fairseq's own parser (every default a checkpoint holds)."""
    from fairseq import options

    from transformer_plugin.models.vaswani_transformer import VaswaniTransformerModel

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        [
            REPO,
            "--user-dir",
            os.path.join(REPO, "transformer_plugin"),
            "--task",
            "translation",
            "--arch",
            "vaswani_base",
            "--criterion",
            "vaswani_label_smoothed_cross_entropy",
            "--optimizer",
            "adam",
            "--lr-scheduler",
            "vaswani_inverse_sqrt",
            *map(str, flags),
        ],
    )

    class Task:
        source_dictionary, target_dictionary = src_dict, tgt_dict

    return VaswaniTransformerModel.build_model(args, Task()), args, ["--arch", "vaswani_base", *flags]


# Each part of one of our layers beside its name in a BART-family model, and how it meets the residual stream:
# "reads" it (its columns are the stream's coordinates), "writes" it (its rows and bias), a LayerNorm over it ("norm"),
# or "stacked": our one matrix of theirs, stacked by rows (the self-attention's q, k and v). The last field: the
# decoder's only.
LAYER_PARTS = (
    ("stacked", "self_attn.in_proj", "self_attn", ("q_proj", "k_proj", "v_proj"), False),
    ("writes", "self_attn.out_proj", "self_attn.out_proj", (), False),
    ("norm", "self_attn_sublayer.layer_norm", "self_attn_layer_norm", (), False),
    ("reads", "encoder_attn.q_proj", "encoder_attn.q_proj", (), True),
    ("stacked", "encoder_attn.kv_proj", "encoder_attn", ("k_proj", "v_proj"), True),
    ("writes", "encoder_attn.out_proj", "encoder_attn.out_proj", (), True),
    ("norm", "encoder_attn_sublayer.layer_norm", "encoder_attn_layer_norm", (), True),
    ("reads", "ffn.w_1", "fc1", (), False),
    ("writes", "ffn.w_2", "fc2", (), False),
    ("norm", "ffn_sublayer.layer_norm", "final_layer_norm", (), False),
)


def layer_parts(model) -> Iterator[Tuple[object, str, str, Tuple[str, ...]]]:
    """(our module, how it meets the stream, its BART-family name, the names stacked in it) for every part of every
    layer (LAYER_PARTS), the encoder's then the decoder's: the one walk both an import and an export take."""
    for side, layers in (("encoder", model.encoder.layers), ("decoder", model.decoder.layers)):
        for i, ours in enumerate(layers):
            for how, path, name, stacked, decoder_only in LAYER_PARTS:
                if side == "decoder" or not decoder_only:
                    yield operator.attrgetter(path)(ours), how, f"model.{side}.layers.{i}.{name}", stacked


def copy_layers(model, take, inverse) -> None:
    """Every encoder and decoder layer of a BART-family model into ours (``take(name)``: their tensor), the residual
    stream's coordinates renamed back by ``inverse``."""
    import torch

    for module, how, name, stacked in layer_parts(model):
        if how == "stacked":
            module.weight.copy_(torch.cat([take(f"{name}.{p}.weight")[:, inverse] for p in stacked]))
            module.bias.copy_(torch.cat([take(f"{name}.{p}.bias") for p in stacked]))
        elif how == "reads":
            module.weight.copy_(take(f"{name}.weight")[:, inverse])
            module.bias.copy_(take(f"{name}.bias"))
        else:  # writes, norm: rows (a LayerNorm's one) and bias
            module.weight.copy_(take(f"{name}.weight")[inverse])
            module.bias.copy_(take(f"{name}.bias")[inverse])


def copy_norm(layer_norm, take, name: str, inverse) -> None:
    layer_norm.weight.copy_(take(f"{name}.weight")[inverse])
    layer_norm.bias.copy_(take(f"{name}.bias")[inverse])


def write_import(
    out_dir: str,
    hf_dir: str,
    model,
    args,
    pair: Tuple[str, str],
    dictionaries,
    extra: Dict[str, object],
    files: Dict[str, str],
) -> None:
    """OUT_DIR whole or not at all: ``checkpoint.pt`` (the model as fairseq-train saves one, ``extra`` in its
    extra_state), ``dict.SRC.txt`` and ``dict.TGT.txt``, and ``files`` copied (name there: path here)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    from ..files import save_torch

    (src, tgt), (src_dict, tgt_dict) = pair, dictionaries
    partial = out_dir.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        state = {
            "args": None,
            "cfg": OmegaConf.to_container(convert_namespace_to_omegaconf(args), resolve=True, enum_to_str=True),
            "model": model.state_dict(),
            "criterion": None,
            "task_state": {},
            "optimizer_history": [
                {
                    "criterion_name": "VaswaniLabelSmoothedCrossEntropy",
                    "optimizer_name": "FairseqAdam",
                    "lr_scheduler_state": {"best": None},
                    "num_updates": 0,
                }
            ],
            "extra_state": {
                "train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True},
                "val_loss": None,
                "imported_from": os.path.abspath(hf_dir),
                **extra,
            },
            "last_optimizer_state": None,
        }
        src_dict.save(os.path.join(partial, f"dict.{src}.txt"))
        tgt_dict.save(os.path.join(partial, f"dict.{tgt}.txt"))
        # the dictionaries the checkpoint's rows are in: INIT= refuses a checkpoint beside other ones
        # (recipes.planner.parent)
        state["extra_state"]["dictionaries"] = {
            lang: file_digest(os.path.join(partial, f"dict.{lang}.txt")) for lang in (src, tgt)
        }
        save_torch(state, os.path.join(partial, "checkpoint.pt"))
        for name, path in files.items():
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(partial, name))
            else:
                shutil.copyfile(path, os.path.join(partial, name))
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(partial, out_dir)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def said_imported(hf_dir: str, path: str, flags: List[str], what: str = "") -> None:
    """What an import prints: the checkpoint written, and fairseq-train's flags for its model."""
    print(f"imported {hf_dir} -> {path}{f' ({what})' if what else ''}")
    print(
        f"its model, for fairseq-train --finetune-from-model {path}: --user-dir "
        f"{os.path.join(REPO, 'transformer_plugin')} " + " ".join(flags)
    )
