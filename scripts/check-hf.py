#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bosch's numbers in a real stack (issue 19 item 5), run by scripts/check-hf.

1. A seeded head-level mask of SmolLM2 at --ratio is exported with
   `bosch convert --to kvpress`; kvpress's DuoAttentionPress, given that
   pattern directory at the head_compression_ratio it records, must mark
   exactly the mask's SWA heads as streaming heads (and nested sets at other
   ratios).
2. Hugging Face transformers loads the same GGUF file (torch on the CPU) and
   runs it with the mask through the package's per-KV-head attention
   function (bosch.hf.WindowedAttention, which examples/python/hf_evaluator.py
   uses too); the next-token log-probabilities of a few passkey samples
   (bosch.hf.make_passkey_samples) must equal `bosch logits --mask`'s within
   --tolerance, over every position and over the answer tokens.
Prints the figures and exits 1 when a check fails.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np


def bosch_logits(cli, model, ids, mask_file):
    args = [str(cli), "logits", str(model), *map(str, ids), "--quiet", "--allow-long-context"]
    if mask_file is not None:
        args += ["--mask", str(mask_file)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    rows = [np.array(line.split()[1:], dtype=np.float64) for line in out.splitlines() if line.strip()]
    return np.stack(rows)


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="GGUF file (SmolLM2-135M-Instruct Q4_1)")
    p.add_argument("--bosch", required=True, help="the bosch program")
    p.add_argument("--ratio", type=float, default=0.5)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--context", type=int, default=160)
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=5e-4, help="max |log p difference| (nats)")
    args = p.parse_args()

    import torch

    import bosch
    import bosch.hf

    torch.set_num_threads(2)
    model_path = pathlib.Path(args.model).expanduser().resolve()
    info = json.loads(subprocess.run([args.bosch, "inspect", str(model_path), "--json"], capture_output=True,
                                     text=True, check=True).stdout)["layout"]
    layout = bosch.HeadLayout(info["num_layers"], info["num_query_heads"], info["num_kv_heads"])
    rng = np.random.default_rng(args.seed)
    mask = np.zeros(layout.size, dtype=bool)
    mask[rng.choice(layout.size, bosch.target_count(layout, args.ratio), replace=False)] = True
    mask = mask.reshape(layout.shape)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        mask_file = tmp / "mask.json"
        bosch.write_mask(mask_file, mask, layout, metadata={"window": args.window, "sinks": args.sinks})
        subprocess.run([args.bosch, "convert", str(mask_file), "--to", "kvpress", "--model", str(model_path),
                        "-o", str(tmp / "pattern")], check=True)
        cfg = json.loads((tmp / "pattern" / "config.json").read_text())
        scores = np.clip(np.loadtxt(tmp / "pattern" / "full_attention_heads.tsv", delimiter="\t", ndmin=2), 0, 1)

        # ---- Hugging Face transformers on the same GGUF file, through bosch.hf's attention.
        attention = bosch.hf.WindowedAttention(args.window, args.sinks)
        tokenizer, model = bosch.hf.load_model(str(model_path.parent), attention, gguf_file=model_path.name)

        # ---- kvpress: the exported pattern's streaming heads.
        from kvpress import DuoAttentionPress

        DuoAttentionPress.load_attention_pattern = staticmethod(
            lambda _model: (cfg["sink_size"], cfg["recent_size"], scores))
        def initialized(ratio):  # post_init_from_model (kvpress 0.5), __post_init_from_model__ (0.4)
            press = DuoAttentionPress(head_compression_ratio=ratio)
            (getattr(press, "post_init_from_model", None) or press.__post_init_from_model__)(model)
            return press

        press = initialized(cfg["head_compression_ratio"])
        streaming = press.streaming_mask.cpu().numpy()
        wrong = int((streaming != mask).sum())
        print(f"kvpress: head_compression_ratio {cfg['head_compression_ratio']:.6f}, "
              f"{int(streaming.sum())} streaming heads, mask has {int(mask.sum())} SWA heads, "
              f"{wrong} heads differ; sink_size {press.sink_size}, recent_size {press.recent_size}")
        if wrong:
            failures.append("kvpress streaming heads differ from the mask")
        previous = None
        for k in range(0, layout.size + 1):
            s = initialized(k / layout.size).streaming_mask.cpu().numpy()
            if previous is not None and not (previous <= s).all():
                failures.append(f"kvpress streaming sets not nested at {k} heads")
                break
            previous = s

        # ---- log-probabilities: HF vs bosch, masked and full.
        samples = bosch.hf.make_passkey_samples(tokenizer, args.context, args.samples, args.seed)
        for label, swa, mfile in (("mask", mask, mask_file), ("full", np.zeros_like(mask), None)):
            attention.mask = swa
            worst, answer_diffs = 0.0, []
            for prompt_ids, answer_ids in samples:
                ids = prompt_ids + answer_ids
                with torch.no_grad():
                    hf = model(torch.tensor([ids])).logits[0].double().numpy()
                ours = bosch_logits(args.bosch, model_path, ids, mfile)
                nxt = np.array(ids[1:])
                lp_hf = log_softmax(hf)[np.arange(len(ids) - 1), nxt]
                lp_b = log_softmax(ours)[np.arange(len(ids) - 1), nxt]
                worst = max(worst, float(np.abs(lp_hf - lp_b).max()))
                a = slice(len(prompt_ids) - 1, len(ids) - 1)
                answer_diffs.append((float(lp_hf[a].mean()), float(lp_b[a].mean())))
            setup = f"window {args.window}, sinks {args.sinks}" if label == "mask" else "all heads full"
            print(f"{label}: {len(samples)} samples of {len(samples[0][0]) + len(samples[0][1])} tokens, "
                  f"{setup}: max |log p(HF) - log p(bosch)| over every "
                  f"position {worst:.2e}; answer mean log p (HF, bosch): "
                  + ", ".join(f"({h:.5f}, {b:.5f})" for h, b in answer_diffs))
            if worst > args.tolerance:
                failures.append(f"{label}: log-probabilities differ by {worst:.2e} > {args.tolerance}")
    for f in failures:
        print("FAILED:", f)
    print("check-hf:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
