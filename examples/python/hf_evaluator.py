#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""BOSCH on a Hugging Face model: per-head sliding windows through an
attention mask built per KV head, scored in PyTorch.

    pip install torch "transformers>=4.48"
    python examples/python/hf_evaluator.py --model HuggingFaceTB/SmolLM2-135M-Instruct \\
        --ratio 0.5 --window 64 --context 512 -o mask.json

Every attention layer of the model is routed through `windowed_attention`
(registered with transformers' AttentionInterface): for layer l it builds, per
query head h, the keys that head may see -- all earlier keys when KV head
h // group is full attention, only the last `window` (plus the first `sinks`)
when it is a sliding-window head -- and runs scaled-dot-product attention
with that mask. The score of a head mask is the mean log-probability of the
answer tokens of passkey-retrieval prompts (a continuous score: higher is
better), which bosch.select maximizes at the asked SWA ratio.

The window rule is the one of the C++ evaluator: an SWA query at position i
sees the keys j with i - window < j <= i, plus the keys j < sinks.
`window_mask` is plain array code that works on NumPy arrays (the package's
tests check it against a brute-force loop) and on torch tensors (here). The
model runs one unpadded sequence at a time; the attention mask transformers
passes in is not used (the causal part is in `window_mask`).

Not run by CI (it needs torch, transformers and a model download).
"""

import argparse
import math

import numpy as np

import bosch


def window_mask(swa_kv, num_query_heads, q_positions, k_positions, window, sinks=0):
    """Which keys each query head may attend to.

    swa_kv: bool (kv_heads,), True = that KV head uses a sliding window.
    q_positions: (q,) positions of the queries; k_positions: (k,) of the keys.
    Returns bool (num_query_heads, q, k): query head h at q_positions[i] sees
    the key at k_positions[j] iff it is not in the future and, for an SWA head
    (KV head h // (num_query_heads // kv_heads)), it is one of the last
    `window` positions or one of the first `sinks`.
    Works for NumPy arrays and torch tensors alike (only indexing, broadcasting
    and comparisons).
    """
    kv_heads = swa_kv.shape[0]
    if num_query_heads % kv_heads != 0:
        raise ValueError(f"{num_query_heads} query heads do not divide into {kv_heads} KV heads")
    group = num_query_heads // kv_heads
    head_to_kv = [h // group for h in range(num_query_heads)]
    swa_q = swa_kv[head_to_kv][:, None, None]  # (Hq, 1, 1)
    delta = q_positions[:, None] - k_positions[None, :]  # (q, k): how far back the key is
    causal = delta >= 0
    local = (delta < window) | (k_positions[None, :] < sinks)
    return causal & (local | ~swa_q)


class HFEvaluator:
    """Scores head masks with a Hugging Face causal LM (torch)."""

    def __init__(self, model_name, window, sinks=0, context=512, samples=4, device=None, seed=0):
        import torch
        from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.window, self.sinks = window, sinks
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        AttentionInterface.register("bosch_windows", self._attention)
        try:  # transformers >= 4.53 also asks which mask builder goes with an implementation
            from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

            ALL_MASK_ATTENTION_FUNCTIONS.register("bosch_windows", sdpa_mask)
        except ImportError:
            pass
        self.tokenizer = AutoTokenizer.from_pretrained(model_name)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_name, attn_implementation="bosch_windows", torch_dtype=torch.float32
        ).to(self.device).eval()
        cfg = self.model.config
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.layout = bosch.HeadLayout(cfg.num_hidden_layers, cfg.num_attention_heads, kv_heads)
        self.samples = make_passkey_samples(self.tokenizer, context, samples, seed)
        self._swa = None  # the mask being scored, (layers, kv_heads) bool tensor

    def _attention(self, module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
        """AttentionInterface function: scaled-dot-product attention with the
        per-head window mask of the current head mask. query: (b, Hq, q, d);
        key, value: (b, Hkv, k, d). The parameters are in the order of
        transformers' own attention functions (dropout before scaling), which
        wrappers such as kvpress's attention patch pass positionally."""
        torch = self.torch
        q_len, k_len = query.shape[-2], key.shape[-2]
        k_pos = torch.arange(k_len, device=query.device)
        q_pos = k_pos[k_len - q_len:]
        allowed = window_mask(self._swa[module.layer_idx], query.shape[1], q_pos, k_pos, self.window, self.sinks)
        group = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=allowed[None], dropout_p=0.0, scale=scaling
        )
        return out.transpose(1, 2).contiguous(), None

    def evaluate(self, mask):
        """Mean over samples of the mean log-probability of the answer tokens."""
        torch = self.torch
        self._swa = torch.as_tensor(np.asarray(mask, dtype=bool), device=self.device)
        total = 0.0
        with torch.no_grad():
            for prompt_ids, answer_ids in self.samples:
                ids = torch.tensor([prompt_ids + answer_ids], device=self.device)
                logits = self.model(ids).logits[0, len(prompt_ids) - 1:-1].float()
                logp = torch.log_softmax(logits, dim=-1)
                total += logp[torch.arange(len(answer_ids)), torch.tensor(answer_ids)].mean().item()
        return total / len(self.samples)


def make_passkey_samples(tokenizer, context, samples, seed):
    """Passkey retrieval: a number hidden at a random depth of filler text,
    asked for at the end. Returns (prompt token ids, answer token ids) pairs of
    about `context` tokens."""
    rng = np.random.default_rng(seed)
    filler = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
    out = []
    for _ in range(samples):
        key = str(rng.integers(10000, 99999))
        needle = f"The pass key is {key}. Remember it. {key} is the pass key. "
        question = "What is the pass key? The pass key is"
        n = max(1, (context - 40) // max(1, len(tokenizer(filler).input_ids)))
        depth = int(rng.integers(0, n + 1))
        text = filler * depth + needle + filler * (n - depth) + question
        out.append((tokenizer(text).input_ids, tokenizer(" " + key, add_special_tokens=False).input_ids))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
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

    evaluator = HFEvaluator(args.model, args.window, args.sinks, args.context, args.samples, seed=args.seed)
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
