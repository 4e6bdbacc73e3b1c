#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How far kvpress's order of work moves a mask's answers from bosch's.

    python docs/results/pytorch-route/kvpress_vs_bosch.py MASK.json [MODEL.gguf] [--context 512]

On the held-out samples of bosch's own evaluator (TransformerEvaluator
(...).samples("held_out"): other seeds and text halves than calibration),
each sample's answer is teacher-forced three ways in transformers on the
same GGUF weights:

- bosch: the mask's windows in every position (bosch.hf, what bosch scores);
- kvpress: bosch.kvpress.MaskPress on the prompt (full-attention prefill,
  then the SWA heads' keys outside sinks + the last w - 1 masked), then the
  answer tokens decoded one by one through the cache;
- all-full: no mask.

Prints the mean answer log-probability and the share of samples whose every
answer token is the argmax (teacher-forced exact answer), with 95% bootstrap
intervals, and the paired differences kvpress - bosch and kvpress - all-full
over the same samples.
"""

import argparse
import json
import os
import pathlib

import numpy as np
import torch


def bootstrap(x, reps=10000, seed=0):
    rng = np.random.default_rng(seed)
    x = np.asarray(x, float)
    means = x[rng.integers(0, len(x), (reps, len(x)))].mean(1)
    return x.mean(), np.quantile(means, 0.025), np.quantile(means, 0.975)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mask")
    p.add_argument("model", nargs="?",
                   default=str(pathlib.Path.home() / ".cache/bosch/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--held-out-samples", type=int, default=8)
    args = p.parse_args()
    os.environ["TQDM_DISABLE"] = "1"
    torch.set_num_threads(2)
    import transformers

    import bosch
    import bosch.hf
    from bosch.kvpress import MaskPress

    f = bosch.read_mask(args.mask)
    window, sinks = f.metadata["window"], f.metadata.get("sinks", 0)
    model_path = pathlib.Path(args.model)
    cpp = bosch.TransformerEvaluator(str(model_path), context=args.context, window=window, sinks=sinks,
                                     held_out_samples=args.held_out_samples, precision="fp32")
    samples = cpp.samples("held_out")
    attention = bosch.hf.WindowedAttention.from_mask(f)
    _, windowed = bosch.hf.load_model(str(model_path.parent), attention, gguf_file=model_path.name)
    plain = transformers.AutoModelForCausalLM.from_pretrained(str(model_path.parent), gguf_file=model_path.name,
                                                              dtype=torch.float32, attn_implementation="sdpa").eval()
    press = MaskPress(f)

    def answer_scores(logits, answer):
        logp = torch.log_softmax(logits.double(), -1)
        a = torch.tensor(answer)
        return logp[torch.arange(len(answer)), a].mean().item(), bool((logits.argmax(-1) == a).all())

    rows = {"bosch": [], "kvpress": [], "all-full": []}
    with torch.no_grad():
        for s in samples:
            prompt, answer = s["prompt"], s["answer"]
            ids = torch.tensor([prompt + answer])
            n = len(prompt)
            rows["bosch"].append(answer_scores(windowed(ids).logits[0, n - 1:-1], answer))
            attention.mask = np.zeros_like(f.mask)
            rows["all-full"].append(answer_scores(windowed(ids).logits[0, n - 1:-1], answer))
            attention.mask = f.mask
            cache = transformers.DynamicCache(config=plain.config)
            with press(plain):
                first = plain(torch.tensor([prompt]), past_key_values=cache).logits[0, -1:]
            steps = [first]
            for t in answer[:-1]:  # decode the answer through the masked cache
                steps.append(plain(torch.tensor([[t]]), past_key_values=cache).logits[0, -1:])
            rows["kvpress"].append(answer_scores(torch.cat(steps), answer))
    out = {"mask": args.mask, "model": model_path.name, "context": args.context, "window": window, "sinks": sinks,
           "samples": len(samples), "tasks": sorted({s["task"] for s in samples})}
    print(f"{model_path.name}, {args.mask} (window {window}, sinks {sinks}), {len(samples)} held-out samples "
          f"at {args.context} tokens")
    print("| runtime | answer log-prob [95%] | exact answers [95%] |\n|---|---|---|")
    for k, v in rows.items():
        lp, acc = np.array([x[0] for x in v]), np.array([x[1] for x in v], float)
        m, lo, hi = bootstrap(lp)
        a, alo, ahi = bootstrap(acc)
        out[k] = {"logprob": [m, lo, hi], "exact": [a, alo, ahi], "per_sample": lp.tolist()}
        print(f"| {k} | {m:.3f} [{lo:.3f}, {hi:.3f}] | {a:.2f} [{alo:.2f}, {ahi:.2f}] |")
    for a, b in (("kvpress", "bosch"), ("kvpress", "all-full"), ("bosch", "all-full")):
        d = np.array([x[0] for x in rows[a]]) - np.array([x[0] for x in rows[b]])
        m, lo, hi = bootstrap(d)
        flips = sum(x[1] != y[1] for x, y in zip(rows[a], rows[b]))
        out[f"{a} - {b}"] = {"logprob": [m, lo, hi], "exact_flips": flips}
        print(f"paired {a} - {b}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}] nats; exact answer differs on {flips} samples")
    dest = pathlib.Path(__file__).parent / "kvpress-vs-bosch.json"
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    tmp.replace(dest)


if __name__ == "__main__":
    main()
