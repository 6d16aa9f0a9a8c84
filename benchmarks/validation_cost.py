"""What a validation costs against training, on this machine: a dev set's target token scored (forward and loss, as
every validation does) and translated at beam 4 (what ``--eval-bleu`` adds: fairseq's SequenceGenerator over the dev
set, the plugin's search in tensors), each in training target tokens' time (an update of the probe's, timed as the
speed probe times it). The plan counts a validation at these figures (recipes/planner/probe_arithmetic.py:
VALID_TOKEN_COST, BEAM_TOKEN_COST).

The hypotheses are held to the dev set's own lengths (``min_len`` and ``max_len`` both the sentence's), as a trained
model's are about; an untrained one's run to ``max_len_b`` past them and cost more.

    python -m benchmarks.validation_cost --arch vaswani_base \\
        --model-flags "--encoder-layers 3 --decoder-layers 3 --d-model 256 --d-ff 1024 --attention-heads 4" \\
        --vocab-size 8000 --threads 1
"""

import argparse
import statistics
import time
from typing import Dict, List

from recipes.planner.speed import probing


def seconds_a_token(
    model, dictionary, sentences: int, length: int, beam: int, batch_tokens: int, device: str = "cpu"
) -> Dict[str, float]:
    """Seconds a dev target token scored, and translated at ``beam``, over ``sentences`` of ``length`` pieces."""
    import torch
    from fairseq.sequence_generator import SequenceGenerator

    def clock() -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    torch.manual_seed(0)
    model = model.to(device)
    n, eos = len(dictionary), dictionary.eos()
    per_batch = max(1, batch_tokens // length)
    batches: List = []
    for start in range(0, sentences, per_batch):
        b = min(per_batch, sentences - start)
        src = torch.randint(dictionary.nspecial, n, (b, length), device=device)
        tgt = torch.randint(dictionary.nspecial, n, (b, length), device=device)
        prev = torch.cat([torch.full((b, 1), eos, device=device), tgt[:, :-1]], dim=1)
        lengths = torch.full((b,), length, device=device)
        batches.append({"net_input": {"src_tokens": src, "src_lengths": lengths}, "prev": prev})
    model.eval()
    generator = SequenceGenerator([model], dictionary, beam_size=beam, max_len_a=0, max_len_b=length, min_len=length)
    tokens = sentences * length
    with torch.no_grad():
        began = clock()
        for batch in batches:
            logits, _ = model(**batch["net_input"], prev_output_tokens=batch["prev"])
            torch.log_softmax(logits.float(), dim=-1)
        scored = clock() - began
        began = clock()
        for batch in batches:
            generator.generate([model], {"net_input": batch["net_input"]})
        translated = clock() - began
    return {"scored": scored / tokens, "translated": translated / tokens}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="vaswani_base")
    p.add_argument("--model-flags", default="")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--tokens-per-update", type=int, default=4096)
    p.add_argument("--sentences", type=int, default=200, help="the dev set's sentences")
    p.add_argument("--length", type=int, default=25, help="each sentence's pieces, on both sides")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="cuda: the update timed as the probe times it"
    )
    a = p.parse_args(argv)
    import torch

    import transformer_plugin  # noqa: F401  (the architectures and the patches)

    torch.set_num_threads(a.threads)
    probe = probing.Probe(
        a.arch,
        a.model_flags,
        a.vocab_size,
        a.tokens_per_update,
        threads=a.threads,
        device=a.device,
        length=a.length,
        max_tokens=a.tokens_per_update if a.device == "cuda" else 0,
    )
    rounds = []
    for _ in range(a.rounds):  # alternating: training, then the validation's two parts, a round at a time
        update = probing.run_worker(probe, 0, 0)
        model, dictionary = probing.build_model(probe)
        found = seconds_a_token(model, dictionary, a.sentences, a.length, a.beam, a.tokens_per_update, a.device)
        training = update / a.tokens_per_update
        rounds.append((training, found["scored"] / training, found["translated"] / training))
    training, scored, translated = (statistics.median(r[i] for r in rounds) for i in range(3))
    print(f"model: {a.arch} {a.model_flags} | vocabulary {a.vocab_size:,} | {a.threads} thread(s)")
    print(f"a training target token: {training * 1e3:.3f} ms (updates of {a.tokens_per_update:,} tokens)")
    print(
        f"a dev target token scored: {scored:.2f} of a training token's time (rounds: "
        + ", ".join(f"{r[1]:.2f}" for r in rounds)
        + ")"
    )
    print(
        f"a dev target token translated at beam {a.beam}: {translated:.2f} of a training token's time (rounds: "
        + ", ".join(f"{r[2]:.2f}" for r in rounds)
        + ")"
    )


if __name__ == "__main__":
    main()
