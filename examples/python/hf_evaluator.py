#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""BOSCH on a Hugging Face model: per-head sliding windows through
block-sparse FlexAttention (bosch.hf, docs/pytorch.md), scored in PyTorch.

    pip install torch "transformers>=5"
    python examples/python/hf_evaluator.py --model HuggingFaceTB/SmolLM2-135M-Instruct \\
        --ratio 0.5 --window 64 --context 512 -o mask.json

The model and the per-KV-head attention are the package's `bosch.hf`: every
attention layer of the model is routed through `bosch.hf.WindowedAttention`
(registered with transformers' AttentionInterface): a query head sees all
earlier keys when its KV head is full attention, only the last `window` (plus
the first `sinks`) when it is a sliding-window head, and the kernel skips the
key tiles a sliding-window head never reads.
The score of a head mask (`bosch.hf.HFEvaluator`) is the mean log-probability
of the answer tokens of passkey-retrieval prompts (a continuous score: higher
is better), which bosch.select maximizes at the asked SWA ratio.

--gguf-file loads a GGUF file of the --model directory instead of the hub
weights (transformers dequantizes it; bosch reads the same file).

Not run by CI (a whole search); python/tests/test_hf_models.py checks
bosch.hf's scores against bosch's own forward on the same samples.
"""

import argparse
import math

import bosch
from bosch.hf import HFEvaluator


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--gguf-file", default=None, help="a GGUF file in the --model directory")
    parser.add_argument("--ratio", type=float, default=0.5)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--sinks", type=int, default=0)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, help="checkpoint file (Ctrl-C, then --resume)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("-o", "--out", default="mask.json")
    args = parser.parse_args()

    evaluator = HFEvaluator(args.model, args.window, args.sinks, args.context, args.samples, seed=args.seed,
                            gguf_file=args.gguf_file)
    print(f"{args.model}: layout {evaluator.layout}, {len(evaluator.samples)} samples on {evaluator.device}")
    result = bosch.select(evaluator, ratio=args.ratio, seed=args.seed, checkpoint=args.checkpoint,
                          resume=args.resume, callbacks=[bosch.ProgressReporter()])
    print(result)
    print(bosch.to_grid(result.mask), end="")
    bosch.write_mask(args.out, result, metadata={"model": args.model, "window": args.window,
                                                 "sinks": args.sinks, "context": args.context})
    print(f"wrote {args.out} (normalized score {result.normalized_score:.4f}; "
          f"{'' if math.isfinite(result.score) else 'no '}exact-count mask evaluated)")


if __name__ == "__main__":
    main()
